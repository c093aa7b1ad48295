import { describe, expect, it } from 'vitest';
import { type ContractContext, uniqueName } from './metadata-contract-support.contract.js';
import type { FolderSyncKey, MetadataStore } from './metadata-store.js';

async function newState(store: MetadataStore, scope: FolderSyncKey['scope'] = 'task') {
  const tenant = await store.tenants.create({ name: uniqueName('tenant') });
  const collection = await store.folders.ensureCollection(tenant.id, scope, uniqueName('owner'));
  const key: FolderSyncKey = { provider: 'bwrap', sandboxId: uniqueName('sbx'), scope };
  const state = await store.folderSync.create({
    ...key,
    runId: uniqueName('run'),
    tenantId: tenant.id,
    collectionId: collection.id,
    bindings: { task: collection.ownerId },
  });
  return { key, state, tenant, collection };
}

/** Contract cases of the work-folder sync states. */
export function describeFolderSyncCases(ctx: ContractContext): void {
  describe('work-folder sync states', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open(), other: await database.open() }));

    it('creates a never-saved state once per sandbox and scope', async () => {
      const { store } = await fixture();
      const { key, state, collection } = await newState(store);
      expect(state).toMatchObject({
        ...key,
        collectionId: collection.id,
        bindings: { task: collection.ownerId },
        baseline: {},
        pending: {},
        intents: null,
        lastRootTree: null,
        state: 'never_saved',
        lastSavedAt: null,
        finalCheckpointAt: null,
        error: null,
        refresh: { state: 'none', at: null, error: null },
      });
      expect(await store.folderSync.find(key)).toEqual(state);
      await expect(
        store.folderSync.create({ ...key, runId: 'r', tenantId: state.tenantId, collectionId: collection.id, bindings: {} }),
      ).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      expect(await store.folderSync.find({ ...key, scope: 'user' })).toBeUndefined();
    });

    it('applies patches field by field and keeps what a patch leaves out', async () => {
      const { store, other } = await fixture();
      const { key } = await newState(store);
      const baseline = { 'a/b.txt': '["file","ab",false]', a: '["directory",null,false]', 'é/ü': '["file","cd",true]' };
      const pending = { 'a/b.txt': { operationId: 'op-1', signature: '["file","ef",false]' } };
      await store.folderSync.update(key, { state: 'saving', baseline, pending, lastRootTree: 'tree-1' });
      await store.folderSync.update(key, { intents: { imports: { x: 's' }, removals: ['y'] }, refreshState: 'queued' });
      const saved = await other.folderSync.update(key, { state: 'saved', lastSavedAt: 42, error: { code: 'FORBIDDEN', message: 'm' } });
      expect(saved).toMatchObject({
        baseline,
        pending,
        lastRootTree: 'tree-1',
        intents: { imports: { x: 's' }, removals: ['y'] },
        state: 'saved',
        lastSavedAt: 42,
        finalCheckpointAt: null,
        error: { code: 'FORBIDDEN', message: 'm' },
        refresh: { state: 'queued', error: null },
      });
      expect(saved.refresh.at).toEqual(expect.any(Number));
      const cleared = await store.folderSync.update(key, {
        intents: null,
        error: null,
        refreshState: 'failed',
        refreshError: { code: 'X', message: 'n' },
      });
      expect(cleared).toMatchObject({
        intents: null,
        error: null,
        refresh: { state: 'failed', error: { code: 'X', message: 'n' } },
        lastSavedAt: 42,
      });
      await expect(store.folderSync.update({ ...key, sandboxId: 'nope' }, { state: 'saved' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    });

    it('lists the states of a collection and of a run, and forgets a sandbox', async () => {
      const { store } = await fixture();
      const { key, state, collection } = await newState(store, 'project');
      const second = { provider: 'local', sandboxId: uniqueName('sbx'), scope: 'project' as const };
      await store.folderSync.create({ ...second, runId: 'run-b', tenantId: state.tenantId, collectionId: collection.id, bindings: {} });
      expect((await store.folderSync.listByCollection(collection.id)).map((s) => s.sandboxId)).toEqual([key.sandboxId, second.sandboxId]);
      expect((await store.folderSync.listByRun(state.tenantId, state.runId)).map((s) => s.sandboxId)).toEqual([key.sandboxId]);
      expect(await store.folderSync.listByRun(state.tenantId, 'other-run')).toEqual([]);
      expect(await store.folderSync.deleteSandbox(second.provider, second.sandboxId)).toBe(1);
      expect((await store.folderSync.listByCollection(collection.id)).map((s) => s.sandboxId)).toEqual([key.sandboxId]);
    });
  });
}
