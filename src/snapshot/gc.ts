import type { Sha256Hex } from '../core/hash.js';
import { InputError } from '../errors.js';
import type { PackInfo } from '../metadata/metadata-store.js';
import { ObjectReader } from '../objects/object-reader.js';
import type { SnapshotDeps } from './checkpoint.js';
import { type LiveRootSource, liveUsage, markLive, markNewCheckpoints } from './gc-mark.js';
import { collectOrphans } from './gc-orphans.js';
import { sweepStatCaches } from './gc-stat-caches.js';
import { deletePackJournaled, finishInterruptedDeletions, pruneJournal } from './gc-sweep.js';
import { repackPacks } from './repack.js';
import { sweepStaleStaging } from './restore-staging.js';
import { applyRetention, DEFAULT_RETENTION, type RetentionPolicy } from './retention.js';

/** A condemned or unindexed pack is deleted only after this long (DESIGN section 7). */
export const DEFAULT_GC_GRACE_MS = 24 * 60 * 60 * 1000;
/** Packs whose live bytes are below this fraction of their size are repacked. */
export const DEFAULT_REPACK_BELOW_LIVE_RATIO = 0.5;

export type { LiveRootSource };

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
  /** Epoch ms this run treats as now (tests move it forward); default `Date.now()`. */
  readonly now?: number;
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
  /** Distinct live objects (trees and chunks). */
  readonly liveObjects: number;
  /** Packs with no live object, condemned by this run. */
  readonly packsCondemned: number;
  /** Sparse packs whose live objects were moved to new packs (then condemned). */
  readonly packsRepacked: number;
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
}

/** The services GC uses; with `cacheDir`, staging left there by killed restores and stale stat caches are removed too. */
export type GcDeps = Pick<SnapshotDeps, 'blobs' | 'meta' | 'workers'> & Partial<Pick<SnapshotDeps, 'cacheDir'>>;

/**
 * One garbage-collection run (DESIGN section 7): finish deletions a killed run left, apply
 * retention, mark live objects from retained ready checkpoints and {@link LiveRootSource}s,
 * repack sparse packs, condemn packs without live objects, delete condemned packs past the
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
  const cutoff = now - graceMs;
  const phase = options.onProgress ?? (() => {});

  phase('resume');
  const resumed = dryRun ? { packs: 0, bytes: 0 } : await finishInterruptedDeletions(deps, now);
  // Listed before the checkpoints: a pack registered after this line belongs to a checkpoint this run may not see.
  const packs = await meta.objects.listPacks();
  phase('retention');
  const retention = await applyRetention(meta, options.retention ?? DEFAULT_RETENTION, now, dryRun);
  phase('mark');
  const reader = new ObjectReader(deps.blobs, meta);
  const { live, marked } = await markLive(reader, retention.retained, options.liveRootSources ?? []);
  const isLive = (id: Sha256Hex): boolean => live.data.has(id) || live.trees.has(id);
  const usage = await liveUsage(meta, packs, isLive);
  const open = packs.filter((p) => p.condemnedAt === null);
  const liveRows = (p: PackInfo): number => usage.get(p.id)?.liveRows ?? 0;
  const empty = open.filter((p) => liveRows(p) === 0);
  // A pack with no dead object is never sparse, however small: rewriting it would give the same bytes.
  const sparse = open.filter((p) => liveRows(p) > 0 && liveRows(p) < p.objectCount && (usage.get(p.id)?.liveBytes ?? 0) < ratio * p.size);

  const stagingRemoved = dryRun || deps.cacheDir === undefined ? 0 : sweepStaleStaging(deps.cacheDir);
  const statCachesRemoved = dryRun || deps.cacheDir === undefined ? 0 : await sweepStatCaches(meta, deps.cacheDir, now);
  const base = {
    forgotten: retention.forgotten.size,
    liveObjects: live.trees.size + live.data.size,
    stagingRemoved,
    statCachesRemoved,
    dryRun,
  };
  if (dryRun) {
    const condemned = packs.filter((p) => p.condemnedAt !== null);
    const doomed = condemned.filter((p) => (p.condemnedAt as number) <= cutoff && liveRows(p) === 0);
    // With no grace, what this run would condemn or repack it would also delete.
    const soon = graceMs === 0 ? [...empty, ...sparse] : [];
    const orphans = await collectOrphans(deps, { now, cutoff, dryRun });
    return {
      ...base,
      packsCondemned: empty.length,
      packsRepacked: sparse.length,
      packsDeleted: doomed.length + soon.length,
      packsRevived: condemned.filter((p) => liveRows(p) > 0).length,
      bytesFreed: [...doomed, ...soon].reduce((n, p) => n + p.size, 0) + orphans.bytes,
      orphanPacksQueued: orphans.queued,
      orphanPacksDeleted: orphans.deleted,
    };
  }

  phase('repack');
  const repack = await repackPacks(deps, sparse, isLive, now);
  phase('condemn');
  const packsCondemned = await meta.objects.condemnPacks(
    empty.map((p) => p.id),
    now,
  );
  await markNewCheckpoints(meta, reader, marked, live, [...empty.map((p) => p.id), ...repack.repacked]);

  phase('sweep');
  const swept = await sweepCondemned(deps, isLive, cutoff, now);
  phase('orphans');
  const orphans = await collectOrphans(deps, { now, cutoff, dryRun });
  await pruneJournal(meta, now);
  return {
    ...base,
    packsCondemned,
    packsRepacked: repack.repacked.length,
    packsDeleted: resumed.packs + swept.deleted,
    packsRevived: swept.revived,
    bytesFreed: resumed.bytes + swept.bytes + orphans.bytes,
    orphanPacksQueued: orphans.queued,
    orphanPacksDeleted: orphans.deleted,
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
): Promise<{ deleted: number; revived: number; bytes: number }> {
  const condemned = (await deps.meta.objects.listPacks()).filter((p) => p.condemnedAt !== null);
  const needed = new Set(
    (await deps.meta.objects.objectsInPacks(condemned.map((p) => p.id))).filter((r) => isLive(r.id)).map((r) => r.packId),
  );
  const revived = await deps.meta.objects.revivePacks([...needed]);
  let deleted = 0;
  let bytes = 0;
  for (const pack of condemned) {
    if (needed.has(pack.id) || (pack.condemnedAt as number) > cutoff) continue;
    if (!(await deletePackJournaled(deps, pack.id, now))) continue;
    deleted += 1;
    bytes += pack.size;
  }
  return { deleted, revived, bytes };
}
