import { createHash } from 'node:crypto';
import { permissionBits } from '../../core/modes.js';
import { isHoldfastError } from '../../errors.js';
import type { ScannedDir, ScannedFile } from '../../workspace-fs/scan.js';
import { untrueListing } from './file-api-scan.js';
import { FILE_API_READ_BYTES, type FileStat, type SandboxFiles } from './sandbox-files.js';

/** True when `st` is the file a scan recorded as `f` (the checks of a local second look). */
export function sameFile(st: FileStat | undefined, f: ScannedFile): boolean {
  return (
    st !== undefined &&
    st.type === 'file' &&
    st.size === f.size &&
    st.mtimeMs === f.mtimeMs &&
    st.ctimeMs === f.ctimeMs &&
    st.ino === f.ino &&
    permissionBits(st.mode) === permissionBits(f.mode)
  );
}

function sameDir(st: FileStat | undefined, d: ScannedDir): boolean {
  return (
    st !== undefined && st.type === 'dir' && st.mtimeMs === d.exactMtimeMs && st.ctimeMs === d.ctimeMs && permissionBits(st.mode) === d.mode
  );
}

/**
 * One piece of `path`: at most `length` bytes from `offset`. A file API that returns more than
 * it was asked for is lying about the file (`INTEGRITY`), whatever the bytes are.
 */
export async function readPiece(files: SandboxFiles, path: string, offset: number, length: number): Promise<Uint8Array> {
  const piece = await files.read(path, offset, length);
  if (!(piece instanceof Uint8Array)) throw untrueListing(files, `a read of ${path} returned no bytes`);
  if (piece.length > length) throw untrueListing(files, `a read of ${path} returned more bytes than asked for`);
  return piece;
}

/**
 * Reads a whole file the scan saw, in pieces of {@link FILE_API_READ_BYTES}, asking for one
 * byte more than its scanned size; `undefined` when it is not exactly what the scan saw: a
 * length that differs from the scanned size, a read that failed (gone), or an `lstat` after
 * the read that differs (the checkpoint then scans again, and fails with `WORKSPACE_CHANGED`
 * when the workspace keeps moving).
 */
export async function readWholeFile(files: SandboxFiles, f: ScannedFile): Promise<Buffer | undefined> {
  const parts: Uint8Array[] = [];
  let got = 0;
  try {
    for (;;) {
      const want = Math.min(FILE_API_READ_BYTES, f.size + 1 - got);
      const piece = await readPiece(files, f.path, got, want);
      parts.push(piece);
      got += piece.length;
      if (piece.length < want || got > f.size) break;
    }
  } catch (error) {
    // Holdfast's own verdicts stand; a failed read of the provider is a file that moved.
    if (isHoldfastError(error)) throw error;
    return undefined;
  }
  if (got !== f.size || !sameFile(await files.lstat(f.path), f)) return undefined;
  return Buffer.concat(parts);
}

/**
 * Streams a large file in pieces, never more than its scanned size plus one byte; a piece
 * that comes back short, or an `lstat` after the last piece that differs, ends the stream
 * with one byte too many, so the size differs from the scan and the checkpoint scans again.
 */
export async function* readFilePieces(files: SandboxFiles, f: ScannedFile): AsyncGenerator<Uint8Array> {
  let got = 0;
  while (got < f.size) {
    const want = Math.min(FILE_API_READ_BYTES, f.size - got);
    const piece = await readPiece(files, f.path, got, want);
    if (piece.length < want) {
      yield Buffer.alloc(f.size - got + 1);
      return;
    }
    yield piece;
    got += piece.length;
  }
  if (!sameFile(await files.lstat(f.path), f)) yield Buffer.alloc(1);
}

/** The second look: every directory, and each file `wasRead`, stated again and compared with the scan. */
export async function unchangedThroughFiles(files: SandboxFiles, top: ScannedDir, wasRead: (p: string) => boolean): Promise<boolean> {
  const dirs: ScannedDir[] = [top];
  while (dirs.length > 0) {
    const dir = dirs.pop() as ScannedDir;
    if (!sameDir(await files.lstat(dir.path), dir)) return false;
    for (const e of dir.children) {
      if (e.type === 'dir') dirs.push(e);
      else if (e.type === 'file' && wasRead(e.path) && !sameFile(await files.lstat(e.path), e)) return false;
    }
  }
  return true;
}

/** SHA-256 and length of `path` as read back now, in pieces; the read is bounded by `size` plus one byte. */
export async function hashBack(files: SandboxFiles, path: string, size: number): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let got = 0;
  for (;;) {
    const want = Math.min(FILE_API_READ_BYTES, size + 1 - got);
    const piece = await readPiece(files, path, got, want);
    hash.update(piece);
    got += piece.length;
    if (piece.length < want || got > size) break;
  }
  return { sha256: hash.digest('hex'), size: got };
}
