import { describe, expect, it } from 'vitest';
import { type ContractContext, makeWorkspace, sha256, uniqueName } from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';

/** A tenant with a deployment and a run on it bound to `bindings`. */
async function makeBoundRun(store: MetadataStore, bindings: Record<string, string> | null) {
  const { tenantId, workspaceId } = await makeWorkspace(store);
  const deploymentId = sha256(`deployment:${workspaceId}`);
  await store.deployments.put({ tenantId, id: deploymentId, spec: '{"provider":"local"}' });
  const run = await store.runs.create({ tenantId, workspaceId, channel: null, deploymentId, bindings });
  return { tenantId, run };
}

/** Contract cases for users, user and run tokens, run bindings and the end of a run. */
export function describePrincipalsCases(ctx: ContractContext): void {
  describe('users, user and run tokens, run bindings', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open() }));

    it('a live name is unique per tenant; revoking keeps the row, and the name can be added again as a new user', async () => {
      const { store } = await fixture();
      const { tenantId } = await makeWorkspace(store);
      const { tenantId: otherTenant } = await makeWorkspace(store);
      const ada = await store.users.create({ tenantId, name: 'ada', role: 'member' });
      expect(ada).toMatchObject({ tenantId, name: 'ada', role: 'member', revokedAt: null });
      await expect(store.users.create({ tenantId, name: 'ada', role: 'viewer' })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      await store.users.create({ tenantId: otherTenant, name: 'ada', role: 'viewer' }); // another tenant's ada
      await expect(store.users.create({ tenantId, name: 'bob', role: 'owner' as 'member' })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
      });
      await expect(store.users.create({ tenantId: uniqueName('no-tenant'), name: 'x', role: 'member' })).rejects.toMatchObject({
        code: 'CONFLICT',
      });
      expect((await store.users.findActive(tenantId, 'ada'))?.id).toBe(ada.id);
      const revoked = await store.users.revoke(tenantId, 'ada');
      expect(revoked).toMatchObject({ id: ada.id });
      expect(revoked?.revokedAt).toEqual(expect.any(Number));
      expect(await store.users.revoke(tenantId, 'ada')).toBeUndefined();
      expect(await store.users.findActive(tenantId, 'ada')).toBeUndefined();
      expect((await store.users.findActive(otherTenant, 'ada'))?.role).toBe('viewer');
      const again = await store.users.create({ tenantId, name: 'ada', role: 'viewer' });
      expect(again.id).not.toBe(ada.id);
      expect((await store.users.list(tenantId)).map((u) => [u.name, u.revokedAt === null])).toEqual([
        ['ada', expect.any(Boolean)],
        ['ada', expect.any(Boolean)],
      ]);
      expect((await store.users.list(tenantId)).filter((u) => u.revokedAt === null).map((u) => u.id)).toEqual([again.id]);
    });

    it("a user token resolves with the user's name and role until the user is revoked, and never again after", async () => {
      const { store } = await fixture();
      const { tenantId } = await makeWorkspace(store);
      const user = await store.users.create({ tenantId, name: 'grace', role: 'viewer' });
      const hash = sha256(uniqueName('user-token'));
      const token = await store.tokens.create({ tenantId, name: 'grace-laptop', hash, admin: false, userId: user.id });
      expect(token).toMatchObject({ userId: user.id, runId: null, admin: false });
      expect(await store.tokens.findByHash(hash)).toMatchObject({ id: token.id, user: { name: 'grace', role: 'viewer' }, run: null });
      await store.users.revoke(tenantId, 'grace');
      expect(await store.tokens.findByHash(hash)).toBeUndefined();
      expect((await store.tokens.list()).find((t) => t.id === token.id)?.revokedAt).toEqual(expect.any(Number));
      // A new user of the same name does not revive the old token.
      await store.users.create({ tenantId, name: 'grace', role: 'member' });
      expect(await store.tokens.findByHash(hash)).toBeUndefined();
    });

    it('a token is bound to a user or a run, never both, and an admin token to neither; unknown ones are refused', async () => {
      const { store } = await fixture();
      const { tenantId, run } = await makeBoundRun(store, { task: 't1' });
      const user = await store.users.create({ tenantId, name: 'lin', role: 'member' });
      const make = (input: { admin: boolean; userId?: string; runId?: string }) =>
        store.tokens.create({ tenantId, name: 'x', hash: sha256(uniqueName('t')), ...input });
      await expect(make({ admin: false, userId: user.id, runId: run.id })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await expect(make({ admin: true, userId: user.id })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await expect(make({ admin: true, runId: run.id })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await expect(make({ admin: false, userId: uniqueName('nobody') })).rejects.toMatchObject({ code: 'CONFLICT' });
      await expect(make({ admin: false, runId: uniqueName('norun') })).rejects.toMatchObject({ code: 'CONFLICT' });
      // A token of one tenant pointing at another tenant's user or run resolves to nothing.
      const { tenantId: otherTenant } = await makeWorkspace(store);
      for (const owner of [{ userId: user.id }, { runId: run.id }]) {
        const hash = sha256(uniqueName('cross'));
        await store.tokens.create({ tenantId: otherTenant, name: 'cross', hash, admin: false, ...owner });
        expect(await store.tokens.findByHash(hash)).toBeUndefined();
      }
    });

    it('a run keeps its bindings; its token resolves with them, also after the run ended (the policy refuses it then)', async () => {
      const { store } = await fixture();
      const bindings = { task: 'task-1', agent: 'agent-1', user: 'ada', project: 'p' };
      const { tenantId, run } = await makeBoundRun(store, bindings);
      expect(run).toMatchObject({ bindings, endedAt: null });
      const { run: unbound } = await makeBoundRun(store, null);
      expect(unbound.bindings).toBeNull();
      const hash = sha256(uniqueName('run-token'));
      const token = await store.tokens.create({ tenantId, name: `run ${run.id}`, hash, admin: false, runId: run.id });
      expect(await store.tokens.findByHash(hash)).toMatchObject({ id: token.id, runId: run.id, user: null, run: { bindings } });
      const ended = await store.runs.end(run.id);
      expect(ended.endedAt).toEqual(expect.any(Number));
      expect((await store.runs.end(run.id)).endedAt).toBe(ended.endedAt); // idempotent: keeps the first end
      expect(await store.runs.claim(run.id, 'server-a', 60_000)).toBeUndefined(); // an ended run takes no lease
      expect(await store.tokens.findByHash(hash)).toMatchObject({ runId: run.id });
      await expect(store.runs.end(uniqueName('missing'))).rejects.toMatchObject({ code: 'NOT_FOUND' });
    });
  });
}
