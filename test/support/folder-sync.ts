import { createHash, randomUUID } from 'node:crypto';
import path from 'node:path';
import { type FolderRef, Folders } from '../../src/folders/folders.js';
import { FolderSync } from '../../src/folders/sandbox-sync.js';
import type { SyncEndpoints, SyncFolders } from '../../src/folders/sync/sync-engine.js';
import type { Run, StoredRunBindings } from '../../src/metadata/metadata-store.js';
import type { FolderScope } from '../../src/model/folder-scopes.js';
import type { TenantScope } from '../../src/model/tenants.js';
import type { RunSandboxContext } from '../../src/runs/run-extension.js';
import { SandboxEndpoints } from '../../src/sandbox/endpoints/sandbox-endpoints.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { LocalSandboxProvider } from '../../src/sandbox/providers/local.js';
import type { SandboxHandle, SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './backends.js';
import { expectBwrapInstalled } from './sandbox-processes.js';

/** The providers the sync tests run on: the host directory route and a real bwrap jail (agent or shell). */
export const SYNC_PROVIDERS = ['local', 'bwrap'] as const;

/** Every sync provider on every backend pair, named for `describe.each`. */
export const SYNC_CASES = SYNC_PROVIDERS.flatMap((provider) =>
  BACKENDS.map((backend) => ({ provider, backend, name: `${provider} on ${backend.name}` })),
);

/** Lowercase hex SHA-256. */
export const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

/** Backends, a `Folders`, real sandboxes and a {@link FolderSync} over them, with helpers to drive it. */
export interface SyncFixture {
  readonly b: OpenedBackends;
  readonly folders: Folders;
  readonly provider: SandboxProvider;
  readonly endpoints: SandboxEndpoints;
  readonly tenant: TenantScope;
  /** A sync over the fixture's stores, with the folder and endpoint slices optionally wrapped (fault doubles). */
  sync(wrap?: { folders?: (f: SyncFolders) => SyncFolders; endpoints?: (e: SyncEndpoints) => SyncEndpoints }): FolderSync;
  /** A run of the tenant bound to `bindings`. */
  run(bindings: StoredRunBindings): Promise<Run>;
  /** A fresh sandbox and the context an extension gets for `run` in it. */
  context(run: Run, sandbox?: SandboxHandle): Promise<RunSandboxContext>;
  ref(scope: FolderScope, ownerId: string): FolderRef;
  close(): Promise<void>;
}

/** Opens a {@link SyncFixture} on `backend` with sandboxes of `providerName`. */
export async function openSyncFixture(backend: BackendCase, providerName: (typeof SYNC_PROVIDERS)[number]): Promise<SyncFixture> {
  const b = await backend.open();
  const root = path.join(b.dir, 'sandboxes', providerName);
  if (providerName === 'bwrap') expectBwrapInstalled();
  const provider: SandboxProvider = providerName === 'bwrap' ? new BwrapSandboxProvider({ root }) : new LocalSandboxProvider({ root });
  const endpoints = new SandboxEndpoints(() => provider);
  const folders = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers });
  const tenant = await b.snapshots.tenant(true);
  const deploymentId = sha(`deployment:${randomUUID()}`);
  await b.meta.deployments.put({ tenantId: tenant.id, id: deploymentId, spec: JSON.stringify({ provider: providerName }) });
  const sandboxes: SandboxHandle[] = [];
  return {
    b,
    folders,
    provider,
    endpoints,
    tenant,
    sync(wrap = {}) {
      return new FolderSync({
        meta: b.meta,
        blobs: b.blobs,
        workers: b.workers,
        cacheDir: path.join(b.dir, 'sync-cache'),
        folders: wrap.folders?.(folders) ?? folders,
        endpoints: wrap.endpoints?.(endpoints) ?? endpoints,
      });
    },
    async run(bindings) {
      const workspace = await b.meta.workspaces.create({ tenantId: tenant.id, name: `run-${randomUUID()}` });
      return b.meta.runs.create({ tenantId: tenant.id, workspaceId: workspace.id, channel: null, deploymentId, bindings });
    },
    async context(run, sandbox) {
      const handle = sandbox ?? (await provider.create());
      sandboxes.push(handle);
      return { tenant, run, sandbox: handle, epoch: 0 };
    },
    ref: (scope, ownerId) => ({ tenantId: tenant.id, scope, ownerId }),
    async close() {
      try {
        await endpoints.close();
        for (const s of sandboxes) await provider.destroy(s.id).catch(() => undefined);
      } finally {
        await b.cleanup();
      }
    },
  };
}

/** Runs a shell script in the sandbox's home; rejects when it fails. */
export async function inSandbox(sandbox: SandboxHandle, script: string, stdin?: Uint8Array | string): Promise<Buffer> {
  const got = await sandbox.run(['sh', '-c', script], { cwd: sandbox.agentHome, ...(stdin === undefined ? {} : { stdin }) });
  if (got.code !== 0) throw new Error(`sandbox script failed (${got.code}): ${script}\n${got.stderr.toString('utf8')}`);
  return got.stdout;
}

/** The bytes of `rel` (relative to the home) in the sandbox. */
export function readIn(sandbox: SandboxHandle, rel: string): Promise<Buffer> {
  return inSandbox(sandbox, `cat -- "$1"`.replace('"$1"', JSON.stringify(rel)));
}

/** Writes `bytes` to `rel` (relative to the home, parents made) in the sandbox. */
export async function writeIn(sandbox: SandboxHandle, rel: string, bytes: Uint8Array | string): Promise<void> {
  const q = JSON.stringify(rel);
  await inSandbox(sandbox, `mkdir -p "$(dirname ${q})" && cat > ${q}`, bytes);
}

/** Whether `rel` exists in the sandbox. */
export async function existsIn(sandbox: SandboxHandle, rel: string): Promise<boolean> {
  return (await inSandbox(sandbox, `[ -e ${JSON.stringify(rel)} ] && echo yes || echo no`)).toString('utf8').trim() === 'yes';
}

/** A body of one piece. */
export async function* body(bytes: Uint8Array | string): AsyncGenerator<Uint8Array> {
  yield typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
}

/** Every receipt of a collection: how many operations it ever applied. */
export async function receiptCount(b: OpenedBackends, ref: FolderRef): Promise<number> {
  const collection = await b.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
  if (collection === undefined) return 0;
  const row = await b.meta.db
    .selectFrom('folder_operations')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('collection_id', '=', collection.id)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** The receipt of a write of `content` at `path` (the streamed write's fingerprint), if one was applied. */
export async function writeReceipt(b: OpenedBackends, ref: FolderRef, filePath: string, content: string, executable = false) {
  const collection = await b.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
  const print = sha(JSON.stringify(['write', filePath, sha(content), executable, null, true, false]));
  return b.meta.db
    .selectFrom('folder_operations')
    .selectAll()
    .where('collection_id', '=', collection?.id ?? '')
    .where('fingerprint', '=', print)
    .executeTakeFirst();
}
