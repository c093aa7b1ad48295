import { describe, expect, it } from 'vitest';
import { type ContractContext, makeReadyCheckpoint, makeWorkspace, sha256, uniqueName } from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';

/** A tenant with a deployment and a run on it. */
async function makeRun(store: MetadataStore): Promise<{ tenantId: string; workspaceId: string; runId: string; deploymentId: string }> {
  const { tenantId, workspaceId } = await makeWorkspace(store);
  const deploymentId = sha256(`deployment:${workspaceId}`);
  await store.deployments.put({ tenantId, id: deploymentId, spec: '{"provider":"local"}' });
  const run = await store.runs.create({ tenantId, workspaceId, channel: null, deploymentId });
  return { tenantId, workspaceId, runId: run.id, deploymentId };
}

/** Contract cases for deployments, channels, runs with their leases, turns and tokens. */
export function describeRunsCases(ctx: ContractContext): void {
  describe('runs, leases, deployments, tokens', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open(), other: await database.open() }));

    it('claiming bumps the epoch; a held lease cannot be claimed; an expired one is taken over and names its old owner', async () => {
      const { store } = await fixture();
      const { runId } = await makeRun(store);
      const first = await store.runs.claim(runId, 'server-a', 60_000);
      expect(first?.lease).toMatchObject({ state: 'held', epoch: 1, owner: 'server-a', takenFrom: null });
      expect(await store.runs.claim(runId, 'server-b', 60_000)).toBeUndefined();
      expect(await store.runs.heartbeat(runId, 1, 0)).toBe(true); // expires at once
      const taken = await store.runs.claim(runId, 'server-b', 60_000);
      expect(taken?.lease).toMatchObject({ state: 'held', epoch: 2, owner: 'server-b', takenFrom: 'server-a' });
      // The old owner can no longer do anything for the run.
      await expect(store.runs.fence(runId, 1)).rejects.toMatchObject({ code: 'STALE_LEASE', data: { currentEpoch: 2 } });
      await expect(store.runs.nextTurn(runId, 1)).rejects.toMatchObject({ code: 'STALE_LEASE' });
      await expect(store.runs.setSandbox(runId, 1, { provider: 'local', id: 'x' }, taken?.deploymentId ?? '')).rejects.toMatchObject({
        code: 'STALE_LEASE',
      });
      expect(await store.runs.heartbeat(runId, 1, 60_000)).toBe(false);
      expect(await store.runs.release(runId, 1)).toBe(false);
      await store.runs.fence(runId, 2);
      expect(await store.runs.nextTurn(runId, 2)).toBe(1);
      expect(await store.runs.release(runId, 2)).toBe(true);
      const again = await store.runs.claim(runId, 'server-a', 60_000);
      expect(again?.lease).toMatchObject({ epoch: 3, takenFrom: null });
    });

    it('concurrent claims from two connections: exactly one wins', async () => {
      const { store, other } = await fixture();
      const { runId } = await makeRun(store);
      const claims = await Promise.all(
        Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? store : other).runs.claim(runId, `server-${i}`, 60_000)),
      );
      const winners = claims.filter((c) => c !== undefined);
      expect(winners).toHaveLength(1);
      expect((await store.runs.get(runId)).lease).toMatchObject({ epoch: 1, owner: winners[0]?.lease.owner });
    });

    it('release_recovery_required blocks claims until resolved; resolving bumps the epoch and forgets the sandbox', async () => {
      const { store } = await fixture();
      const { runId, deploymentId } = await makeRun(store);
      const claimed = await store.runs.claim(runId, 'server-a', 60_000);
      await store.runs.setSandbox(runId, 1, { provider: 'bwrap', id: 'sb-1' }, deploymentId);
      await expect(store.runs.resolveRecovery(runId)).rejects.toMatchObject({ code: 'CONFLICT' });
      const stuck = await store.runs.requireRecovery(runId, claimed?.lease.epoch ?? 0, { code: 'TIMEOUT', message: 'stop timed out' });
      expect(stuck.lease).toMatchObject({ state: 'release_recovery_required', owner: null, error: { code: 'TIMEOUT' } });
      expect(stuck.sandbox).toEqual({ provider: 'bwrap', id: 'sb-1' });
      expect(await store.runs.claim(runId, 'server-b', 60_000)).toBeUndefined();
      await expect(store.runs.fence(runId, 1)).rejects.toMatchObject({ code: 'STALE_LEASE' });
      const resolved = await store.runs.resolveRecovery(runId);
      expect(resolved.lease).toMatchObject({ state: 'free', epoch: 2, error: null });
      expect(resolved.sandbox).toBeNull();
      expect((await store.runs.claim(runId, 'server-b', 60_000))?.lease.epoch).toBe(3);
    });

    it('deployments are stored once per tenant and id; channels count publishes; other tenants see nothing', async () => {
      const { store } = await fixture();
      const { tenantId } = await makeWorkspace(store);
      const other = await store.tenants.create({ name: uniqueName('tenant') });
      const [v1, v2] = [sha256(uniqueName('v1')), sha256(uniqueName('v2'))];
      const stored = await store.deployments.put({ tenantId, id: v1, spec: '{"a":1}' });
      expect(stored.created).toBe(true);
      expect(await store.deployments.put({ tenantId, id: v1, spec: '{"a":1}' })).toEqual({ deployment: stored.deployment, created: false });
      await store.deployments.put({ tenantId, id: v2, spec: '{"a":2}' });
      expect(await store.deployments.find(other.id, v1)).toBeUndefined();
      expect((await store.deployments.publish(tenantId, 'prod', v1)).version).toBe(1);
      expect(await store.deployments.publish(tenantId, 'prod', v2)).toMatchObject({ deploymentId: v2, version: 2 });
      await expect(store.deployments.publish(other.id, 'prod', v1)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect(await store.deployments.findChannel(other.id, 'prod')).toBeUndefined();
      expect((await store.deployments.listChannels(tenantId)).map((c) => c.name)).toEqual(['prod']);
    });

    it('turns finish once; events come back in order; a run of another tenant is not found', async () => {
      const { store } = await fixture();
      const { tenantId, workspaceId, runId } = await makeRun(store);
      const outsider = await store.tenants.create({ name: uniqueName('tenant') });
      expect(await store.runs.find(outsider.id, runId)).toBeUndefined();
      expect((await store.runs.find(tenantId, runId))?.id).toBe(runId);
      const turn = await store.turns.start({ runId, seq: 1, epoch: 1, owner: 'a' });
      await expect(store.turns.start({ runId, seq: 1, epoch: 1, owner: 'a' })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      const checkpointId = await makeReadyCheckpoint(store, workspaceId);
      const done = await store.turns.finish(turn.id, { status: 'completed', checkpointId, result: { exitCode: 0 } });
      expect(done).toMatchObject({ status: 'completed', checkpointId, result: { exitCode: 0 } });
      await expect(store.turns.finish(turn.id, { status: 'failed', error: { code: 'INTERNAL', message: 'x' } })).rejects.toMatchObject({
        code: 'CONFLICT',
      });
      // Turns left running under earlier epochs are failed by the lease's next holder; its own and finished ones stay.
      const orphan = await store.turns.start({ runId, seq: 2, epoch: 2, owner: 'a' });
      const orphan2 = await store.turns.start({ runId, seq: 3, epoch: 3, owner: 'b' });
      const own = await store.turns.start({ runId, seq: 4, epoch: 4, owner: 'c' });
      const error = { code: 'STALE_LEASE', message: 'left running' };
      expect((await store.turns.failBefore(runId, 4, error)).map((t) => t.id)).toEqual([orphan.id, orphan2.id]);
      expect(await store.turns.failBefore(runId, 4, error)).toEqual([]);
      const after = new Map((await store.turns.list(runId)).map((t) => [t.id, t]));
      expect(after.get(orphan.id)).toMatchObject({ status: 'failed', error });
      expect(after.get(orphan2.id)?.finishedAt).not.toBeNull();
      expect(after.get(own.id)?.status).toBe('running');
      expect(after.get(turn.id)?.status).toBe('completed');
      for (const step of ['create_sandbox', 'restore', 'setup']) {
        await store.turns.addEvent({ runId, kind: 'recovery', step, status: 'ok', durationMs: 12.4 });
      }
      const events = await store.turns.listEvents(runId);
      expect(events.map((e) => e.step)).toEqual(['create_sandbox', 'restore', 'setup']);
      expect(events[0]?.durationMs).toBe(12);
    });

    it('tokens are found by hash until revoked, with their tenant', async () => {
      const { store } = await fixture();
      const { tenantId } = await makeWorkspace(store);
      const hash = sha256(uniqueName('token'));
      const token = await store.tokens.create({ tenantId, name: 'ci', hash, admin: true });
      expect(await store.tokens.findByHash(hash)).toMatchObject({ id: token.id, tenantId, admin: true });
      await expect(store.tokens.create({ tenantId, name: 'dup', hash, admin: false })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      expect(await store.tokens.revoke(token.id)).toBe(true);
      expect(await store.tokens.findByHash(hash)).toBeUndefined();
      expect(await store.tokens.revoke(token.id)).toBe(false);
    });
    it('idempotency receipts: first claims, a running one is in progress, a finished one replays, another request mismatches', async () => {
      const { store } = await fixture();
      const principalId = uniqueName('principal');
      const [key, hash, otherHash] = [uniqueName('key'), sha256('request'), sha256('other')];
      const begin = (requestHash: string, expireBeforeMs = 0) => store.idempotency.begin({ principalId, key, requestHash, expireBeforeMs });
      expect(await begin(hash)).toEqual({ kind: 'new' });
      expect(await begin(hash)).toEqual({ kind: 'in_progress' });
      expect(await begin(otherHash)).toEqual({ kind: 'mismatch' });
      await store.idempotency.finish(principalId, key, 201, '{"id":1}');
      expect(await begin(hash)).toEqual({ kind: 'replay', statusCode: 201, response: '{"id":1}' });
      await store.idempotency.abandon(principalId, key); // finished receipts are kept
      expect((await begin(hash)).kind).toBe('replay');
      expect(await begin(otherHash, Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'new' }); // expired: the key is free again
      await store.idempotency.abandon(principalId, key);
      expect(await begin(hash)).toEqual({ kind: 'new' });
      // Claiming any key first deletes every expired receipt, whatever its key.
      const other = uniqueName('other-key');
      expect((await store.idempotency.begin({ principalId, key: other, requestHash: hash, expireBeforeMs: 0 })).kind).toBe('new');
      await store.idempotency.begin({
        principalId,
        key: uniqueName('third-key'),
        requestHash: hash,
        expireBeforeMs: Number.MAX_SAFE_INTEGER,
      });
      expect(await begin(hash)).toEqual({ kind: 'new' });
      expect((await store.idempotency.begin({ principalId, key: other, requestHash: otherHash, expireBeforeMs: 0 })).kind).toBe('new');
    });

    it('idempotency receipts are per principal: the same key of another principal is a new claim, and its finish and abandon touch only its own', async () => {
      const { store } = await fixture();
      const [owner, intruder] = [uniqueName('owner'), uniqueName('intruder')];
      const [key, hash] = [uniqueName('key'), sha256('request')];
      const begin = (principalId: string) => store.idempotency.begin({ principalId, key, requestHash: hash, expireBeforeMs: 0 });
      expect(await begin(owner)).toEqual({ kind: 'new' });
      await store.idempotency.finish(owner, key, 201, '{"owner":true}');
      expect(await begin(intruder)).toEqual({ kind: 'new' });
      await store.idempotency.abandon(intruder, key);
      expect(await begin(owner)).toEqual({ kind: 'replay', statusCode: 201, response: '{"owner":true}' });
      expect(await begin(intruder)).toEqual({ kind: 'new' });
      await store.idempotency.finish(intruder, key, 200, '{"intruder":true}');
      expect(await begin(owner)).toEqual({ kind: 'replay', statusCode: 201, response: '{"owner":true}' });
    });
  });
}
