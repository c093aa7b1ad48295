import type { Sha256Hex } from '../../core/hash.js';
import { packIdFromKey } from '../../objects/pack-format.js';
import { deletePackJournaled, intentCutoff, type SweepDeps, type SweptPack } from './gc-sweep.js';

/** What the orphan step found and did. */
export interface OrphanResult {
  /** Unindexed packs still waiting out their grace after this step. */
  readonly queued: number;
  /** Unindexed packs deleted (with `dryRun`: that would be deleted). */
  readonly deleted: number;
  readonly bytes: number;
  /** The packs deleted (with `dryRun`: that would be deleted), with their blob sizes. */
  readonly deletedPacks: readonly SweptPack[];
  /** The packs still waiting out their grace. */
  readonly queuedPacks: readonly SweptPack[];
}

/**
 * Removes pack blobs that no index row names: packs uploaded by checkpoints that then failed
 * or were killed, and new packs of a repack killed before its commit. The blob store is
 * listed once; the index is read after the listing, so a pack committed in between counts as
 * indexed. A pack is deleted only once it has been seen unindexed for longer than the grace
 * (`firstSeenAt <= cutoff`, tracked in `gc_queue`) and is still unindexed when re-checked
 * right before deletion. A running checkpoint's (or repack's) packs are unindexed until it
 * commits, so they are not orphans at all while an upload intent protects them (read after the
 * listing, so an intent recorded before its blob was written is seen; checked again under the
 * pack lock before deletion): they are not queued, whatever the grace, and their grace starts
 * once their writer failed. With `dryRun` nothing is written, and packs seen for the first
 * time count from `now`.
 */
export async function collectOrphans(deps: SweepDeps, options: { now: number; cutoff: number; dryRun: boolean }): Promise<OrphanResult> {
  const stored = new Map<Sha256Hex, number>();
  for await (const { key, size } of deps.blobs.list('packs/')) {
    const id = packIdFromKey(key);
    if (id !== undefined) stored.set(id, size);
  }
  const indexed = new Set((await deps.meta.objects.listPacks()).map((p) => p.id));
  const unindexed = [...stored.keys()].filter((id) => !indexed.has(id));
  const inFlight = await deps.meta.gc.protectedPacks(unindexed, intentCutoff(options.now));
  const orphans = unindexed.filter((id) => !inFlight.has(id));
  const queue = new Map((await deps.meta.gc.listQueue()).map((q) => [q.packId, q.firstSeenAt]));
  const due = orphans.filter((id) => (queue.get(id) ?? options.now) <= options.cutoff);
  const bytesOf = (ids: readonly Sha256Hex[]): number => ids.reduce((n, id) => n + (stored.get(id) ?? 0), 0);
  const sized = (ids: readonly Sha256Hex[]): SweptPack[] => ids.map((id) => ({ id, size: stored.get(id) ?? 0 }));
  const dueSet = new Set(due);
  const queuedPacks = sized(orphans.filter((id) => !dueSet.has(id)));
  if (options.dryRun)
    return { queued: queuedPacks.length, deleted: due.length, bytes: bytesOf(due), deletedPacks: sized(due), queuedPacks };

  const orphanSet = new Set(orphans);
  // Entries that were indexed meanwhile or whose blob is gone are no longer orphans: forget them.
  await deps.meta.gc.dequeue([...queue.keys()].filter((id) => !orphanSet.has(id)));
  await deps.meta.gc.queueOrphans(
    orphans.filter((id) => !queue.has(id)),
    options.now,
  );
  const recheck = new Set((await deps.meta.objects.listPacks()).map((p) => p.id));
  const deleted: Sha256Hex[] = [];
  for (const id of due) {
    if (recheck.has(id)) continue;
    if (await deletePackJournaled(deps, id, options.now)) deleted.push(id);
  }
  return { queued: queuedPacks.length, deleted: deleted.length, bytes: bytesOf(deleted), deletedPacks: sized(deleted), queuedPacks };
}
