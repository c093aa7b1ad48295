import { createHash } from 'node:crypto';
import { InputError } from '../../errors.js';
import type { Checkpoint, MetadataStore } from '../../metadata/metadata-store.js';

/**
 * The tenant whose workspaces hold the work-folder sync checkpoints of every tenant. No
 * token can name it: {@link checkTenantName} refuses every name starting with
 * {@link RESERVED_TENANT_PREFIX}, and every way to reach a tenant's services or mint its
 * tokens (`forTenant`, `holdfast token create --tenant`) goes through it, so a collection's
 * files never become readable through the checkpoint or workspace APIs.
 */
export const SYNC_TENANT = '.holdfast-sync';
/** Tenant names starting with this are Holdfast's own. */
export const RESERVED_TENANT_PREFIX = '.holdfast';

/** Refuses a tenant name Holdfast keeps for itself (`INVALID_INPUT`); returns it otherwise. */
export function checkTenantName(name: string): string {
  if (typeof name !== 'string' || name === '' || name.startsWith(RESERVED_TENANT_PREFIX)) {
    throw new InputError('INVALID_INPUT', `tenant name ${JSON.stringify(name)} is reserved or empty: choose another name`, {
      data: { field: 'tenant' },
    });
  }
  return name;
}

/** The sync workspace of one run's collection directory (one per run and scope, in {@link SYNC_TENANT}). */
export function syncWorkspaceName(tenantId: string, runId: string, scope: string): string {
  return `sync-${createHash('sha256').update(`${tenantId}\0${runId}\0${scope}`).digest('hex').slice(0, 40)}`;
}

/**
 * Forgets every finished checkpoint of `head`'s workspace but `head` (which the engine just
 * made the head): a sync workspace keeps one checkpoint, so storage does not grow with every
 * save. Pending ones are left (retention fails abandoned ones); the delete itself never
 * removes a current head. GC then collects what only the forgotten ones held.
 */
export async function keepOnlyHead(meta: MetadataStore, head: Checkpoint): Promise<void> {
  const older = (await meta.checkpoints.listByWorkspace(head.workspaceId))
    .filter((c) => c.id !== head.id && c.status !== 'pending')
    .map((c) => c.id);
  if (older.length > 0) await meta.checkpoints.deleteMany(older);
}
