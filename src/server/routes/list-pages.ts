import { CREATED_KEY, type Page, type PageRequest, readPage } from '../../core/page-cursor.js';
import { parseStoredSpec } from '../../deployments/deployment-spec.js';
import type { Deployment } from '../../deployments/deployments.js';
import type { Channel, MetadataStore, Run, TenantServices, Turn } from '../../index.js';
import type { Checkpoint } from '../../metadata/metadata-store.js';

/**
 * The keyset pages of API v1's tenant listings, one function per list, each over its table's
 * own order (see `core/page-cursor.ts`). Ids are resolved, and tenancy checked, by the
 * tenant's services, exactly as the unpaged listings do; only the page is read here.
 */

/** Turns are ordered by their sequence number within the run. */
const SEQ_KEY = ['number'] as const;
/** Channels are ordered by name. */
const NAME_KEY = ['string'] as const;

/** The tenant's runs, newest first. */
export function runsPage(meta: MetadataStore, services: TenantServices, request: PageRequest): Promise<Page<Run>> {
  return readPage(
    request,
    CREATED_KEY,
    (after, n) => meta.runs.list(services.tenant.id, n, after),
    (r) => [r.createdAt, r.id],
  );
}

/** Run `runId`'s turns (id, prefix or `latest`), newest first. */
export async function turnsPage(meta: MetadataStore, services: TenantServices, runId: string, request: PageRequest): Promise<Page<Turn>> {
  const run = await services.runs.get(runId);
  return readPage(
    request,
    SEQ_KEY,
    (after, n) => meta.turns.list(run.id, n, after?.[0]),
    (t) => [t.seq],
  );
}

/** Run `runId`'s checkpoints, newest first, failed ones with their errors. */
export async function checkpointsPage(
  meta: MetadataStore,
  services: TenantServices,
  runId: string,
  request: PageRequest,
): Promise<Page<Checkpoint>> {
  const run = await services.runs.get(runId);
  return readPage(
    request,
    CREATED_KEY,
    (after, limit) => meta.checkpoints.listByWorkspace(run.workspaceId, after === undefined ? { limit } : { limit, after }),
    (c) => [c.createdAt, c.id],
  );
}

/** The tenant's deployments, newest first. */
export async function deploymentsPage(meta: MetadataStore, services: TenantServices, request: PageRequest): Promise<Page<Deployment>> {
  const page = await readPage(
    request,
    CREATED_KEY,
    (after, limit) => meta.deployments.list(services.tenant.id, after === undefined ? { limit } : { limit, after }),
    (d) => [d.createdAt, d.id],
  );
  // Stored specs were normalized before they were hashed and written; fields added since read as their defaults.
  const items = page.items.map((r) => ({ id: r.id, spec: parseStoredSpec(r.spec), createdAt: r.createdAt }));
  return { items, nextCursor: page.nextCursor };
}

/** The tenant's channels by name. */
export function channelsPage(meta: MetadataStore, services: TenantServices, request: PageRequest): Promise<Page<Channel>> {
  return readPage(
    request,
    NAME_KEY,
    (after, limit) => meta.deployments.listChannels(services.tenant.id, after === undefined ? { limit } : { limit, after: after[0] }),
    (c) => [c.name],
  );
}
