import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type ContractContext, makeWorkspace, sha256, uniqueName } from './metadata-contract-support.contract.js';

/**
 * Contract case of migration 11: a store written before it (user collections and run bindings
 * naming users) keeps working after it, keyed by the users' row ids.
 */
export function describeUserOwnersMigration(ctx: ContractContext): void {
  describe('migration 11: user owners by id', () => {
    it("moves user collections, run bindings and sync states from a user's name to the id of the user it meant", async () => {
      const database = await ctx.freshDatabase();
      const store = await database.open();
      const { tenantId, workspaceId } = await makeWorkspace(store);
      const deploymentId = sha256(`deployment:${workspaceId}`);
      await store.deployments.put({ tenantId, id: deploymentId, spec: '{"provider":"local"}' });
      const newRun = async (bindings: Record<string, string>) => {
        const workspace = await store.workspaces.create({ tenantId, name: uniqueName('ws') });
        return store.runs.create({ tenantId, workspaceId: workspace.id, channel: null, deploymentId, bindings });
      };
      // What version 10 stored: names. The clock is strictly increasing, so the order below is the order of the rows.
      const oldAda = await store.users.create({ tenantId, name: 'ada', role: 'member' });
      const oldRun = await newRun({ user: 'ada', task: 'ada' });
      await store.users.revoke(tenantId, 'ada');
      const ada = await store.users.create({ tenantId, name: 'ada', role: 'viewer' });
      const run = await newRun({ user: 'ada' });
      const ghostRun = await newRun({ user: 'ghost' });
      const files = await store.folders.ensureCollection(tenantId, 'user', 'ada');
      const ghost = await store.folders.ensureCollection(tenantId, 'user', 'ghost');
      const task = await store.folders.ensureCollection(tenantId, 'task', 'ada');
      const file = { path: 'notes.txt', kind: 'file' as const, size: 3, sha256: sha256('notes'), chunks: [[sha256('c'), 3] as const] };
      await store.folders.insertFile(files.id, { ...file, collectionId: files.id, executable: false, contentType: null, updatedAt: 1 });
      const sync = (runId: string, sandboxId: string) => ({ provider: 'local', sandboxId, scope: 'user' as const, runId, tenantId });
      await store.folderSync.create({ ...sync(oldRun.id, 'sb-old'), collectionId: files.id, bindings: { user: 'ada', task: 'ada' } });
      await store.folderSync.create({ ...sync(run.id, 'sb-new'), collectionId: files.id, bindings: { user: 'ada' } });
      await store.db.deleteFrom('holdfast_schema_migrations').where('version', '=', 11).execute();
      await store.close();

      const migrated = await database.open();
      const applied = await migrated.db.selectFrom('holdfast_schema_migrations').select('version').where('version', '=', 11).execute();
      expect(applied).toHaveLength(1);
      // The live ada's collection keeps its files, found by her id; the name finds nothing now.
      const moved = await migrated.folders.findCollection(tenantId, 'user', ada.id);
      expect(moved?.id).toBe(files.id);
      expect((await migrated.folders.listFiles(files.id, { trash: false, limit: 10 })).map((f) => f.path)).toEqual(['notes.txt']);
      expect(await migrated.folders.findCollection(tenantId, 'user', 'ada')).toBeUndefined();
      // No user was ever named ghost: that collection stays as it was, reached by no id. Other scopes keep their owners.
      expect((await migrated.folders.findCollection(tenantId, 'user', 'ghost'))?.id).toBe(ghost.id);
      expect((await migrated.folders.findCollection(tenantId, 'task', 'ada'))?.id).toBe(task.id);
      // A run is bound to the ada who was live when it was created: the old run to the revoked one.
      expect((await migrated.runs.find(tenantId, oldRun.id))?.bindings).toEqual({ user: oldAda.id, task: 'ada' });
      expect((await migrated.runs.find(tenantId, run.id))?.bindings).toEqual({ user: ada.id });
      expect((await migrated.runs.find(tenantId, ghostRun.id))?.bindings).toEqual({ user: 'ghost' });
      const states = await migrated.folderSync.listByCollection(files.id);
      expect(Object.fromEntries(states.map((s) => [s.sandboxId, s.bindings]))).toEqual({
        'sb-old': { user: oldAda.id, task: 'ada' },
        'sb-new': { user: ada.id },
      });
      const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM holdfast_schema_migrations WHERE version = 11`.execute(
        migrated.db,
      );
      expect(Number(rows[0]?.n)).toBe(1);
    });
  });
}
