import { describe, expect, it } from 'vitest';
import { type ContractContext, makeObjects, makeReadyCheckpoint, makeWorkspace, sha256 } from './metadata-contract-support.contract.js';

/** Contract cases for what GC, verify and index rebuild need from the repositories. */
export function describeGcCases(ctx: ContractContext): void {
  describe('gc support', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open() }));

    it('condemn stamps the given time; revive clears it; deleteCondemnedPacks removes only condemned packs and their rows', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('condemn', 6, 2);
      await store.objects.insertPacksAndObjects(packs, objects);
      const [a, b, c] = packs.map((p) => p.id) as [string, string, string];
      expect(await store.objects.condemnPacks([a, b], 1234)).toBe(2);
      const listed = new Map((await store.objects.listPacks()).map((p) => [p.id, p]));
      expect(listed.get(a)).toMatchObject({ condemnedAt: 1234, objectCount: 2, kind: 'data' });
      expect(listed.get(c)?.condemnedAt).toBeNull();
      expect(await store.objects.revivePacks([b, c])).toBe(1);
      expect(await store.objects.deleteCondemnedPacks([a, b, c])).toEqual([a]);
      expect((await store.objects.objectsInPacks([a, b, c])).map((o) => o.packId).sort()).toEqual([b, b, c, c].sort());
      expect((await store.objects.listPacks()).map((p) => p.id)).not.toContain(a);
    });

    it('scanObjects pages through the whole index in id order', async () => {
      const { store } = await fixture();
      const scanned = makeObjects('scan', 25, 10);
      await store.objects.insertPacksAndObjects(scanned.packs, scanned.objects);
      const seen: string[] = [];
      for (
        let page = await store.objects.scanObjects(undefined, 7);
        page.length > 0;
        page = await store.objects.scanObjects(seen.at(-1), 7)
      ) {
        seen.push(...page.map((o) => o.id));
      }
      expect(seen).toEqual([...seen].sort());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.length).toBeGreaterThanOrEqual(25);
    });

    it('deleteMany never deletes a workspace head; listAll sees every workspace', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const old = await makeReadyCheckpoint(store, workspaceId);
      const head = await makeReadyCheckpoint(store, workspaceId);
      await store.workspaces.casHead(workspaceId, 0, head);
      expect(await store.checkpoints.deleteMany([old, head])).toBe(1);
      expect((await store.checkpoints.listAll()).filter((c) => c.workspaceId === workspaceId).map((c) => c.id)).toEqual([head]);
      expect((await store.workspaces.listAll()).map((w) => w.id)).toContain(workspaceId);
    });

    it('the orphan queue keeps the first sighting; the journal tracks unfinished deletions', async () => {
      const { store } = await fixture();
      const [p, q] = [sha256('orphan-p'), sha256('orphan-q')];
      await store.gc.queueOrphans([p], 100);
      await store.gc.queueOrphans([p, q], 200);
      expect(await store.gc.listQueue()).toEqual(
        [
          { packId: p, firstSeenAt: 100 },
          { packId: q, firstSeenAt: 200 },
        ].sort((x, y) => (x.packId < y.packId ? -1 : 1)),
      );
      await store.gc.dequeue([p, q]);
      expect(await store.gc.listQueue()).toEqual([]);

      await store.gc.startDeletion({ packId: p, key: `packs/${p.slice(0, 2)}/${p}` }, 300);
      expect(await store.gc.unfinishedDeletions()).toEqual([
        { packId: p, key: `packs/${p.slice(0, 2)}/${p}`, startedAt: 300, finishedAt: null },
      ]);
      await store.gc.finishDeletion(p, 400);
      expect(await store.gc.unfinishedDeletions()).toEqual([]);
      await store.gc.startDeletion({ packId: p, key: `packs/${p.slice(0, 2)}/${p}` }, 500);
      expect(await store.gc.unfinishedDeletions()).toHaveLength(1);
      await store.gc.finishDeletion(p, 600);
      expect(await store.gc.pruneFinishedDeletions(601)).toBe(1);
    });

    it('upload intents protect a pack while its checkpoint is pending or the intent is young; release and prune forget them', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const pending = await store.checkpoints.createPending({ workspaceId, parentId: null, reason: 'manual' });
      const [p, q, r] = [sha256('intent-p'), sha256('intent-q'), sha256('intent-r')];
      await store.gc.recordIntent({ packId: p, writerId: pending.id, checkpointId: pending.id });
      await store.gc.recordIntent({ packId: p, writerId: pending.id, checkpointId: pending.id }); // idempotent
      await store.gc.recordIntent({ packId: q, writerId: 'repack-contract', checkpointId: null });
      const later = Number.MAX_SAFE_INTEGER;
      // Young intents protect whoever wrote them; old ones only while their checkpoint is pending.
      expect([...(await store.gc.protectedPacks([p, q, r], 0))].sort()).toEqual([p, q].sort());
      expect([...(await store.gc.protectedPacks([p, q, r], later))]).toEqual([p]);
      expect(await store.gc.pruneIntents(later)).toBeGreaterThanOrEqual(1);
      expect([...(await store.gc.protectedPacks([p, q], 0))]).toEqual([p]);

      await store.checkpoints.markFailed(pending.id, { code: 'INTERNAL', message: 'contract' });
      expect([...(await store.gc.protectedPacks([p], later))]).toEqual([]);
      expect([...(await store.gc.protectedPacks([p], 0))]).toEqual([p]);
      await store.gc.releaseIntents(pending.id);
      expect([...(await store.gc.protectedPacks([p], 0))]).toEqual([]);
    });

    it('a commit that registers a pack and releases its intent is seen whole: the pack is protected or registered, never neither', async () => {
      const { store } = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const pending = await store.checkpoints.createPending({ workspaceId, parentId: null, reason: 'manual' });
      const { packs, objects } = makeObjects('intent-commit', 2, 2);
      const packId = packs[0]?.id as string;
      await store.gc.recordIntent({ packId, writerId: pending.id, checkpointId: pending.id });
      await store.transaction(async (tx) => {
        await tx.objects.insertPacksAndObjects(packs, objects);
        await tx.gc.releaseIntents(pending.id);
      });
      expect([...(await store.gc.protectedPacks([packId], 0))]).toEqual([]);
      expect((await store.objects.packStates([packId])).get(packId)).toBe('live');
    });
  });
}
