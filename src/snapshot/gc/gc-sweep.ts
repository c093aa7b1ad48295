import type { BlobStore } from '../../blob-store/blob-store.js';
import type { Sha256Hex } from '../../core/hash.js';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import { packKey } from '../../objects/pack-format.js';
import { MAX_CHECKPOINT_MS } from '../snapshot-deps.js';

/** The stores a sweep touches. */
export interface SweepDeps {
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
}

/** Finished journal entries are kept this long for inspection, then pruned. */
export const JOURNAL_KEEP_MS = 30 * 24 * 60 * 60 * 1000;

/** One pack blob a sweep step removed (or, planning, would remove). */
export interface SweptPack {
  readonly id: Sha256Hex;
  /** Bytes of its blob; 0 when the blob was already gone. */
  readonly size: number;
}

/** What a sweep step removed. */
export interface SweepResult {
  packs: number;
  bytes: number;
  /** The packs themselves, in the order they were removed. */
  readonly removed: SweptPack[];
}

/**
 * Deletes one pack through the durable deletion journal (DESIGN section 7): the journal row is
 * written first, then the blob is deleted, then the pack's index rows, then the row is marked
 * finished. Killed anywhere in between, the next GC run finds the unfinished row and completes
 * it ({@link finishInterruptedDeletions}). The caller has already established that nothing
 * live needs the pack (condemned and past grace with no live object, or unindexed past grace);
 * the journal row is written only if the pack is still not live, under the same pack lock a
 * checkpoint takes when it commits, so a checkpoint that re-registered the pack meanwhile
 * wins, and one that commits later sees the journal row and refuses to rely on the blob.
 * A pack with a protecting upload intent ({@link intentCutoff}) is never deleted, whatever the
 * grace: its writer may still commit it. The intent is read before the pack's state: a
 * writer's commit registers the pack and drops its intent atomically, so a reader that finds
 * the intent gone then finds the pack registered. Resolves with whether the pack was deleted.
 */
export async function deletePackJournaled(deps: SweepDeps, packId: Sha256Hex, at: number): Promise<boolean> {
  const started = await deps.meta.transaction(async (tx) => {
    await tx.objects.lockPacks([packId]);
    if ((await tx.gc.protectedPacks([packId], intentCutoff(at))).has(packId)) return false;
    if ((await tx.objects.packStates([packId])).get(packId) === 'live') return false;
    await tx.gc.startDeletion({ packId, key: packKey(packId) }, at);
    return true;
  });
  if (started) await completeDeletion(deps, packId, at);
  return started;
}

/**
 * Upload intents recorded at or after this time protect their packs even when their writer is
 * not a pending checkpoint (a repack, or a checkpoint whose process died): no writer runs longer
 * than MAX_CHECKPOINT_MS.
 */
export function intentCutoff(now: number): number {
  return now - MAX_CHECKPOINT_MS;
}

/** Blob, then index rows (only if still condemned), then the queue entry, then the journal mark. */
async function completeDeletion(deps: SweepDeps, packId: Sha256Hex, at: number): Promise<void> {
  await deps.blobs.delete(packKey(packId));
  await deps.meta.objects.deleteCondemnedPacks([packId]);
  await deps.meta.gc.dequeue([packId]);
  await deps.meta.gc.finishDeletion(packId, at);
}

/**
 * Completes deletions a killed GC run left unfinished. A journaled pack whose row is present
 * and *not* condemned was re-registered since (a checkpoint uploaded the same bytes again,
 * which recreated the blob if it was already gone): its deletion is called off. Everything
 * else is finished. Resolves with what was removed (bytes counted only for blobs still there).
 */
export async function finishInterruptedDeletions(deps: SweepDeps, at: number): Promise<SweepResult> {
  const result: SweepResult = { packs: 0, bytes: 0, removed: [] };
  for (const entry of await interruptedDeletions(deps)) {
    if (!entry.finish) {
      await deps.meta.gc.finishDeletion(entry.packId, at);
      continue;
    }
    await completeDeletion(deps, entry.packId, at);
    result.packs += 1;
    result.bytes += entry.size;
    result.removed.push({ id: entry.packId, size: entry.size });
  }
  return result;
}

/**
 * The deletions a killed GC run left unfinished, read-only: `finish` is false for a pack that
 * was re-registered since (its deletion is called off), and `size` is its blob's size now (0
 * when already gone). {@link finishInterruptedDeletions} acts on this; a dry run lists it.
 */
export async function interruptedDeletions(deps: SweepDeps): Promise<Array<{ packId: Sha256Hex; finish: boolean; size: number }>> {
  const pending = await deps.meta.gc.unfinishedDeletions();
  if (pending.length === 0) return [];
  const rows = new Map((await deps.meta.objects.listPacks()).map((p) => [p.id, p]));
  const out: Array<{ packId: Sha256Hex; finish: boolean; size: number }> = [];
  for (const entry of pending) {
    const row = rows.get(entry.packId);
    const finish = row === undefined || row.condemnedAt !== null;
    out.push({ packId: entry.packId, finish, size: finish ? ((await deps.blobs.stat(entry.key))?.size ?? 0) : 0 });
  }
  return out;
}

/**
 * Drops finished journal entries older than {@link JOURNAL_KEEP_MS}, and upload intents that no
 * longer protect anything (older than {@link intentCutoff}, writer not pending), so both stay bounded.
 */
export async function pruneJournal(meta: MetadataStore, now: number): Promise<void> {
  await meta.gc.pruneFinishedDeletions(now - JOURNAL_KEEP_MS);
  await meta.gc.pruneIntents(intentCutoff(now));
}
