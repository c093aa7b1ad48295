import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { permissionBits } from '../../core/modes.js';
import type { FileEntry } from '../../core/tree.js';
import { IntegrityError } from '../../errors.js';
import { checkKept, utimeOf } from '../../workspace-fs/fs-exact.js';
import type { StatCacheBuilder } from '../../workspace-fs/stat-cache.js';

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

/** A file of a flattened tree, with its path. */
export type PathedFile = FileEntry & { readonly path: string };

/** Where a restore writes: the `fs` path (string or bytes, any length) of a workspace path in the staging tree. */
export type StagedPath = (rel: string) => string | Buffer;

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

/**
 * Creates `file` in staging from its verified chunk bytes (an array, written at once, or an
 * iterable of a large file's chunks in order) and completes it with {@link finishFile}.
 */
export async function writeFile(
  at: StagedPath,
  file: PathedFile,
  content: readonly Uint8Array[] | AsyncIterable<Uint8Array>,
  cache: StatCacheBuilder,
): Promise<void> {
  const fd = openNew(at, file);
  try {
    // A one-chunk file's id is its whole-file hash, and the reader verified it: hashing the same
    // bytes again would check nothing new. Multi-chunk files are hashed whole.
    const single = file.chunks.length === 1 && file.chunks[0] === file.sha256;
    const hash = single ? undefined : createHash('sha256');
    if (Array.isArray(content)) {
      for (const piece of content as readonly Uint8Array[]) {
        hash?.update(piece);
        writeAll(fd, piece);
      }
    } else {
      for await (const piece of content as AsyncIterable<Uint8Array>) {
        hash?.update(piece);
        writeAll(fd, piece);
      }
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
