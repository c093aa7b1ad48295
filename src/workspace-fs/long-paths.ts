import fs from 'node:fs';
import { byteLength, fsPath } from '../core/name-bytes.js';

/**
 * Longest path handed to one system call. The kernel refuses paths of PATH_MAX (4,096) bytes
 * or more with `ENAMETOOLONG`; a margin keeps room for the `/proc/self/fd/<fd>/` prefix.
 */
export const SYSCALL_PATH_BYTES = 4000;
/** Directory descriptors kept open at once; deep paths are rare, and siblings share them. */
const MAX_OPEN_DIRS = 64;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
/** Room taken by `/proc/self/fd/<fd>/` in front of a piece of a path. */
const FD_PREFIX_BYTES = '/proc/self/fd/2147483647/'.length;

/**
 * Reaches paths of any length, the way `openat(2)` would: a path longer than
 * {@link SYSCALL_PATH_BYTES} is cut at fixed points into pieces that fit, each directory at a
 * cut is opened (`O_DIRECTORY | O_NOFOLLOW`) relative to the previous one, and the path handed
 * to `fs` is `/proc/self/fd/<fd>/<last piece>`. Node has no `*at` calls; the kernel resolves
 * the magic link of an open directory exactly like a directory descriptor. Short paths (all
 * but a few) pass through untouched, as {@link fsPath} gives them.
 *
 * Cuts depend only on the path, so the files of one deep directory share its descriptors.
 * Opened directories stay open until evicted or {@link close}: a directory renamed meanwhile
 * is still reached through its descriptor, which is what a walk of a tree it is building (or
 * reading) wants. Needs `/proc` (Linux; every provider Holdfast has mounts it); without it a
 * long path fails with `ENOENT`, as one entry, not the whole walk.
 */
export class LongPaths {
  private readonly dirs = new Map<string, number>();

  /** A path for one `fs` call that names `abs` (absolute, may hold byte escapes). */
  at(abs: string): string | Buffer {
    if (byteLength(abs) <= SYSCALL_PATH_BYTES) return fsPath(abs);
    let via: string | undefined; // `/proc/self/fd/N` of the last directory opened
    let from = 0; // where the rest of `abs` begins
    for (;;) {
      const rest = abs.slice(from);
      const budget = via === undefined ? SYSCALL_PATH_BYTES : SYSCALL_PATH_BYTES - FD_PREFIX_BYTES;
      if (byteLength(rest) <= budget) return fsPath(via === undefined ? rest : `${via}/${rest}`);
      const cut = from + lastCut(rest, budget);
      via = `/proc/self/fd/${this.open(abs.slice(0, cut), via === undefined ? abs.slice(0, cut) : `${via}/${abs.slice(from, cut)}`)}`;
      from = cut + 1;
    }
  }

  /** Closes every directory descriptor held. The object stays usable. */
  close(): void {
    for (const fd of this.dirs.values()) fs.closeSync(fd);
    this.dirs.clear();
  }

  private open(key: string, reach: string): number {
    const held = this.dirs.get(key);
    if (held !== undefined) {
      // Refresh its place: the map's order is least recently used first.
      this.dirs.delete(key);
      this.dirs.set(key, held);
      return held;
    }
    const fd = fs.openSync(fsPath(reach), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    this.dirs.set(key, fd);
    if (this.dirs.size > MAX_OPEN_DIRS) {
      const [oldKey, oldFd] = this.dirs.entries().next().value as [string, number];
      // Never the one just opened: the map holds more than one entry here.
      this.dirs.delete(oldKey);
      fs.closeSync(oldFd);
    }
    return fd;
  }
}

/** Index in `text` of the last `/` whose prefix fits in `budget` bytes (a name is at most 255 bytes, so one exists). */
function lastCut(text: string, budget: number): number {
  let best = -1;
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c === 0x2f) {
      if (bytes > budget) break;
      if (i > 0) best = i;
    }
    bytes += byteLength(text[i] as string);
  }
  if (best <= 0) throw new Error(`no directory boundary within ${budget} bytes`);
  return best;
}
