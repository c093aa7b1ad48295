import type { Sha256Hex } from '../../core/hash.js';
import { InputError } from '../../errors.js';
import type { PackInfo } from '../../metadata/metadata-store.js';
import { ObjectReader } from '../../objects/object-reader.js';
import { TARGET_PACK_BYTES } from '../../objects/pack-writer.js';
import { CHECKPOINT_WRITER_TIMEOUT_MS, failAbandonedWriters } from '../checkpoint/checkpoint.js';
import { sweepStaleStaging } from '../restore/restore-staging.js';
import type { SnapshotDeps } from '../snapshot-deps.js';
import { DEFAULT_COMPACT_BELOW_BYTES, selectSmallPacks } from './gc-compaction.js';
import { folderRootSource } from './gc-folder-roots.js';
import { type LiveRootSource, liveUsage, markLive, markNewCheckpoints } from './gc-mark.js';
import { collectOrphans, type OrphanResult } from './gc-orphans.js';
import { sweepStatCaches } from './gc-stat-caches.js';
import { deletePackJournaled, finishInterruptedDeletions, interruptedDeletions, pruneJournal } from './gc-sweep.js';
import { repackPacks } from './repack.js';
import { applyRetention, DEFAULT_RETENTION, type RetentionPolicy } from './retention.js';

/** A condemned or unindexed pack is deleted only after this long (DESIGN section 7). */
export const DEFAULT_GC_GRACE_MS = 24 * 60 * 60 * 1000;
/** Packs whose live bytes are below this fraction of their size are repacked. */
export const DEFAULT_REPACK_BELOW_LIVE_RATIO = 0.5;

export type { LiveRootSource };
export { DEFAULT_COMPACT_BELOW_BYTES };

/** Options of {@link collectGarbage}. */
export interface GcOptions {
  /** Report what would happen and change nothing. */
  readonly dryRun?: boolean;
  /**
   * Default {@link DEFAULT_GC_GRACE_MS}. Any value, 0 included, is safe for writers still running:
   * their packs have upload intents and are never deleted while those protect them.
   */
  readonly graceMs?: number;
  /** Default {@link DEFAULT_REPACK_BELOW_LIVE_RATIO}; 0 disables repacking. */
  readonly repackBelowLiveRatio?: number;
  /**
   * Packs below this many bytes are small: once enough of them are old enough (see
   * `selectSmallPacks`), their live objects are moved into full-size packs and they are
   * condemned. Default {@link DEFAULT_COMPACT_BELOW_BYTES}, at most `TARGET_PACK_BYTES`; 0
   * disables compaction.
   */
  readonly compactBelowBytes?: number;
  /** Epoch ms this run treats as now (tests move it forward); default `Date.now()`. */
  readonly now?: number;
  /**
   * A pending checkpoint whose writer has not stamped its heartbeat for this long is marked
   * failed (`INTERRUPTED`) and its uploads become garbage; default `CHECKPOINT_WRITER_TIMEOUT_MS`.
   */
  readonly writerTimeoutMs?: number;
  readonly retention?: RetentionPolicy;
  /** Extra live roots (see {@link LiveRootSource}); retained checkpoints are always roots. */
  readonly liveRootSources?: readonly LiveRootSource[];
  readonly onProgress?: (phase: GcPhase) => void;
}

/** The steps of a GC run, in order. */
export type GcPhase = 'resume' | 'retention' | 'mark' | 'repack' | 'condemn' | 'sweep' | 'orphans';

/** What a GC run did (with `dryRun`: would do). */
export interface GcReport {
  /** Checkpoints retention forgot. */
  readonly forgotten: number;
  /** Pending checkpoints whose writer was gone, marked failed (`INTERRUPTED`) by this run (with `dryRun`: none are). */
  readonly checkpointsInterrupted: number;
  /** Distinct live objects (trees and chunks). */
  readonly liveObjects: number;
  /** Packs with no live object, condemned by this run. */
  readonly packsCondemned: number;
  /** Sparse packs whose live objects were moved to new packs (then condemned). */
  readonly packsRepacked: number;
  /** Small packs whose live objects were moved into full-size packs (then condemned). */
  readonly packsCompacted: number;
  /** Condemned packs deleted (past grace, second check passed), including interrupted deletions finished. */
  readonly packsDeleted: number;
  /** Condemned packs revived because a live object still pointed into them. */
  readonly packsRevived: number;
  /** Bytes of pack blobs deleted (condemned and orphan). */
  readonly bytesFreed: number;
  /** Unindexed pack blobs waiting out their grace period after this run. */
  readonly orphanPacksQueued: number;
  /** Unindexed pack blobs deleted. */
  readonly orphanPacksDeleted: number;
  /** Restore staging directories whose restore was killed, removed (see `sweepStaleStaging`). */
  readonly stagingRemoved: number;
  /** Stat caches no checkpoint of this store needs, removed (see `sweepStatCaches`). */
  readonly statCachesRemoved: number;
  readonly dryRun: boolean;
  /** What the counts above count, item by item (with `dryRun`: what would be done). */
  readonly listing: GcListing;
}

/** Why GC removes or rewrites a pack. */
export type GcPackReason =
  /** Condemned by an earlier run, past the grace, and still without a live object. */
  | 'condemned'
  /** No live object: condemned by this run (and, with no grace, deleted by it). */
  | 'empty'
  /** Live bytes below the repack ratio: its live objects are moved, then it is condemned. */
  | 'sparse'
  /** Small and old enough, with enough others like it: its live objects are compacted into full-size packs, then it is condemned. */
  | 'small'
  /** A blob no index row names (an upload whose checkpoint failed or was killed). */
  | 'unindexed'
  /** A deletion a killed GC run journaled and did not finish. */
  | 'interrupted';

/** One pack in a {@link GcListing}. */
export interface GcPackEntry {
  readonly id: Sha256Hex;
  /** Bytes of its blob. */
  readonly size: number;
  /** Objects the index lists in it; `null` for an unindexed or interrupted pack (its rows are gone or never were). */
  readonly objects: number | null;
  /** Of those, objects still live (what a repack moves); `null` where `objects` is. */
  readonly liveObjects: number | null;
  readonly reason: GcPackReason;
}

/** The items behind a {@link GcReport}'s counts. */
export interface GcListing {
  /** Ids of the checkpoints retention forgot. */
  readonly checkpointsForgotten: readonly string[];
  /** Packs condemned by this run for having no live object. */
  readonly packsCondemned: readonly GcPackEntry[];
  /** Sparse packs repacked (their live objects moved), then condemned. */
  readonly packsRepacked: readonly GcPackEntry[];
  /** Small packs compacted (their live objects moved into full-size packs), then condemned. */
  readonly packsCompacted: readonly GcPackEntry[];
  /** Every pack blob deleted: condemned past grace, interrupted deletions, unindexed past grace. */
  readonly packsDeleted: readonly GcPackEntry[];
  /** Unindexed pack blobs still waiting out their grace. */
  readonly orphanPacksQueued: readonly GcPackEntry[];
  /** Paths of the stat caches removed. */
  readonly statCachesRemoved: readonly string[];
}

/** The services GC uses; with `cacheDir`, staging left there by killed restores and stale stat caches are removed too. */
export type GcDeps = Pick<SnapshotDeps, 'blobs' | 'meta' | 'workers'> & Partial<Pick<SnapshotDeps, 'cacheDir'>>;

/**
 * One garbage-collection run (DESIGN section 7): finish deletions a killed run left, apply
 * retention, mark live objects from retained ready checkpoints and {@link LiveRootSource}s,
 * repack sparse packs, compact small ones, condemn packs without live objects, delete condemned packs past the
 * grace period after a second liveness check, and delete unindexed pack blobs once they have
 * been seen unindexed for longer than the grace.
 *
 * Crash safety: every step is either read-only, a single transaction, or journaled, and
 * nothing a retained checkpoint references is ever condemned or deleted, so a kill at any
 * point leaves every head restorable; the next run completes what was cut short. Packs
 * registered after this run listed the index are never touched by it. A checkpoint that
 * commits while GC runs and reuses objects GC just condemned is caught by re-walking new
 * checkpoints after condemning (and, failing that, by the next run's second check), which
 * revives the packs; the grace period guarantees their blobs are still there.
 */
export async function collectGarbage(deps: GcDeps, options: GcOptions = {}): Promise<GcReport> {
  const { meta } = deps;
  const dryRun = options.dryRun === true;
  const now = options.now ?? Date.now();
  const graceMs = options.graceMs ?? DEFAULT_GC_GRACE_MS;
  const ratio = options.repackBelowLiveRatio ?? DEFAULT_REPACK_BELOW_LIVE_RATIO;
  if (!Number.isFinite(graceMs) || graceMs < 0)
    throw new InputError('INVALID_INPUT', `GC grace must be a non-negative number of ms, got ${graceMs}`);
  if (!(ratio >= 0 && ratio <= 1)) throw new InputError('INVALID_INPUT', `repackBelowLiveRatio must be between 0 and 1, got ${ratio}`);
  const compactBelow = options.compactBelowBytes ?? DEFAULT_COMPACT_BELOW_BYTES;
  // Above the target size, the full packs compaction writes would be small again: every run would rewrite them.
  if (!(compactBelow >= 0 && compactBelow <= TARGET_PACK_BYTES))
    throw new InputError('INVALID_INPUT', `compactBelowBytes must be between 0 and ${TARGET_PACK_BYTES}, got ${compactBelow}`);
  const cutoff = now - graceMs;
  const phase = options.onProgress ?? (() => {});

  const writerTimeoutMs = options.writerTimeoutMs ?? CHECKPOINT_WRITER_TIMEOUT_MS;
  if (!Number.isFinite(writerTimeoutMs) || writerTimeoutMs < 0)
    throw new InputError('INVALID_INPUT', `writerTimeoutMs must be a non-negative number of ms, got ${writerTimeoutMs}`);

  phase('resume');
  const resumed = dryRun ? { packs: 0, bytes: 0, removed: [] } : await finishInterruptedDeletions(deps, now);
  // Before retention and the orphan sweep, so a killed writer's uploads are garbage in this very run.
  const interrupted = dryRun ? [] : await failAbandonedWriters(meta, now - writerTimeoutMs);
  // Listed before the checkpoints: a pack registered after this line belongs to a checkpoint this run may not see.
  const packs = await meta.objects.listPacks();
  phase('retention');
  const retention = await applyRetention(meta, options.retention ?? DEFAULT_RETENTION, now, dryRun);
  phase('mark');
  const reader = new ObjectReader(deps.blobs, meta);
  // Work-folder files (live and trashed) are roots of every run, whoever calls GC.
  const folders = folderRootSource(meta);
  const { live, marked } = await markLive(reader, retention.retained, [folders, ...(options.liveRootSources ?? [])]);
  const isLive = (id: Sha256Hex): boolean => live.data.has(id) || live.trees.has(id);
  const usage = await liveUsage(meta, packs, isLive);
  const open = packs.filter((p) => p.condemnedAt === null);
  const liveRows = (p: PackInfo): number => usage.get(p.id)?.liveRows ?? 0;
  const empty = open.filter((p) => liveRows(p) === 0);
  // A pack known missing cannot be read, so it is never rewritten: its live objects come back
  // only when a checkpoint that has their bytes writes them again (then it empties and goes).
  const readable = open.filter((p) => p.missingAt === null);
  // A pack with no dead object is never sparse, however small: rewriting it would give the same bytes.
  const sparse = readable.filter(
    (p) => liveRows(p) > 0 && liveRows(p) < p.objectCount && (usage.get(p.id)?.liveBytes ?? 0) < ratio * p.size,
  );
  const sparseIds = new Set(sparse.map((p) => p.id));
  const small = selectSmallPacks(
    readable.filter((p) => liveRows(p) > 0 && !sparseIds.has(p.id)),
    { belowBytes: compactBelow, now },
  );

  const entry = (p: PackInfo, reason: GcPackReason): GcPackEntry => ({
    id: p.id,
    size: p.size,
    objects: p.objectCount,
    liveObjects: liveRows(p),
    reason,
  });
  const unindexed =
    (reason: GcPackReason) =>
    (p: { id: Sha256Hex; size: number }): GcPackEntry => ({
      ...p,
      objects: null,
      liveObjects: null,
      reason,
    });

  const stagingRemoved = dryRun || deps.cacheDir === undefined ? 0 : sweepStaleStaging(deps.cacheDir);
  const statCaches = deps.cacheDir === undefined ? [] : await sweepStatCaches(meta, deps.cacheDir, now, dryRun);
  const base = {
    forgotten: retention.forgotten.size,
    checkpointsInterrupted: interrupted.length,
    liveObjects: live.trees.size + live.data.size,
    stagingRemoved,
    statCachesRemoved: statCaches.length,
    dryRun,
  };
  const listed = (deleted: GcPackEntry[], orphans: OrphanResult): GcListing => ({
    checkpointsForgotten: [...retention.forgotten].sort(),
    packsCondemned: empty.map((p) => entry(p, 'empty')),
    packsRepacked: sparse.map((p) => entry(p, 'sparse')),
    packsCompacted: small.map((p) => entry(p, 'small')),
    packsDeleted: [...deleted, ...orphans.deletedPacks.map(unindexed('unindexed'))],
    orphanPacksQueued: orphans.queuedPacks.map(unindexed('unindexed')),
    statCachesRemoved: statCaches,
  });
  if (dryRun) {
    const interrupted = (await interruptedDeletions(deps)).filter((d) => d.finish).map((d) => ({ id: d.packId, size: d.size }));
    const condemned = packs.filter((p) => p.condemnedAt !== null && !interrupted.some((d) => d.id === p.id));
    const doomed = condemned.filter((p) => (p.condemnedAt as number) <= cutoff && liveRows(p) === 0);
    // With no grace, what this run would condemn or repack it would also delete.
    const soon =
      graceMs === 0
        ? [...empty.map((p) => entry(p, 'empty')), ...sparse.map((p) => entry(p, 'sparse')), ...small.map((p) => entry(p, 'small'))]
        : [];
    const orphans = await collectOrphans(deps, { now, cutoff, dryRun });
    const deleted = [...interrupted.map(unindexed('interrupted')), ...doomed.map((p) => entry(p, 'condemned')), ...soon];
    return {
      ...base,
      packsCondemned: empty.length,
      packsRepacked: sparse.length,
      packsCompacted: small.length,
      packsDeleted: deleted.length,
      packsRevived: condemned.filter((p) => liveRows(p) > 0).length,
      bytesFreed: deleted.reduce((n, p) => n + p.size, 0) + orphans.bytes,
      orphanPacksQueued: orphans.queued,
      orphanPacksDeleted: orphans.deleted,
      listing: listed(deleted, orphans),
    };
  }

  phase('repack');
  // One pass for both: the live objects of sparse and small packs share the new packs.
  const repack = await repackPacks(deps, [...sparse, ...small], isLive, now);
  phase('condemn');
  const packsCondemned = await meta.objects.condemnPacks(
    empty.map((p) => p.id),
    now,
  );
  await markNewCheckpoints(meta, reader, marked, live, [...empty.map((p) => p.id), ...repack.repacked]);
  // Folder writes committed since the mark may name objects of packs just condemned: the sweep revives those.
  for (const id of (await folders.roots()).objects) live.data.add(id);

  phase('sweep');
  const swept = await sweepCondemned(deps, isLive, cutoff, now);
  phase('orphans');
  const orphans = await collectOrphans(deps, { now, cutoff, dryRun });
  await pruneJournal(meta, now);
  // Packs this run condemned keep the reason they were condemned for.
  const origin = new Map<string, GcPackReason>([
    ...empty.map((p) => [p.id, 'empty'] as const),
    ...sparse.map((p) => [p.id, 'sparse'] as const),
    ...small.map((p) => [p.id, 'small'] as const),
  ]);
  const deleted = [
    ...resumed.removed.map(unindexed('interrupted')),
    ...swept.deleted.map((p) => entry(p, origin.get(p.id) ?? 'condemned')),
  ];
  return {
    ...base,
    packsCondemned,
    packsRepacked: sparse.length,
    packsCompacted: small.length,
    packsDeleted: resumed.packs + swept.deleted.length,
    packsRevived: swept.revived,
    bytesFreed: resumed.bytes + swept.bytes + orphans.bytes,
    orphanPacksQueued: orphans.queued,
    orphanPacksDeleted: orphans.deleted,
    listing: listed(deleted, orphans),
  };
}

/**
 * The second check and the deletion of condemned packs: every condemned pack that a live
 * object still points into is revived, whatever its age; the others are deleted through the
 * journal once condemned for longer than the grace (`condemnedAt <= cutoff`).
 */
async function sweepCondemned(
  deps: GcDeps,
  isLive: (id: Sha256Hex) => boolean,
  cutoff: number,
  now: number,
): Promise<{ deleted: PackInfo[]; revived: number; bytes: number }> {
  const condemned = (await deps.meta.objects.listPacks()).filter((p) => p.condemnedAt !== null);
  const needed = new Set(
    (await deps.meta.objects.objectsInPacks(condemned.map((p) => p.id))).filter((r) => isLive(r.id)).map((r) => r.packId),
  );
  const revived = await deps.meta.objects.revivePacks([...needed]);
  const deleted: PackInfo[] = [];
  let bytes = 0;
  for (const pack of condemned) {
    if (needed.has(pack.id) || (pack.condemnedAt as number) > cutoff) continue;
    if (!(await deletePackJournaled(deps, pack.id, now))) continue;
    deleted.push(pack);
    bytes += pack.size;
  }
  return { deleted, revived, bytes };
}
