import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { checkKept, utimeOf } from '../core/fs-exact.js';
import { permissionBits } from '../core/modes.js';
import type { FileEntry } from '../core/tree.js';
import { IntegrityError } from '../errors.js';
import type { ObjectReader } from '../objects/object-reader.js';
import type { RestoreOptions } from './restore.js';
import type { StatCacheBuilder } from './stat-cache.js';

/** Chunk bytes fetched per batch of files. */
const FETCH_BATCH_BYTES = 64 * 1024 * 1024;
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

/** A file of a flattened tree, with its path. */
export type PathedFile = FileEntry & { readonly path: string };

/** Where a restore writes: the `fs` path (string or bytes, any length) of a workspace path in the staging tree. */
export type StagedPath = (rel: string) => string | Buffer;

/**
 * Fetches chunks in coalesced batches and writes `files` (none exists yet); returns bytes
 * fetched. The next batch is fetched while the current one is written, so reads and writes
 * overlap. Every file's hash, mode and mtime are checked once written.
 */
export async function writeFiles(
  reader: ObjectReader,
  files: readonly PathedFile[],
  at: StagedPath,
  cache: StatCacheBuilder,
  options: Pick<RestoreOptions, 'signal' | 'onProgress'>,
): Promise<number> {
  const bytesTotal = files.reduce((n, f) => n + f.size, 0);
  const batches: PathedFile[][] = [];
  let current: PathedFile[] = [];
  let currentBytes = 0;
  for (const file of files) {
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
  const fetch = (batch: readonly PathedFile[]) => {
    const job = reader.readMany(batch.flatMap((f) => f.chunks));
    job.catch(() => undefined); // awaited below; this only keeps an early failure from being "unhandled"
    return job;
  };
  let next = batches[0] === undefined ? undefined : fetch(batches[0]);
  for (let i = 0; i < batches.length; i += 1) {
    options.signal?.throwIfAborted();
    const batch = batches[i] as PathedFile[];
    const chunks = await (next as Promise<Map<string, Uint8Array>>);
    next = batches[i + 1] === undefined ? undefined : fetch(batches[i + 1] as PathedFile[]);
    for (const c of chunks.values()) fetched += c.byteLength;
    for (const file of batch) {
      writeOne(
        at,
        file,
        file.chunks.map((id) => chunks.get(id) as Uint8Array),
        cache,
      );
      bytesDone += file.size;
    }
    done += batch.length;
    options.onProgress?.({ files: done, filesTotal: files.length, bytes: bytesDone, bytesTotal });
  }
  for (const file of files) {
    if (file.size <= FETCH_BATCH_BYTES) continue;
    options.signal?.throwIfAborted();
    fetched += await writeLarge(reader, at, file, cache);
  }
  return fetched;
}

/** Creates a restored file in staging: exclusive, never through a symlink, owner-only until finished. */
export function openNew(at: StagedPath, file: PathedFile): number {
  return fs.openSync(at(file.path), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
}

/** Completes a restored file: checks its hash (`INTEGRITY`), applies and checks mode and mtime, records it in the new stat cache. */
export function finishFile(fd: number, file: PathedFile, digest: string, cache: StatCacheBuilder): void {
  if (digest !== file.sha256) {
    throw new IntegrityError('INTEGRITY', `restored ${file.path} does not match its recorded hash`, { data: { path: file.path } });
  }
  fs.fchmodSync(fd, permissionBits(file.mode));
  const time = utimeOf(file.mtimeMs);
  fs.futimesSync(fd, time, time);
  const st = fs.fstatSync(fd);
  checkKept(file.path, st, file.mode, file.mtimeMs);
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

function writeOne(at: StagedPath, file: PathedFile, pieces: Uint8Array[], cache: StatCacheBuilder): void {
  const fd = openNew(at, file);
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
export function writeAll(fd: number, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.byteLength; ) at += fs.writeSync(fd, bytes, at, bytes.byteLength - at);
}

/** Writes a file too large for one batch, fetching its chunks a batch at a time. */
async function writeLarge(reader: ObjectReader, at: StagedPath, file: PathedFile, cache: StatCacheBuilder): Promise<number> {
  const fd = openNew(at, file);
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
