import type { Sha256Hex } from '../../core/hash.js';
import { ConflictError, errorToJson, HoldfastError, isHoldfastError, StoreError } from '../../errors.js';
import type { Checkpoint, CheckpointReason, MetadataStore, MetadataTransaction, Workspace } from '../../metadata/metadata-store.js';
import { ObjectWriter, type WriteStats } from '../../objects/object-writer.js';
import type { ExcludeOptions, Exclusion } from '../../rules/excludes.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES, type ScanLimits, type ScanResult } from '../../workspace-fs/scan.js';
import type { StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import type { CheckpointNote } from '../checkpoint-note.js';
import { MAX_CHECKPOINT_MS, type SnapshotDeps } from '../snapshot-deps.js';
import type { ScanReport, SettledSubtrees, SourceScan, WorkspaceSource } from '../workspace-source.js';
import { ContentSink } from './content-sink.js';
import { insertRefusingLost, LostObjects } from './lost-objects.js';
import { readFiles, type UnreadableFile } from './read-files.js';
import { buildTrees, type FileIds } from './tree-builder.js';

/** Scans a checkpoint makes before giving up on a workspace that keeps changing. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** Exclusions kept in the checkpoint row (all are returned to the caller). */
const STORED_EXCLUSIONS = 100;

/** Progress reported while a checkpoint runs. */
export interface CheckpointProgress {
  readonly phase: 'scan' | 'read' | 'upload' | 'commit';
  readonly files: number;
  readonly filesTotal: number;
  readonly bytes: number;
  readonly bytesTotal: number;
}

/** How often a running checkpoint stamps its writer's heartbeat on its pending row. */
export const CHECKPOINT_HEARTBEAT_MS = 10_000;
/**
 * A pending checkpoint whose heartbeat is older than this has lost its writer (killed, its
 * host gone): GC marks it failed (`INTERRUPTED`) and its uploads become garbage. Six missed
 * heartbeats, so a writer stalled on a slow store is not taken for dead.
 */
export const CHECKPOINT_WRITER_TIMEOUT_MS = 6 * CHECKPOINT_HEARTBEAT_MS;

/** See {@link CheckpointOptions.onUnreadable}. */
export type UnreadablePolicy = 'fail' | 'skip';

/** Unreadable files a failed checkpoint names in its error's data at most. */
export const MAX_REPORTED_UNREADABLE = 100;

/** Options of one checkpoint. */
export interface CheckpointOptions {
  /** Where the workspace is read from (a host directory, or a sandbox through its agent). */
  readonly source: WorkspaceSource;
  readonly workspace: Workspace;
  readonly reason?: CheckpointReason;
  /** The caller's label and metadata, already checked (`checkedCheckpointNote`), recorded on the pending row. */
  readonly note?: CheckpointNote;
  readonly excludes?: ExcludeOptions;
  readonly limits?: Partial<ScanLimits>;
  readonly maxAttempts?: number;
  /**
   * What a file the source cannot read (`EACCES`, `EPERM`) does: `fail` (the default) fails
   * the checkpoint with `FORBIDDEN` (data: `reason: 'unreadable'`, `path`, `errno`, and
   * `unreadable`, the first {@link MAX_REPORTED_UNREADABLE} of them); `skip` leaves each out
   * and reports it among the exclusions (reason `unreadable`, rule the errno).
   */
  readonly onUnreadable?: UnreadablePolicy;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: CheckpointProgress) => void;
  /**
   * Sees every scan (each attempt's) before any of its content is read: a throw fails the
   * checkpoint with that error and the head stays where it was. Repository checkpoints refuse
   * git's lock files and unsupported layouts here.
   */
  readonly onScan?: (scan: ScanResult) => void;
  /**
   * Runs inside the commit transaction, with the checkpoint marked ready and just before the
   * head moves: a rejection rolls everything back and fails the checkpoint. The runs layer
   * fences the head move with its lease epoch here (so a stale owner hears `STALE_LEASE`, not
   * `CONFLICT`) and completes the turn atomically with it.
   */
  readonly onCommit?: (tx: MetadataTransaction, checkpoint: Checkpoint) => Promise<void>;
}

/** Figures reported by a checkpoint. */
export interface CheckpointStats extends WriteStats {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  filesHashed: number;
  bytesHashed: number;
  attempts: number;
  durationMs: number;
  excludedCount: number;
  /** Exclusions by reason, over all of them (the row keeps only the first few in `excluded`). */
  excludedByReason: Record<string, number>;
  /** Files stored as hard links to another file of the checkpoint (members, leaders not counted). */
  hardlinks: number;
  /** The root directory's permission bits and mtime (whole ms), which a restore applies to its target. */
  root: { mode: number; mtimeMs: number };
  /** How the source made the scan it committed, when it says (an agent's watches; see `ScanReport`). */
  scan?: ScanReport;
}

/** The ready checkpoint, its figures, every exclusion with its reason, and every allowance. */
export interface CheckpointResult {
  readonly checkpoint: Checkpoint;
  readonly stats: CheckpointStats;
  readonly excluded: Exclusion[];
  /** Paths a secret rule matched but `allowSecretPaths` let through (never silent). */
  readonly allowed: readonly Exclusion[];
}

/**
 * Captures the workspace `source` reads as a new checkpoint of `workspace` (DESIGN section 4): a pending row first,
 * then scan, hash what the stat cache cannot vouch for, upload missing objects in packs,
 * re-scan to prove nothing moved, and in one transaction register the packs, mark the
 * checkpoint ready and move the head by compare-and-swap. On any failure the checkpoint is
 * marked failed with its error and the head stays where it was.
 *
 * A checkpoint never becomes ready referencing an object whose pack is known missing from the
 * blob store: the commit checks every id it references (reused ones included) against the
 * known-missing packs. If one is there, the capture runs once more without the stat cache's
 * and the tree cache's shortcuts, so every file is read again and the lost objects (which
 * dedup no longer finds) are written anew; a second loss fails the checkpoint with a
 * transient `STORE_UNAVAILABLE`.
 */
export async function createCheckpoint(deps: SnapshotDeps, options: CheckpointOptions): Promise<CheckpointResult> {
  const started = performance.now();
  const startedAtMs = Date.now();
  const { workspace } = options;
  await failAbandoned(deps.meta, workspace.id, startedAtMs);
  const pending = await deps.meta.checkpoints.createPending({
    workspaceId: workspace.id,
    parentId: workspace.headCheckpointId,
    reason: options.reason ?? 'manual',
    ...(options.note?.label === undefined ? {} : { label: options.note.label }),
    ...(options.note?.meta === undefined ? {} : { meta: options.note.meta }),
  });
  // Renewed while this process works on it; a writer killed outright stops renewing, and GC sees that.
  const heartbeat = setInterval(() => {
    deps.meta.checkpoints.heartbeat(pending.id).catch(() => undefined);
  }, CHECKPOINT_HEARTBEAT_MS);
  heartbeat.unref();
  try {
    let captured = await capture(deps, options, pending.id, true);
    let committed: Committed;
    try {
      committed = await commit(deps, options, pending.id, captured, started, startedAtMs);
    } catch (error) {
      if (!(error instanceof LostObjects)) throw error;
      captured = await capture(deps, options, pending.id, false);
      committed = await commit(deps, options, pending.id, captured, started, startedAtMs).catch((again: unknown) => {
        if (!(again instanceof LostObjects)) throw again;
        throw new StoreError(
          `packs ${again.packs.join(', ')} went missing from the blob store while this checkpoint ran; retry the checkpoint`,
          {
            transient: true,
            data: { packs: again.packs },
          },
        );
      });
    }
    const { checkpoint, stats } = committed;
    await options.source.saveCache(captured.scan, captured.cache, captured.ids, checkpoint.id).catch(() => undefined);
    return { checkpoint, stats, excluded: captured.excluded, allowed: captured.allowed };
  } catch (thrown) {
    // Stopped from outside (Ctrl-C, SIGTERM, a shutdown): the reason the caller gave is what the checkpoint failed of.
    const reason: unknown = options.signal?.aborted === true ? options.signal.reason : undefined;
    const error = reason instanceof HoldfastError ? reason : thrown;
    const reported = isHoldfastError(error, 'CONFLICT')
      ? new ConflictError('CONFLICT', `workspace ${workspace.name} moved on while this checkpoint ran; nothing was changed`, {
          data: { workspaceId: workspace.id, checkpointId: pending.id },
          cause: error,
        })
      : error;
    await deps.meta.checkpoints.markFailed(pending.id, errorToJson(reported)).catch(() => undefined);
    // Failed, its uploaded packs are orphans for GC (after grace); while pending they are protected.
    await deps.meta.gc.releaseIntents(pending.id).catch(() => undefined);
    throw reported;
  } finally {
    clearInterval(heartbeat);
  }
}

/**
 * One transaction: register the packs, refuse lost objects, mark the checkpoint ready and move
 * the head by compare-and-swap (the caller's `onCommit` in between).
 */
async function commit(
  deps: SnapshotDeps,
  options: CheckpointOptions,
  pendingId: string,
  captured: Captured,
  started: number,
  startedAtMs: number,
): Promise<Committed> {
  const { workspace } = options;
  if (performance.now() - started > MAX_CHECKPOINT_MS) {
    throw new HoldfastError('TIMEOUT', `checkpoint of ${options.source.label} took longer than ${MAX_CHECKPOINT_MS / 60_000} minutes`);
  }
  options.onProgress?.({
    phase: 'commit',
    files: captured.stats.files,
    filesTotal: captured.stats.files,
    bytes: captured.stats.bytes,
    bytesTotal: captured.stats.bytes,
  });
  const stats: CheckpointStats = { ...captured.stats, durationMs: Math.round(performance.now() - started) };
  const pending = { id: pendingId };
  const checkpoint = await deps.meta.transaction(async (tx) => {
    await guardPreexistingPacks(tx, captured.written.preexistingPacks, startedAtMs);
    await insertRefusingLost(tx, captured);
    await tx.gc.releaseIntents(pending.id);
    const ready = await tx.checkpoints.markReady(pending.id, {
      rootTree: captured.rootId,
      stats: { ...stats, excluded: captured.excluded.slice(0, STORED_EXCLUSIONS), allowed: captured.allowed },
    });
    await options.onCommit?.(tx, ready);
    await tx.workspaces.casHead(workspace.id, workspace.headVersion, pending.id);
    return ready;
  });
  return { checkpoint, stats };
}

/** A ready checkpoint and the figures its commit recorded. */
interface Committed {
  readonly checkpoint: Checkpoint;
  readonly stats: CheckpointStats;
}

/**
 * Marks failed (`INTERRUPTED`, `data.reason: 'writer_gone'`) every pending checkpoint whose
 * writer's heartbeat is older than `before`, and releases its upload intents so what it
 * uploaded is garbage like any failed checkpoint's. Resolves with the checkpoints so failed.
 */
export async function failAbandonedWriters(meta: MetadataStore, before: number): Promise<string[]> {
  const failed: string[] = [];
  for (const c of await meta.checkpoints.listAbandoned(before)) {
    const error = new HoldfastError(
      'INTERRUPTED',
      `the process writing checkpoint ${c.id} stopped before it finished (no heartbeat since ${new Date(before).toISOString()}); checkpoint again`,
      { data: { reason: 'writer_gone', checkpointId: c.id } },
    );
    try {
      await meta.checkpoints.markFailed(c.id, errorToJson(error));
    } catch (e) {
      // It finished meanwhile: its writer was alive after all.
      if (isHoldfastError(e, 'CONFLICT')) continue;
      throw e;
    }
    await meta.gc.releaseIntents(c.id);
    failed.push(c.id);
  }
  return failed;
}

/**
 * Pending checkpoints older than {@link MAX_CHECKPOINT_MS} belong to processes that died (no
 * live checkpoint runs that long): mark them failed so `log` does not show them as saving.
 */
async function failAbandoned(meta: MetadataStore, workspaceId: string, now: number): Promise<void> {
  for (const c of await meta.checkpoints.listByWorkspace(workspaceId, { status: 'pending' })) {
    if (c.createdAt >= now - MAX_CHECKPOINT_MS) continue;
    const error = { code: 'TIMEOUT', message: 'abandoned: the process running this checkpoint stopped before it finished' };
    await meta.checkpoints.markFailed(c.id, error).catch(() => undefined);
  }
}

/**
 * A pack blob this checkpoint found already present (identical bytes) may belong to a pack GC
 * is deleting. Under the same pack lock GC takes to start a deletion, refuse to rely on any
 * such pack: the checkpoint fails with a transient error and a retry uploads the pack afresh.
 */
async function guardPreexistingPacks(tx: MetadataTransaction, packIds: readonly string[], since: number): Promise<void> {
  if (packIds.length === 0) return;
  await tx.objects.lockPacks(packIds);
  const doomed = await tx.gc.deletionsSince(packIds, since);
  if (doomed.length > 0) {
    throw new StoreError(`pack ${doomed[0]} was being garbage-collected while this checkpoint reused it; retry the checkpoint`, {
      transient: true,
      data: { packs: doomed },
    });
  }
}

/** How many exclusions there are of each reason. */
function countByReason(excluded: readonly Exclusion[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of excluded) counts[e.reason] = (counts[e.reason] ?? 0) + 1;
  return counts;
}

interface Captured {
  readonly rootId: Sha256Hex;
  readonly written: Awaited<ReturnType<ObjectWriter['finish']>>;
  readonly stats: Omit<CheckpointStats, 'durationMs'>;
  readonly excluded: Exclusion[];
  readonly allowed: readonly Exclusion[];
  readonly cache: StatCacheBuilder;
  readonly scan: SourceScan;
  readonly ids: ReadonlyMap<string, FileIds>;
  /** Every tree the checkpoint references: encoded by it or reused from the tree cache. */
  readonly treeIds: readonly Sha256Hex[];
  /** The settled subtrees it references whole (their files are not in `ids`). */
  readonly settled?: SettledSubtrees;
}

/**
 * Scans, reads and uploads until two scans agree. With `reuse` false no file's ids are taken
 * from the stat cache and no directory keeps a cached tree id: everything is offered to the
 * index again, so what it lacks (a lost pack's objects) is written.
 */
async function capture(deps: SnapshotDeps, options: CheckpointOptions, checkpointId: string, reuse: boolean): Promise<Captured> {
  const { source, workspace, signal, onProgress } = options;
  const limits: ScanLimits = {
    maxFileBytes: options.limits?.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
    maxEntries: options.limits?.maxEntries ?? DEFAULT_MAX_ENTRIES,
  };
  const recordIntent = (packId: Sha256Hex) => deps.meta.gc.recordIntent({ packId, writerId: checkpointId, checkpointId });
  const writer = new ObjectWriter(deps.blobs, deps.workers, recordIntent, signal);
  const sink = new ContentSink(deps.meta, writer);
  const maxAttempts = options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const totals = { filesHashed: 0, bytesHashed: 0 };
  /** The last file found changed while it was read, for the error when no attempt settles. */
  let torn: string | undefined;

  for (let attempt = 1; attempt <= maxAttempts; attempt += 1) {
    signal?.throwIfAborted();
    onProgress?.({ phase: 'scan', files: 0, filesTotal: 0, bytes: 0, bytesTotal: 0 });
    const sourceScan = await source.scan(options.excludes, limits, workspace.headCheckpointId);
    const { scan } = sourceScan;
    options.onScan?.(scan);
    const read = await readFiles({
      deps,
      source,
      sourceScan,
      sink,
      totals,
      reuse,
      ...(signal === undefined ? {} : { signal }),
      ...(onProgress === undefined ? {} : { onProgress }),
    });
    await sink.flush();
    if (read.unreadable.length > 0 && (options.onUnreadable ?? 'fail') === 'fail') throw unreadableError(source.label, read.unreadable);
    if (read.changedWhileReading) {
      torn = read.changedPaths.at(-1);
      continue;
    }
    const settled = reuse ? sourceScan.settled : undefined;
    const { rootId, trees, reused, hardlinks } = buildTrees(scan.root, read.all, {
      cache: sourceScan.trees,
      hits: read.hits,
      next: read.cache,
      encodeAll: !reuse,
      ...(sourceScan.dirTrees === undefined ? {} : { known: sourceScan.dirTrees.known, built: sourceScan.dirTrees.built }),
      ...(settled === undefined ? {} : { settled }),
    });
    await sink.addTrees(trees);
    // Ids only from here on: the encoded trees (about 20 MB at 100k files) are the writer's now, and go once packed.
    const treeIds = [...trees.map((t) => t.id), ...reused];
    trees.length = 0;
    onProgress?.({ phase: 'upload', files: scan.files, filesTotal: scan.files, bytes: scan.bytes, bytesTotal: scan.bytes });
    if (!(await source.unchanged(sourceScan, (p) => !read.hits.has(p)))) continue;
    const written = await writer.finish();
    const excluded: Exclusion[] = [
      ...scan.excluded,
      ...read.excluded,
      ...read.unreadable.map((u): Exclusion => ({ path: u.path, reason: 'unreadable', rule: u.errno })),
    ];
    const stats = {
      files: scan.files - read.missing.files,
      dirs: scan.dirs,
      symlinks: scan.symlinks,
      bytes: scan.bytes - read.missing.bytes,
      ...totals,
      attempts: attempt,
      excludedCount: excluded.length,
      excludedByReason: countByReason(excluded),
      hardlinks,
      root: { mode: scan.root.mode, mtimeMs: scan.root.mtimeMs },
      ...(sourceScan.report === undefined ? {} : { scan: sourceScan.report }),
      ...written.stats,
    };
    return {
      rootId,
      written,
      stats,
      excluded,
      allowed: sourceScan.allowances,
      cache: read.cache,
      scan: sourceScan,
      ids: read.ids,
      treeIds,
      ...(settled === undefined ? {} : { settled }),
    };
  }
  // Packs already uploaded stay unreferenced until GC removes them.
  const last = torn === undefined ? '' : ` (${JSON.stringify(torn)} changed while it was read)`;
  throw new ConflictError(
    'WORKSPACE_CHANGED',
    `${source.label} kept changing during ${maxAttempts} scans${last}; checkpoint when it is quiet`,
    {
      data: { attempts: maxAttempts, ...(torn === undefined ? {} : { path: torn }) },
    },
  );
}

/** A checkpoint that met files it cannot read under the `fail` policy: `FORBIDDEN`, naming the first and listing them. */
function unreadableError(label: string, unreadable: readonly UnreadableFile[]): HoldfastError {
  const first = unreadable[0] as UnreadableFile;
  const more = unreadable.length > 1 ? ` and ${unreadable.length - 1} more` : '';
  return new HoldfastError(
    'FORBIDDEN',
    `${label}: cannot read ${JSON.stringify(first.path)} (${first.errno})${more}: make it readable, or checkpoint with onUnreadable 'skip' to leave unreadable files out`,
    { data: { reason: 'unreadable', path: first.path, errno: first.errno, unreadable: unreadable.slice(0, MAX_REPORTED_UNREADABLE) } },
  );
}
