import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Sha256Hex } from '../core/hash.js';
import { permissionBits } from '../core/modes.js';
import { symlinkStaysInside } from '../core/paths.js';
import type { FileEntry } from '../core/tree.js';
import { ConflictError, InputError, IntegrityError } from '../errors.js';
import type { Checkpoint, Workspace } from '../metadata/metadata-store.js';
import { ObjectReader } from '../objects/object-reader.js';
import type { SnapshotDeps } from './checkpoint.js';
import { removeTree } from './remove-tree.js';
import type { FileWriter } from './restore-reuse.js';
import { beginStaging, endStaging, sweepStaleStaging } from './restore-staging.js';
import { refuseStoreOverlap } from './restore-target.js';
import type { ScanLimits } from './scan.js';
import { StatCacheBuilder, statCacheFile } from './stat-cache.js';
import { checkpointLimits, type FlatTree, flattenTree } from './tree-walk.js';
import { WarmTarget } from './warm-target.js';

/** Chunk bytes fetched per batch of files. */
const FETCH_BATCH_BYTES = 64 * 1024 * 1024;
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

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
  /** Bytes copied from the previous copy instead of fetched: whole files it could not lend by hard link, and unchanged chunks of changed files. */
  readonly bytesCopiedLocally: number;
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
  const cacheFile = statCacheFile(deps.cacheDir, options.workspace.id, target);
  const cache = new StatCacheBuilder(Date.now());
  const warm = existing === 'non-empty' ? new WarmTarget(target, cacheFile, flat) : undefined;
  // The root as this restore leaves it: permission bits 0755, mtime not set.
  if (warm?.unchanged(flat, { mode: 0o755 }, cache)) {
    warm.close();
    cache.save(cacheFile, options.checkpoint.id);
    return unchangedReceipt(options.checkpoint.id, rootTree, target, flat, started);
  }
  if (existing === 'absent') fs.mkdirSync(path.dirname(target), { recursive: true });
  sweepStaleStaging(deps.cacheDir, target);
  const staging = beginStaging(deps.cacheDir, target);
  try {
    for (const dir of flat.dirs.slice(1)) fs.mkdirSync(path.join(staging, dir.path), { mode: 0o700 });
    const local = await warm?.reuse({
      flat,
      staging,
      reader,
      meta: deps.meta,
      writer: stagingWriter(staging, cache),
      signal: options.signal,
    });
    const bytesFetched = (await writeFiles(reader, flat, staging, local?.done ?? new Set(), cache, options)) + (local?.bytesFetched ?? 0);
    for (const link of flat.symlinks) {
      // Checked when the tree was read; checked again here, where the link is made.
      if (!symlinkStaysInside(link.path, link.target))
        throw new IntegrityError('INTEGRITY', `symlink ${link.path} leads outside the target`, { data: { path: link.path } });
      const p = path.join(staging, link.path);
      fs.symlinkSync(link.target, p);
      fs.lutimesSync(p, toSeconds(link.mtimeMs), toSeconds(link.mtimeMs));
    }
    for (const dir of [...flat.dirs].reverse()) {
      const p = path.join(staging, dir.path);
      fs.chmodSync(p, dir.path === '' ? 0o755 : permissionBits(dir.mode));
      if (dir.path !== '') fs.utimesSync(p, toSeconds(dir.mtimeMs), toSeconds(dir.mtimeMs));
    }
    publish(staging, target, existing);
    endStaging(deps.cacheDir, staging);
    if (local !== undefined) warm?.recordLinks(local, cache);
    warm?.close();
    cache.save(cacheFile, options.checkpoint.id);
    return {
      checkpointId: options.checkpoint.id,
      rootTree,
      target,
      files: flat.files.length,
      dirs: flat.dirs.length - 1,
      symlinks: flat.symlinks.length,
      bytes: flat.files.reduce((n, f) => n + f.size, 0),
      filesReused: local?.filesReused ?? 0,
      bytesFetched,
      bytesCopiedLocally: local?.bytesCopiedLocally ?? 0,
      verified: true,
      durationMs: Math.round(performance.now() - started),
    };
  } catch (error) {
    warm?.close();
    if (fs.existsSync(staging)) removeTree(staging);
    endStaging(deps.cacheDir, staging);
    throw error;
  }
}

/** The receipt of a warm restore onto a target that already was the checkpoint: nothing written, nothing fetched. */
function unchangedReceipt(checkpointId: string, rootTree: Sha256Hex, target: string, flat: FlatTree, started: number): RestoreReceipt {
  return {
    checkpointId,
    rootTree,
    target,
    files: flat.files.length,
    dirs: flat.dirs.length - 1,
    symlinks: flat.symlinks.length,
    bytes: flat.files.reduce((n, f) => n + f.size, 0),
    filesReused: flat.files.length,
    bytesFetched: 0,
    bytesCopiedLocally: 0,
    verified: true,
    durationMs: Math.round(performance.now() - started),
  };
}

/** How warm reuse creates staging files: the same open and finish as every other restored file. */
function stagingWriter(staging: string, cache: StatCacheBuilder): FileWriter {
  return { open: (file) => openNew(staging, file), finish: (fd, file, digest) => finishFile(fd, file, digest, cache) };
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

/**
 * Fetches chunks in coalesced batches and writes every file not reused; returns bytes fetched.
 * The next batch is fetched while the current one is written, so reads and writes overlap.
 */
async function writeFiles(
  reader: ObjectReader,
  flat: FlatTree,
  staging: string,
  reused: Set<string>,
  cache: StatCacheBuilder,
  options: RestoreOptions,
): Promise<number> {
  const todo = flat.files.filter((f) => !reused.has(f.path));
  const bytesTotal = todo.reduce((n, f) => n + f.size, 0);
  const batches: Array<Array<FileEntry & { path: string }>> = [];
  let current: Array<FileEntry & { path: string }> = [];
  let currentBytes = 0;
  for (const file of todo) {
    if (file.size > FETCH_BATCH_BYTES) continue;
    current.push(file);
    currentBytes += file.size;
    if (currentBytes >= FETCH_BATCH_BYTES) {
      batches.push(current);
      current = [];
      currentBytes = 0;
    }
  }
  if (current.length > 0) batches.push(current);

  let fetched = 0;
  let done = 0;
  let bytesDone = 0;
  const fetch = (batch: Array<FileEntry & { path: string }>) => {
    const job = reader.readMany(batch.flatMap((f) => f.chunks));
    job.catch(() => undefined); // awaited below; this only keeps an early failure from being "unhandled"
    return job;
  };
  let next = batches[0] === undefined ? undefined : fetch(batches[0]);
  for (let i = 0; i < batches.length; i += 1) {
    options.signal?.throwIfAborted();
    const batch = batches[i] as Array<FileEntry & { path: string }>;
    const chunks = await (next as Promise<Map<string, Uint8Array>>);
    next = batches[i + 1] === undefined ? undefined : fetch(batches[i + 1] as Array<FileEntry & { path: string }>);
    for (const c of chunks.values()) fetched += c.byteLength;
    for (const file of batch) {
      writeOne(
        staging,
        file,
        file.chunks.map((id) => chunks.get(id) as Uint8Array),
        cache,
      );
      bytesDone += file.size;
    }
    done += batch.length;
    options.onProgress?.({ files: done, filesTotal: todo.length, bytes: bytesDone, bytesTotal });
  }
  for (const file of todo) {
    if (file.size <= FETCH_BATCH_BYTES) continue;
    options.signal?.throwIfAborted();
    fetched += await writeLarge(reader, staging, file, cache);
  }
  return fetched;
}

function openNew(staging: string, file: FileEntry & { path: string }): number {
  return fs.openSync(path.join(staging, file.path), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
}

function finishFile(fd: number, file: FileEntry & { path: string }, digest: string, cache: StatCacheBuilder): void {
  if (digest !== file.sha256) {
    throw new IntegrityError('INTEGRITY', `restored ${file.path} does not match its recorded hash`, { data: { path: file.path } });
  }
  fs.fchmodSync(fd, permissionBits(file.mode));
  fs.futimesSync(fd, toSeconds(file.mtimeMs), toSeconds(file.mtimeMs));
  const st = fs.fstatSync(fd);
  cache.add(file.path, {
    size: st.size,
    mtimeMs: st.mtimeMs,
    ctimeMs: st.ctimeMs,
    ino: st.ino,
    mode: file.mode,
    sha256: file.sha256,
    chunks: file.chunks,
  });
}

function writeOne(staging: string, file: FileEntry & { path: string }, pieces: Uint8Array[], cache: StatCacheBuilder): void {
  const fd = openNew(staging, file);
  try {
    // A one-chunk file's id is its whole-file hash, and the reader verified it: hashing the same
    // bytes again would check nothing new. Multi-chunk files are hashed whole.
    const single = file.chunks.length === 1 && file.chunks[0] === file.sha256;
    const hash = single ? undefined : createHash('sha256');
    for (const piece of pieces) {
      hash?.update(piece);
      writeAll(fd, piece);
    }
    finishFile(fd, file, hash === undefined ? file.sha256 : hash.digest('hex'), cache);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes every byte of `bytes` (a regular-file write may in principle be short). */
function writeAll(fd: number, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.byteLength; ) at += fs.writeSync(fd, bytes, at, bytes.byteLength - at);
}

/** Writes a file too large for one batch, fetching its chunks a batch at a time. */
async function writeLarge(
  reader: ObjectReader,
  staging: string,
  file: FileEntry & { path: string },
  cache: StatCacheBuilder,
): Promise<number> {
  const fd = openNew(staging, file);
  let fetched = 0;
  try {
    const hash = createHash('sha256');
    const perBatch = Math.max(1, Math.floor(FETCH_BATCH_BYTES / (4 * 1024 * 1024)));
    for (let i = 0; i < file.chunks.length; i += perBatch) {
      const ids = file.chunks.slice(i, i + perBatch);
      const got = await reader.readMany(ids);
      for (const id of ids) {
        const piece = got.get(id) as Uint8Array;
        hash.update(piece);
        writeAll(fd, piece);
        fetched += piece.byteLength;
      }
    }
    finishFile(fd, file, hash.digest('hex'), cache);
  } finally {
    fs.closeSync(fd);
  }
  return fetched;
}

/**
 * Seconds for `utimes` from whole milliseconds. Half a microsecond is added because a double
 * near 1.7e9 s resolves only ~240 ns, and the kernel truncates: without it 12:00:00.678 can
 * land on .677999999 and read back one millisecond early.
 */
function toSeconds(mtimeMs: number): number {
  return (mtimeMs + 0.0005) / 1000;
}
