import { describe, expect, it } from 'vitest';
import { type ContractContext, makeWorkspace, sha256, uniqueName } from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';

/** A ready checkpoint with a chosen id. */
async function readyWithId(store: MetadataStore, workspaceId: string, id: string): Promise<string> {
  await store.checkpoints.createPending({ id, workspaceId, reason: 'manual' });
  await store.checkpoints.markReady(id, { rootTree: sha256(`tree:${id}`) });
  return id;
}

/** A run with a chosen id in a new workspace of `tenantId`. */
async function runWithId(store: MetadataStore, tenantId: string, id: string): Promise<string> {
  const workspace = await store.workspaces.create({ tenantId, name: uniqueName('ws') });
  const deploymentId = sha256(`deployment:${tenantId}`);
  await store.deployments.put({ tenantId, id: deploymentId, spec: '{"provider":"local"}' });
  return (await store.runs.create({ id, tenantId, workspaceId: workspace.id, channel: null, deploymentId })).id;
}

/** Contract cases for id prefixes and `latest` (checkpoints and runs), always within a tenant. */
export function describeIdPrefixCases(ctx: ContractContext): void {
  describe('id prefixes and latest', () => {
    const fixture = ctx.sharedFixture((database) => database.open());

    it('checkpoints: exact prefix matches of one tenant only, ordered by id, bounded by limit', async () => {
      const store = await fixture();
      const salt = uniqueName('c').replace(/[^a-z0-9]/g, '');
      const { tenantId, workspaceId } = await makeWorkspace(store);
      const other = await makeWorkspace(store);
      const mine = [await readyWithId(store, workspaceId, `${salt}-b`), await readyWithId(store, workspaceId, `${salt}-a`)];
      await readyWithId(store, other.workspaceId, `${salt}-c`);
      expect((await store.checkpoints.findByPrefix(tenantId, salt, 5)).map((c) => c.id)).toEqual([...mine].sort());
      expect((await store.checkpoints.findByPrefix(tenantId, salt, 1)).map((c) => c.id)).toEqual([`${salt}-a`]);
      expect((await store.checkpoints.findByPrefix(other.tenantId, salt, 5)).map((c) => c.id)).toEqual([`${salt}-c`]);
      expect(await store.checkpoints.findByPrefix(tenantId, `${salt}-c`, 5)).toEqual([]);
    });

    it('checkpoints: LIKE wildcards are plain characters and case matters', async () => {
      const store = await fixture();
      const salt = uniqueName('w').replace(/[^a-z0-9]/g, '');
      const { tenantId, workspaceId } = await makeWorkspace(store);
      await readyWithId(store, workspaceId, `${salt}_x1`);
      await readyWithId(store, workspaceId, `${salt}yx1`);
      await readyWithId(store, workspaceId, `${salt}%x1`);
      expect((await store.checkpoints.findByPrefix(tenantId, `${salt}_`, 5)).map((c) => c.id)).toEqual([`${salt}_x1`]);
      expect((await store.checkpoints.findByPrefix(tenantId, `${salt}%`, 5)).map((c) => c.id)).toEqual([`${salt}%x1`]);
      expect(await store.checkpoints.findByPrefix(tenantId, salt.toUpperCase(), 5)).toEqual([]);
    });

    it("checkpoints: latestReady is the tenant's newest ready one in any workspace, never a pending one", async () => {
      const store = await fixture();
      const { tenantId, workspaceId } = await makeWorkspace(store);
      expect(await store.checkpoints.latestReady(tenantId)).toBeUndefined();
      const second = await store.workspaces.create({ tenantId, name: uniqueName('ws') });
      await readyWithId(store, workspaceId, uniqueName('old'));
      const newest = await readyWithId(store, second.id, uniqueName('new'));
      await store.checkpoints.createPending({ workspaceId, reason: 'manual' });
      const other = await makeWorkspace(store);
      await readyWithId(store, other.workspaceId, uniqueName('foreign'));
      expect((await store.checkpoints.latestReady(tenantId))?.id).toBe(newest);
    });

    it('runs: prefix matches within a tenant (or every tenant with null); latest is the newest run', async () => {
      const store = await fixture();
      const salt = uniqueName('r').replace(/[^a-z0-9]/g, '');
      const { tenantId } = await makeWorkspace(store);
      const other = await makeWorkspace(store);
      const a = await runWithId(store, tenantId, `${salt}-a`);
      const b = await runWithId(store, other.tenantId, `${salt}-b`);
      const c = await runWithId(store, tenantId, `${salt}_c`);
      expect((await store.runs.findByPrefix(tenantId, salt, 5)).map((r) => r.id)).toEqual([a, c].sort());
      expect((await store.runs.findByPrefix(tenantId, `${salt}-`, 5)).map((r) => r.id)).toEqual([a]);
      expect((await store.runs.findByPrefix(other.tenantId, salt, 5)).map((r) => r.id)).toEqual([b]);
      expect((await store.runs.findByPrefix(null, salt, 5)).map((r) => r.id)).toEqual([a, b, c].sort());
      expect((await store.runs.latest(tenantId))?.id).toBe(c);
      expect((await store.runs.latest(other.tenantId))?.id).toBe(b);
      expect((await store.runs.latest(null))?.id).toBe(c);
      const empty = await store.tenants.create({ name: uniqueName('tenant') });
      expect(await store.runs.latest(empty.id)).toBeUndefined();
    });
  });
}
