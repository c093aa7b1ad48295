import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { CDC_MAX_BYTES, nextChunkLength } from '../../core/fastcdc.js';
import type { Sha256Hex } from '../../core/hash.js';
import { SINGLE_CHUNK_BYTES } from '../../objects/content-workers.js';
import type { LongPaths } from '../../workspace-fs/long-paths.js';
import type { OldFile } from './old-copy.js';

const { O_RDONLY, O_NOFOLLOW } = fs.constants;
const READ_BLOCK_BYTES = 4 * 1024 * 1024;

/**
 * Opens files of the previous copy at a restore target for reading, never through a symlink:
 * every parent directory on the way must be a real directory (`lstat`, decided once per
 * directory), the file is opened with `O_NOFOLLOW`, and the descriptor must name the very
 * inode, with the same size, mtime and ctime, that the walk recorded. So content known for a
 * walked file (from the stat cache) still holds for what is opened, and a path swapped for a
 * link to somewhere outside since the walk is refused.
 */
export class OldFiles {
  private readonly known = new Map<string, boolean>([['', true]]);

  constructor(
    private readonly base: string,
    private readonly long: LongPaths,
  ) {}

  /** The absolute path of `rel` inside the old copy, for one `fs` call. */
  at(rel: string): string | Buffer {
    return this.long.at(`${this.base}/${rel}`);
  }

  /** A read-only descriptor of `file`, or undefined when it is no longer what the walk saw. The caller closes it. */
  open(file: OldFile): number | undefined {
    const cut = file.path.lastIndexOf('/');
    if (cut >= 0 && !this.isDir(file.path.slice(0, cut))) return undefined;
    let fd: number;
    try {
      fd = fs.openSync(this.at(file.path), O_RDONLY | O_NOFOLLOW);
    } catch {
      return undefined;
    }
    const st = fs.fstatSync(fd);
    if (
      st.isFile() &&
      st.dev === file.dev &&
      st.ino === file.ino &&
      st.size === file.size &&
      st.mtimeMs === file.mtimeMs &&
      st.ctimeMs === file.ctimeMs
    )
      return fd;
    fs.closeSync(fd);
    return undefined;
  }

  private isDir(rel: string): boolean {
    const seen = this.known.get(rel);
    if (seen !== undefined) return seen;
    const cut = rel.lastIndexOf('/');
    const ok = (cut < 0 || this.isDir(rel.slice(0, cut))) && fs.lstatSync(this.at(rel), { throwIfNoEntry: false })?.isDirectory() === true;
    this.known.set(rel, ok);
    return ok;
  }
}

/** Reads exactly `length` bytes at `offset`; undefined when the file is shorter. */
export function readAt(fd: number, offset: number, length: number): Buffer | undefined {
  const out = Buffer.allocUnsafe(length);
  for (let got = 0; got < length; ) {
    const n = fs.readSync(fd, out, got, length - got, offset + got);
    if (n === 0) return undefined;
    got += n;
  }
  return out;
}

/** The bytes of chunk `id` read at `offset`, only when their SHA-256 is `id`. */
export function readChunk(fd: number, id: Sha256Hex, offset: number, length: number): Buffer | undefined {
  const bytes = readAt(fd, offset, length);
  return bytes !== undefined && createHash('sha256').update(bytes).digest('hex') === id ? bytes : undefined;
}

/** A file's chunks as a checkpoint would cut them, with where each lies. */
export interface ChunkedContent {
  readonly sha256: Sha256Hex;
  readonly chunks: ReadonlyArray<{ readonly id: Sha256Hex; readonly offset: number; readonly length: number }>;
}

/**
 * Reads an open file once, hashing it whole and cutting it into FastCDC chunks exactly as a
 * checkpoint does (`nextChunkLength` over the whole file, at most two maximum chunks held).
 * With `cut` false only the whole-file hash is computed.
 */
export function hashOpenFile(fd: number, cut: boolean): ChunkedContent {
  const whole = createHash('sha256');
  const chunks: Array<{ id: Sha256Hex; offset: number; length: number }> = [];
  let pending = Buffer.alloc(0);
  let offset = 0;
  let readPos = 0;
  let eof = false;
  const block = Buffer.allocUnsafe(READ_BLOCK_BYTES);
  while (!eof || pending.length > 0) {
    while (!eof && (!cut || pending.length < CDC_MAX_BYTES)) {
      const n = fs.readSync(fd, block, 0, READ_BLOCK_BYTES, readPos);
      readPos += n;
      if (n === 0) eof = true;
      else if (!cut) whole.update(block.subarray(0, n));
      else pending = Buffer.concat([pending, block.subarray(0, n)]);
    }
    if (pending.length === 0) break;
    const n = nextChunkLength(pending, 0, pending.length);
    const piece = pending.subarray(0, n);
    whole.update(piece);
    chunks.push({ id: createHash('sha256').update(piece).digest('hex'), offset, length: n });
    offset += n;
    pending = pending.subarray(n);
  }
  return { sha256: whole.digest('hex'), chunks };
}

/**
 * Hashes an old file of unknown content and records it in `o`: its SHA-256, its chunk ids as a
 * checkpoint would cut them, and (for a file large enough to be cut) where each chunk lies.
 * False when the file is no longer what the walk saw (then `o` stays unknown).
 */
export function learnContent(o: OldFile, oldFiles: OldFiles): boolean {
  const fd = oldFiles.open(o);
  if (fd === undefined) return false;
  try {
    // Below SINGLE_CHUNK_BYTES a checkpoint stores a file as one chunk whose id is its hash.
    const cut = o.size >= SINGLE_CHUNK_BYTES;
    const content = hashOpenFile(fd, cut);
    o.sha256 = content.sha256;
    o.chunks = cut ? content.chunks.map((c) => c.id) : o.size === 0 ? [] : [content.sha256];
    if (cut) o.layout = content.chunks;
  } finally {
    fs.closeSync(fd);
  }
  return true;
}
