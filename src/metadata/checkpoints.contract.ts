import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { type ContractContext, makeObjects, makeReadyCheckpoint, makeWorkspace, sha256 } from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';

/** Contract cases for workspace heads (CAS), checkpoint transitions and transactions. */
export function describeSnapshotCases(ctx: ContractContext): void {
  describe('snapshots', () => {
    // Two stores on one database: two connections (SQLite) or two pools (PostgreSQL).
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open(), second: await database.open() }));
    describeHeadCases(fixture);
    describeCheckpointCases(fixture);
    describeTransactionCases(fixture);
  });
}

type Fixture = () => Promise<{ store: MetadataStore; second: MetadataStore }>;

function describeHeadCases(fixture: Fixture): void {
  describe('workspace head compare-and-swap', () => {
    it('moves the head and bumps the version; a stale version is CONFLICT with both versions', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const c1 = await makeReadyCheckpoint(store, workspaceId);
      const moved = await store.workspaces.casHead(workspaceId, 0, c1);
      expect(moved).toMatchObject({ headCheckpointId: c1, headVersion: 1 });
      const c2 = await makeReadyCheckpoint(store, workspaceId);
      await expect(store.workspaces.casHead(workspaceId, 0, c2)).rejects.toMatchObject({
        code: 'CONFLICT',
        data: { workspaceId, expectedVersion: 0, actualVersion: 1 },
      });
      expect(await store.workspaces.get(workspaceId)).toMatchObject({ headCheckpointId: c1, headVersion: 1 });
    });

    it('rejects unknown workspaces and checkpoints, and checkpoints that are not ready or not its own', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const other = await makeWorkspace(store);
      const foreign = await makeReadyCheckpoint(store, other.workspaceId);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'manual' });
      await expect(store.workspaces.casHead('no-such-workspace', 0, null)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.workspaces.casHead(workspaceId, 0, 'no-such-checkpoint')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.workspaces.casHead(workspaceId, 0, pending.id)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await expect(store.workspaces.casHead(workspaceId, 0, foreign)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      expect((await store.workspaces.get(workspaceId)).headVersion).toBe(0);
    });

    it('concurrent swaps with the same expected version: exactly one wins, the others get CONFLICT', async () => {
      const { store, second } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      for (let round = 0; round < 5; round += 1) {
        const candidates = await Promise.all([0, 1, 2, 3].map(() => makeReadyCheckpoint(store, workspaceId)));
        // Half the racers go through a second store: its own connection (SQLite) or pool (PostgreSQL).
        const outcomes = await Promise.allSettled(
          candidates.map((id, i) => (i % 2 === 0 ? store : second).workspaces.casHead(workspaceId, round, id)),
        );
        const winners = outcomes.filter((o) => o.status === 'fulfilled');
        const losers = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []));
        expect(winners).toHaveLength(1);
        expect(losers.map((e: unknown) => (isHoldfastError(e) ? e.code : e))).toEqual(['CONFLICT', 'CONFLICT', 'CONFLICT']);
        expect((await store.workspaces.get(workspaceId)).headVersion).toBe(round + 1);
      }
    });
  });
}

function describeCheckpointCases(fixture: Fixture): void {
  describe('checkpoints', () => {
    it('pending -> ready keeps root tree and stats; a finished checkpoint cannot move again', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'turn', parentId: null });
      expect(pending).toMatchObject({ status: 'pending', finishedAt: null, rootTree: null, stats: null, error: null });
      const ready = await store.checkpoints.markReady(pending.id, { rootTree: sha256('root'), stats: { files: 3, bytes: 12 } });
      expect(ready).toMatchObject({ status: 'ready', rootTree: sha256('root'), stats: { files: 3, bytes: 12 } });
      expect(typeof ready.finishedAt).toBe('number');
      expect(await store.checkpoints.get(pending.id)).toEqual(ready);
      await expect(store.checkpoints.markReady(pending.id, { rootTree: sha256('x') })).rejects.toMatchObject({
        code: 'CONFLICT',
        data: { status: 'ready' },
      });
      await expect(store.checkpoints.markFailed(pending.id, { code: 'INTERNAL', message: 'x' })).rejects.toMatchObject({
        code: 'CONFLICT',
      });
    });

    it('a ready checkpoint records and clears its damage; nothing else about it changes', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'turn' });
      expect(pending.damage).toBeNull();
      const ready = await store.checkpoints.markReady(pending.id, { rootTree: sha256('damaged-root'), stats: { files: 2 } });
      expect(ready.damage).toBeNull();
      const damage = { packs: [sha256('lost-pack')], paths: ['a.txt', 'dir/b.bin'], pathCount: 7, assessedAt: 1_234 };
      await store.checkpoints.setDamage(ready.id, damage);
      expect(await store.checkpoints.get(ready.id)).toEqual({ ...ready, damage });
      expect((await store.checkpoints.listByWorkspace(workspaceId))[0]?.damage).toEqual(damage);
      expect((await store.checkpoints.listDamaged()).map((c) => c.id)).toContain(ready.id);
      await store.checkpoints.setDamage(ready.id, null);
      expect(await store.checkpoints.get(ready.id)).toEqual(ready);
      expect((await store.checkpoints.listDamaged()).map((c) => c.id)).not.toContain(ready.id);
      await store.checkpoints.setDamage('no-such-checkpoint', damage);
    });

    it('keeps a label, flat meta and forkedFrom (migration 14); the columns refuse what no writer may store', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const plain = await store.checkpoints.createPending({ workspaceId, reason: 'manual' });
      expect(plain).toMatchObject({ label: null, meta: null, forkedFrom: null });
      const noted = await store.checkpoints.createPending({
        workspaceId,
        reason: 'manual',
        label: 'l'.repeat(200),
        meta: { thread: 't', n: 1, ok: true, none: null },
        forkedFrom: plain.id,
      });
      const ready = await store.checkpoints.markReady(noted.id, { rootTree: sha256('noted') });
      expect(await store.checkpoints.get(noted.id)).toEqual(ready);
      expect(ready).toMatchObject({ label: 'l'.repeat(200), meta: { thread: 't', n: 1, ok: true, none: null }, forkedFrom: plain.id });
      // The database bounds the columns itself: a writer that skipped the checks stores nothing.
      await expect(store.checkpoints.createPending({ workspaceId, reason: 'manual', label: 'l'.repeat(201) })).rejects.toThrow();
      await expect(store.checkpoints.createPending({ workspaceId, reason: 'manual', label: '' })).rejects.toThrow();
      await expect(store.checkpoints.createPending({ workspaceId, reason: 'manual', meta: { big: 'v'.repeat(4096) } })).rejects.toThrow();
      expect((await store.checkpoints.listByWorkspace(workspaceId)).length).toBe(2);
    });

    it('pending -> failed keeps its error, and a failed checkpoint stays failed', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'periodic' });
      const error = { code: 'STORE_UNAVAILABLE', message: 'blob store down', data: { transient: true } };
      const failed = await store.checkpoints.markFailed(pending.id, error);
      expect(failed).toMatchObject({ status: 'failed', error, rootTree: null });
      expect((await store.checkpoints.get(pending.id)).error).toEqual(error);
      await expect(store.checkpoints.markReady(pending.id, { rootTree: sha256('late') })).rejects.toMatchObject({
        code: 'CONFLICT',
        data: { status: 'failed' },
      });
      expect((await store.checkpoints.get(pending.id)).status).toBe('failed');
    });

    it('unknown ids are NOT_FOUND; an unknown workspace or reason is refused', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      await expect(store.checkpoints.markReady('no-such-checkpoint', { rootTree: sha256('r') })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(store.checkpoints.get('no-such-checkpoint')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.checkpoints.createPending({ workspaceId: 'no-such-workspace', reason: 'turn' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      const reason = 'bogus' as 'turn';
      await expect(store.checkpoints.createPending({ workspaceId, reason })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    });

    it('lists a workspace checkpoints newest first, with status filter and limit', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const ids: string[] = [];
      for (let i = 0; i < 4; i += 1) ids.push((await store.checkpoints.createPending({ workspaceId, reason: 'turn' })).id);
      await store.checkpoints.markReady(ids[1] as string, { rootTree: sha256('r1') });
      const all = await store.checkpoints.listByWorkspace(workspaceId);
      expect(all.map((c) => c.id)).toEqual([...ids].reverse());
      expect((await store.checkpoints.listByWorkspace(workspaceId, { limit: 2 })).map((c) => c.id)).toEqual([ids[3], ids[2]]);
      expect((await store.checkpoints.listByWorkspace(workspaceId, { status: 'ready' })).map((c) => c.id)).toEqual([ids[1]]);
    });
  });
}

function describeTransactionCases(fixture: Fixture): void {
  describe('transactions', () => {
    it('objects, checkpoint ready and head swap commit together', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const { packs, objects } = makeObjects('tx-commit', 1_200);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'turn' });
      const workspace = await store.transaction(async (tx) => {
        await tx.objects.insertPacksAndObjects(packs, objects);
        await tx.checkpoints.markReady(pending.id, { rootTree: sha256('tx-root') });
        return tx.workspaces.casHead(workspaceId, 0, pending.id);
      });
      expect(workspace).toMatchObject({ headCheckpointId: pending.id, headVersion: 1 });
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(0);
    });

    it('an error inside the transaction rolls everything back and is rethrown', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const { packs, objects } = makeObjects('tx-rollback', 1_200);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'turn' });
      const boom = new Error('boom');
      await expect(
        store.transaction(async (tx) => {
          await tx.objects.insertPacksAndObjects(packs, objects);
          await tx.checkpoints.markReady(pending.id, { rootTree: sha256('tx-root') });
          await tx.workspaces.casHead(workspaceId, 0, pending.id);
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(objects.length);
      expect((await store.checkpoints.get(pending.id)).status).toBe('pending');
      expect(await store.workspaces.get(workspaceId)).toMatchObject({ headCheckpointId: null, headVersion: 0 });
    });

    it('a lost head swap inside the transaction rolls back the objects and the ready mark', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const winner = await makeReadyCheckpoint(store, workspaceId);
      await store.workspaces.casHead(workspaceId, 0, winner);
      const { packs, objects } = makeObjects('tx-conflict', 10);
      const pending = await store.checkpoints.createPending({ workspaceId, reason: 'turn' });
      await expect(
        store.transaction(async (tx) => {
          await tx.objects.insertPacksAndObjects(packs, objects);
          await tx.checkpoints.markReady(pending.id, { rootTree: sha256('loser') });
          return tx.workspaces.casHead(workspaceId, 0, pending.id);
        }),
      ).rejects.toMatchObject({ code: 'CONFLICT', data: { expectedVersion: 0, actualVersion: 1 } });
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(objects.length);
      expect((await store.checkpoints.get(pending.id)).status).toBe('pending');
      expect((await store.workspaces.get(workspaceId)).headCheckpointId).toBe(winner);
    });
  });
}
