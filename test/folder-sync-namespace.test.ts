import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Folders } from '../src/folders/folders.js';
import { FolderSync } from '../src/folders/sandbox-sync.js';
import { SYNC_TENANT } from '../src/model/tenants.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import { BACKENDS } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { body, writeIn } from './support/folder-sync.js';
import { openTestService, type TestService } from './support/service.js';

describe('the sync checkpoints live where no token reaches', () => {
  let service: TestService;
  let workers: ContentWorkers;
  beforeAll(async () => {
    service = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
    workers = new ContentWorkers();
  }, 120_000);
  afterAll(async () => {
    await workers?.close();
    await service?.close();
  });

  it('a service token of the tenant cannot list or read them, and no tenant of that name can be opened or given a token', async () => {
    const { hf } = service;
    const dir = path.join(hf.config.meta.kind === 'sqlite' ? path.dirname(hf.config.meta.path) : '/tmp', 'ns-test');
    const provider = new LocalSandboxProvider({ root: path.join(dir, 'sandboxes') });
    const folders = new Folders({ meta: hf.meta, blobs: hf.blobs, workers });
    const sync = new FolderSync({
      meta: hf.meta,
      blobs: hf.blobs,
      workers,
      cacheDir: path.join(dir, 'cache'),
      folders,
      endpoints: new SandboxEndpoints(() => provider),
    });
    const ref = { tenantId: hf.tenant.id, scope: 'task' as const, ownerId: 'private-task' };
    await folders.write(ref, 'secret-plan.txt', body('only for the run'), { operationId: 'w' });
    const deployment = await hf.deployments.create(service.deploymentBase);
    const workspace = await hf.meta.workspaces.create({ tenantId: hf.tenant.id, name: 'ns-run' });
    const run = await hf.meta.runs.create({
      tenantId: hf.tenant.id,
      workspaceId: workspace.id,
      channel: null,
      deploymentId: deployment.id,
      bindings: { task: 'private-task' },
    });
    const sandbox = await provider.create();
    const ctx = { tenant: hf.tenant, run, sandbox, epoch: 0 };
    await sync.attach(ctx, 'cold');
    await writeIn(sandbox, 'task/more.txt', 'edited');
    await sync.save(ctx, 'turn_end');
    const syncWorkspaces = await sync.sync.syncSnapshots.workspaces();
    expect(syncWorkspaces.length).toBe(1);
    const head = syncWorkspaces[0]?.head;
    expect(head?.status).toBe('ready');
    // Only the head is kept: older sync checkpoints are forgotten as the engine goes.
    expect((await sync.sync.syncSnapshots.log(syncWorkspaces[0]?.name as string)).map((c) => c.id)).toEqual([head?.id]);

    for (const url of [`/v1/checkpoints/${head?.id}`, `/v1/checkpoints/${head?.id.slice(0, 12)}`, `/v1/checkpoints/${head?.id}/tree`]) {
      expect((await service.api('GET', url)).status, url).toBe(404);
    }
    const latest = await service.api('GET', '/v1/checkpoints/latest');
    expect((latest.body as { id?: string }).id).not.toBe(head?.id);
    expect((await hf.snapshots.workspaces()).map((w) => w.name)).not.toContain(syncWorkspaces[0]?.name);
    expect(await codeOf(hf.forTenant(SYNC_TENANT))).toBe('INVALID_INPUT');
    expect(await codeOf(hf.tokens.create({ tenant: SYNC_TENANT, name: 'x', admin: false }))).toBe('INVALID_INPUT');
    const viaApi = await service.api('POST', '/v1/tokens', { tenant: SYNC_TENANT, name: 'x' }, service.adminToken);
    expect(viaApi.status).toBeGreaterThanOrEqual(400);
    await provider.destroy(sandbox.id);
  });
});
