import fs from 'node:fs';
import type { Sha256Hex } from '../../core/hash.js';
import { hasSpecialBits, permissionBits } from '../../core/modes.js';
import { textFromBytes } from '../../core/name-bytes.js';
import type { LongPaths } from '../../workspace-fs/long-paths.js';
import type { StatCache, StatCacheHit } from '../../workspace-fs/stat-cache.js';

/** One regular file of the previous copy at a restore target, as the walk saw it. */
export interface OldFile {
  readonly path: string;
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  /** Exact `mtimeMs` (with its fraction), as the stat cache keys it. */
  readonly mtimeMs: number;
  /** Updated when this restore links the inode (a link changes it), so the inode is still recognised. */
  ctimeMs: number;
  /** Permission bits. */
  readonly mode: number;
  /** Set when the file has setuid, setgid or sticky: it is never linked in, nor taken as matching. */
  readonly special: boolean;
  readonly nlink: number;
  /** Content, when known: from the stat cache (identity matched at the walk) or hashed since. */
  sha256?: Sha256Hex;
  chunks?: readonly Sha256Hex[];
  /** The stat cache's line for this very identity and content, which the next cache can keep as it is. */
  cached?: StatCacheHit;
  /** Where each chunk lies, when the file was cut here (see `learnContent`); else offsets come from the object index. */
  layout?: ReadonlyArray<{ readonly id: Sha256Hex; readonly offset: number; readonly length: number }>;
}

/** A directory of the previous copy (the root is kept apart, in {@link OldCopy.root}). */
export interface OldDir {
  readonly mode: number;
  readonly mtimeMs: number;
  readonly special: boolean;
}

/** What the previous copy at a restore target holds, by workspace path; symlinks were never followed. */
export interface OldCopy {
  /** Absolute path of the target. */
  readonly base: string;
  readonly root: OldDir;
  readonly files: Map<string, OldFile>;
  readonly dirs: Map<string, OldDir>;
  readonly symlinks: Map<string, { readonly target: string; readonly mtimeMs: number }>;
  /** Sockets, FIFOs and devices seen (never reused; any makes the copy differ from a checkpoint). */
  readonly others: number;
  /** False when a directory could not be read or the walk stopped at its entry cap: the copy may hold more. */
  readonly complete: boolean;
}

/** `readdir` of one directory, names as text; re-read as bytes when a name is not valid UTF-8 (U+FFFD). */
function readNames(p: string | Buffer): string[] {
  const names = fs.readdirSync(p);
  if (!names.some((n) => n.includes('\ufffd'))) return names;
  return fs.readdirSync(p, { encoding: 'buffer' }).map((b) => textFromBytes(b));
}

const dirOf = (st: fs.Stats): OldDir => ({
  mode: permissionBits(st.mode),
  mtimeMs: Math.floor(st.mtimeMs),
  special: hasSpecialBits(st.mode),
});

/**
 * Walks the previous copy at `base` (a real directory the caller checked), `lstat`ing every
 * entry and descending only into real directories, so no symlink inside is ever followed.
 * Each file whose stat identity (size, mtime, ctime, inode, mode) matches the stat cache gets
 * the cached content ids; the rest are left unknown (hashed later only if worth it). Stops
 * after `maxEntries` entries (then `complete` is false): the old copy is not bounded by any
 * checkpoint's limits. A directory that cannot be read is skipped the same way.
 */
export function readOldCopy(base: string, cache: StatCache, long: LongPaths, maxEntries: number): OldCopy {
  const now = Date.now();
  const rootStat = fs.lstatSync(long.at(base));
  const copy = {
    base,
    root: dirOf(rootStat),
    files: new Map<string, OldFile>(),
    dirs: new Map<string, OldDir>(),
    symlinks: new Map<string, { target: string; mtimeMs: number }>(),
    others: 0,
    complete: true,
  };
  let entries = 0;
  // An explicit stack: paths may be 32 KiB deep, too deep for recursion.
  const stack: string[] = [''];
  for (let rel = stack.pop(); rel !== undefined; rel = stack.pop()) {
    let names: string[];
    try {
      names = readNames(long.at(rel === '' ? base : `${base}/${rel}`));
    } catch {
      copy.complete = false;
      continue;
    }
    for (const name of names) {
      if (++entries > maxEntries) return { ...copy, complete: false };
      const p = rel === '' ? name : `${rel}/${name}`;
      const abs = long.at(`${base}/${p}`);
      const st = fs.lstatSync(abs, { throwIfNoEntry: false });
      if (st === undefined) copy.complete = false;
      else if (st.isDirectory()) {
        copy.dirs.set(p, dirOf(st));
        stack.push(p);
      } else if (st.isFile()) copy.files.set(p, fileOf(p, st, cache, now));
      else if (st.isSymbolicLink()) {
        const target = textFromBytes(fs.readlinkSync(abs, { encoding: 'buffer' }));
        copy.symlinks.set(p, { target, mtimeMs: Math.floor(st.mtimeMs) });
      } else copy.others += 1;
    }
  }
  return copy;
}

function fileOf(p: string, st: fs.Stats, cache: StatCache, now: number): OldFile {
  const mode = permissionBits(st.mode);
  const file: OldFile = {
    path: p,
    dev: st.dev,
    ino: st.ino,
    size: st.size,
    mtimeMs: st.mtimeMs,
    ctimeMs: st.ctimeMs,
    mode,
    special: hasSpecialBits(st.mode),
    nlink: st.nlink,
  };
  const hit = cache.lookup(p, { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode }, now);
  if (hit !== undefined) {
    file.sha256 = hit.sha256;
    file.chunks = hit.chunks;
    file.cached = hit;
  }
  return file;
}
