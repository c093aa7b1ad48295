import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { checkKept, utimeOf } from '../core/fs-exact.js';
import type { Sha256Hex } from '../core/hash.js';
import { LongPaths } from '../core/long-paths.js';
import { permissionBits } from '../core/modes.js';
import { fsPath } from '../core/name-bytes.js';
import { symlinkStaysInside } from '../core/paths.js';
import { ConflictError, InputError, IntegrityError } from '../errors.js';
import type { Checkpoint, Workspace } from '../metadata/metadata-store.js';
import { ObjectReader } from '../objects/object-reader.js';
import type { SnapshotDeps } from './checkpoint.js';
import { type ExcludedSummary, excludedSummary, recordedRoot } from './checkpoint-record.js';
import { removeTree } from './remove-tree.js';
import { finishFile, openNew, type PathedFile, type StagedPath, writeFiles } from './restore-files.js';
import type { FileWriter } from './restore-reuse.js';
import { beginStaging, endStaging, sweepStaleStaging } from './restore-staging.js';
import { refuseStoreOverlap } from './restore-target.js';
import type { ScanLimits } from './scan.js';
import { StatCacheBuilder, statCacheFile } from './stat-cache.js';
import { checkpointLimits, type FlatTree, flattenTree } from './tree-walk.js';
import { WarmTarget } from './warm-target.js';

export type { ExcludedSummary } from './checkpoint-record.js';

/** Progress reported while a restore runs. */
export interface RestoreProgress {
  readonly files: number;
  readonly filesTotal: number;
  readonly bytes: number;
  readonly bytesTotal: number;
}

/** Options of one restore. */
export interface RestoreOptions {
  readonly dir: string;
  readonly workspace: Workspace;
  readonly checkpoint: Checkpoint;
  /** Allow replacing a non-empty target (warm restore: unchanged files are reused). */
  readonly replace?: boolean;
  /** What the checkpoint may hold; defaults to a scan's limits raised to what its row records (see `checkpointLimits`). */
  readonly limits?: Partial<ScanLimits>;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: RestoreProgress) => void;
}

/** What a restore did; every object and every file was verified before publishing. */
export interface RestoreReceipt {
  readonly checkpointId: string;
  readonly rootTree: Sha256Hex;
  readonly target: string;
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** Files taken unchanged from the previous copy at the target, wherever they lay there (warm restore). */
  readonly filesReused: number;
  /** Raw bytes read from the object store. */
  readonly bytesFetched: number;
  /**
   * Files restored as hard links to another restored file (group members; leaders not
   * counted).
   */
  readonly hardlinks: number;
  /**
   * What the checkpoint left out (or kept changed), by reason: what a restore does not bring
   * back, e.g. `cache` directories (node_modules) setup must rebuild, or `secret-path` files.
   */
  readonly excluded: ExcludedSummary;
  /** Bytes copied from the previous copy instead of fetched: whole files it could not lend by hard link, and unchanged chunks of changed files. */
  readonly bytesCopiedLocally: number;
  /** Bytes, modes, mtimes, symlink targets and hard-link groups were checked after writing. */
  readonly verified: true;
  readonly durationMs: number;
}

/**
 * Restores a checkpoint into `dir` (DESIGN section 5): builds the whole tree in a staging
 * directory beside the target, verifying every object and every file hash, then publishes it
 * by rename. A non-empty target needs `replace`; its unchanged files are reused instead of
 * fetched. On any failure the staging directory is removed and the target is left as it was.
 *
 * The stored tree is never trusted: it is validated and held to a scan's limits before
 * anything is created (`INTEGRITY`, `LIMIT_EXCEEDED`), no mode beyond permission bits is
 * applied, every symlink is confined, and the old target is read without following its
 * symlinks. A target overlapping the blob store, the metadata store or the stat cache is
 * refused with `INVALID_INPUT`. Staging left by a killed restore to the same target is
 * removed first (only when its owner is gone).
 *
 * What comes back is exact: names as their bytes, paths of any length (through
 * `LongPaths`), mtimes to the millisecond before 1970 and far ahead, hard-link members as
 * links to their leader (made once the leader is complete, written or reused), and the
 * root's recorded mode and mtime. Each mode and mtime is read back after it is set; one the
 * target did not keep fails the restore with `INTEGRITY` (data: `path`, `field`).
 */
export async function restoreCheckpoint(deps: SnapshotDeps, options: RestoreOptions): Promise<RestoreReceipt> {
  const started = performance.now();
  const target = path.resolve(options.dir);
  refuseStoreOverlap(target, deps);
  const existing = inspectTarget(target, options.replace === true);
  const rootTree = options.checkpoint.rootTree;
  if (rootTree === null)
    throw new InputError('INVALID_INPUT', `checkpoint ${options.checkpoint.id} is ${options.checkpoint.status}, not ready`);
  const reader = new ObjectReader(deps.blobs, deps.meta);
  // Every tree is read, validated and counted against the limits before anything is created.
  const flat = await flattenTree(reader, rootTree, undefined, checkpointLimits(options.checkpoint, options.limits));
  const root = recordedRoot(options.checkpoint);
  const cacheFile = statCacheFile(deps.cacheDir, options.workspace.id, target);
  const cache = new StatCacheBuilder(Date.now());
  const warm = existing === 'non-empty' ? new WarmTarget(target, cacheFile, flat) : undefined;
  // A checkpoint older than its root record leaves the root 0755 with its mtime untouched.
  if (warm?.unchanged(flat, root ?? { mode: 0o755 }, cache)) {
    warm.close();
    cache.save(cacheFile, options.checkpoint.id);
    // Nothing written, nothing fetched: the target already was the checkpoint.
    const members = flat.files.filter((f) => f.hardlink !== undefined).length;
    return receiptOf(options.checkpoint, rootTree, target, flat, started, {
      filesReused: flat.files.length,
      bytesFetched: 0,
      bytesCopiedLocally: 0,
      hardlinks: members,
    });
  }
  if (existing === 'absent') fs.mkdirSync(path.dirname(target), { recursive: true });
  sweepStaleStaging(deps.cacheDir, target);
  const staging = beginStaging(deps.cacheDir, target);
  const long = new LongPaths();
  const at: StagedPath = (rel) => long.at(rel === '' ? staging : path.join(staging, rel));
  try {
    for (const dir of flat.dirs.slice(1)) fs.mkdirSync(at(dir.path), { mode: 0o700 });
    const local = await warm?.reuse({ flat, staging, reader, meta: deps.meta, writer: stagingWriter(at, cache), signal: options.signal });
    // Hard-link members are linked to their leader below, once every leader is complete.
    const todo = flat.files.filter((f) => f.hardlink === undefined && local?.done.has(f.path) !== true);
    const bytesFetched = (await writeFiles(reader, todo, at, cache, options)) + (local?.bytesFetched ?? 0);
    const hardlinks = linkMembers(flat.files, at, cache);
    for (const link of flat.symlinks) {
      // Checked when the tree was read; checked again here, where the link is made.
      if (!symlinkStaysInside(link.path, link.target))
        throw new IntegrityError('INTEGRITY', `symlink ${link.path} leads outside the target`, { data: { path: link.path } });
      const p = at(link.path);
      fs.symlinkSync(fsPath(link.target), p);
      const time = utimeOf(link.mtimeMs);
      fs.lutimesSync(p, time, time);
      checkKept(link.path, fs.lstatSync(p), undefined, link.mtimeMs);
    }
    for (const dir of [...flat.dirs].reverse()) {
      const p = at(dir.path);
      if (dir.path === '') {
        // A checkpoint older than its root record: the root as before, 0755 and mtime untouched.
        fs.chmodSync(p, root?.mode ?? 0o755);
        if (root === undefined) continue;
        setDirTimes(p, '', root.mode, root.mtimeMs);
      } else {
        fs.chmodSync(p, permissionBits(dir.mode));
        setDirTimes(p, dir.path, permissionBits(dir.mode), dir.mtimeMs);
      }
    }
    long.close();
    publish(staging, target, existing);
    endStaging(deps.cacheDir, staging);
    if (local !== undefined) warm?.recordLinks(local, cache);
    warm?.close();
    cache.save(cacheFile, options.checkpoint.id);
    return receiptOf(options.checkpoint, rootTree, target, flat, started, {
      filesReused: local?.filesReused ?? 0,
      bytesFetched,
      bytesCopiedLocally: local?.bytesCopiedLocally ?? 0,
      hardlinks,
    });
  } catch (error) {
    long.close();
    warm?.close();
    if (fs.existsSync(staging)) removeTree(staging);
    endStaging(deps.cacheDir, staging);
    throw error;
  }
}

/** Sets a directory's mtime and checks what the target kept of it and of its mode. */
function setDirTimes(p: string | Buffer, rel: string, mode: number, mtimeMs: number): void {
  const time = utimeOf(mtimeMs);
  fs.utimesSync(p, time, time);
  checkKept(rel, fs.lstatSync(p), mode, mtimeMs);
}

/**
 * Creates every hard-link member as a link to its leader (complete by now: written or
 * reused) and checks each names the leader's inode; returns how many were made. The stat
 * cache gets every member and leader with their final stat (a link changes the inode's ctime).
 */
function linkMembers(files: readonly PathedFile[], at: StagedPath, cache: StatCacheBuilder): number {
  const groups = new Map<string, PathedFile[]>();
  for (const f of files) {
    if (f.hardlink === undefined) continue;
    const group = groups.get(f.hardlink);
    if (group === undefined) groups.set(f.hardlink, [f]);
    else group.push(f);
  }
  let made = 0;
  for (const [leaderPath, members] of groups) {
    const leaderAt = at(leaderPath);
    for (const m of members) {
      fs.linkSync(leaderAt, at(m.path));
      made += 1;
    }
    const st = fs.lstatSync(leaderAt);
    for (const m of members) {
      const linked = fs.lstatSync(at(m.path));
      if (linked.ino !== st.ino || linked.dev !== st.dev || st.nlink < members.length + 1) {
        throw new IntegrityError('INTEGRITY', `restored ${m.path} is not a hard link to ${leaderPath}`, {
          data: { path: m.path, field: 'hardlink' },
        });
      }
    }
    const leader = members[0] as PathedFile; // a member carries its leader's content, mode and mtime
    const identity = { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: leader.mode };
    for (const p of [leaderPath, ...members.map((m) => m.path)])
      cache.add(p, { ...identity, sha256: leader.sha256, chunks: leader.chunks });
  }
  return made;
}

/** What a restore did, besides what the checkpoint holds. */
type RestoreWork = Pick<RestoreReceipt, 'filesReused' | 'bytesFetched' | 'bytesCopiedLocally' | 'hardlinks'>;

/** The receipt of a restore of `flat` into `target` that did `work`. */
function receiptOf(
  checkpoint: Checkpoint,
  rootTree: Sha256Hex,
  target: string,
  flat: FlatTree,
  started: number,
  work: RestoreWork,
): RestoreReceipt {
  return {
    checkpointId: checkpoint.id,
    rootTree,
    target,
    files: flat.files.length,
    dirs: flat.dirs.length - 1,
    symlinks: flat.symlinks.length,
    bytes: flat.files.reduce((n, f) => n + f.size, 0),
    ...work,
    excluded: excludedSummary(checkpoint),
    verified: true,
    durationMs: Math.round(performance.now() - started),
  };
}

/** How warm reuse creates staging files: the same open and finish as every other restored file. */
function stagingWriter(at: StagedPath, cache: StatCacheBuilder): FileWriter {
  return { open: (file) => openNew(at, file), finish: (fd, file, digest) => finishFile(fd, file, digest, cache) };
}

type TargetState = 'absent' | 'empty' | 'non-empty';

function inspectTarget(target: string, replace: boolean): TargetState {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(target);
  } catch {
    return 'absent';
  }
  if (!st.isDirectory())
    throw new InputError('INVALID_INPUT', `restore target ${target} exists and is not a directory`, { data: { target } });
  if (fs.readdirSync(target).length === 0) return 'empty';
  if (!replace) {
    throw new ConflictError('CONFLICT', `restore target ${target} is not empty: pass --replace to replace it`, {
      data: { target, reason: 'target-not-empty' },
    });
  }
  return 'non-empty';
}

/** Swaps the staging tree in; the previous copy is removed only after the new one is in place. */
function publish(staging: string, target: string, existing: TargetState): void {
  if (existing === 'absent') {
    fs.renameSync(staging, target);
    return;
  }
  const old = path.join(path.dirname(target), `.${path.basename(target)}.holdfast-old-${randomBytes(6).toString('hex')}`);
  fs.renameSync(target, old);
  try {
    fs.renameSync(staging, target);
  } catch (error) {
    fs.renameSync(old, target);
    throw error;
  }
  removeTree(old);
}
