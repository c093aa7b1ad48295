import type { FileEntry } from '../../core/tree.js';
import type { StatCacheBuilder, StatCacheEntry, StatCacheHit } from '../../workspace-fs/stat-cache.js';
import type { FlatTree } from '../tree-walk.js';
import type { OldCopy, OldFile } from './old-copy.js';
import { learnContent, type OldFiles } from './old-files.js';

/** What the root directory must look like: its permission bits, and its mtime when the checkpoint records one. */
export interface RootExpectation {
  readonly mode: number;
  readonly mtimeMs?: number;
}

/**
 * True when the previous copy at the target already is exactly the checkpoint `flat`: the
 * same directories, files and symlinks and nothing else (no extra entry, no socket or FIFO,
 * a complete walk), every mode and whole-millisecond mtime equal, every symlink target equal,
 * no setuid/setgid/sticky bit, every file's content equal, and the same hard links: a
 * member's inode is its leader's and no file has a link the checkpoint does not record
 * (`nlink`). Content comes from the stat cache where the walk's identity matched it; every
 * other file is opened (no symlink followed, still the walked inode) and hashed.
 *
 * Then a restore has nothing to do: the target is left untouched, so it trivially stays what
 * it was on failure and is exactly the checkpoint on success. When true, every file has been
 * added to `cache` with its current identity.
 */
export function targetMatches(flat: FlatTree, old: OldCopy, oldFiles: OldFiles, root: RootExpectation, cache: StatCacheBuilder): boolean {
  if (!old.complete || old.others > 0) return false;
  if (old.dirs.size !== flat.dirs.length - 1 || old.files.size !== flat.files.length || old.symlinks.size !== flat.symlinks.length)
    return false;
  if (old.root.special || old.root.mode !== root.mode || (root.mtimeMs !== undefined && old.root.mtimeMs !== root.mtimeMs)) return false;
  for (const dir of flat.dirs) {
    if (dir.path === '') continue;
    const o = old.dirs.get(dir.path);
    if (o === undefined || o.special || o.mode !== dir.mode || o.mtimeMs !== dir.mtimeMs) return false;
  }
  for (const link of flat.symlinks) {
    const o = old.symlinks.get(link.path);
    if (o === undefined || o.target !== link.target || o.mtimeMs !== link.mtimeMs) return false;
  }
  const links = new Map<string, number>();
  for (const file of flat.files) if (file.hardlink !== undefined) links.set(file.hardlink, (links.get(file.hardlink) ?? 1) + 1);
  const entries: Array<[string, StatCacheEntry | StatCacheHit]> = [];
  for (const file of flat.files) {
    const o = old.files.get(file.path);
    if (o === undefined || !sameFile(o, file)) return false;
    if (file.hardlink !== undefined) {
      const leader = old.files.get(file.hardlink);
      if (leader === undefined || leader.dev !== o.dev || leader.ino !== o.ino) return false;
    } else if (o.nlink !== (links.get(file.path) ?? 1) || !sameContent(o, file, oldFiles)) return false;
    // A cache hit's line already says exactly this; anything hashed here gets a line of its own.
    entries.push([file.path, o.cached ?? { ...o, sha256: file.sha256, chunks: file.chunks }]);
  }
  for (const [p, entry] of entries) cache.add(p, entry);
  return true;
}

function sameFile(o: OldFile, file: FileEntry): boolean {
  return !o.special && o.mode === file.mode && o.size === file.size && Math.floor(o.mtimeMs) === file.mtimeMs;
}

/** True when `o` holds `file`'s bytes: known from the stat cache, or hashed now (and remembered in `o`). */
export function sameContent(o: OldFile, file: FileEntry, oldFiles: OldFiles): boolean {
  if (o.sha256 === undefined && !learnContent(o, oldFiles)) return false;
  return o.sha256 === file.sha256;
}
