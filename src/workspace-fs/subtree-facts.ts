import type { ScannedDir } from './scan.js';

/** What a scanned directory's subtree holds, below the directory itself. */
export interface SubtreeFacts {
  readonly files: number;
  /** Directories under it (itself not counted). */
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** Newest mtime of a file under it (-Infinity when none): whether any may be racy against a scan. */
  readonly newestFileMtimeMs: number;
  /** Whether a file under it has other hard links (`dev` set). */
  readonly linked: boolean;
}

const memo = new WeakMap<ScannedDir, SubtreeFacts>();

/**
 * The {@link SubtreeFacts} of `dir`, worked out once per directory object and remembered: a
 * scan taken over from an earlier one (an agent's delta) holds the very objects of that scan,
 * so what is unchanged costs nothing again. Scanned directories are never changed once a scan
 * (or the host's check of one) is done with them; call this only then.
 */
export function subtreeFacts(dir: ScannedDir): SubtreeFacts {
  const known = memo.get(dir);
  if (known !== undefined) return known;
  let files = 0;
  let dirs = 0;
  let symlinks = 0;
  let bytes = 0;
  let newestFileMtimeMs = Number.NEGATIVE_INFINITY;
  let linked = false;
  for (const child of dir.children) {
    if (child.type === 'dir') {
      const sub = subtreeFacts(child);
      dirs += 1 + sub.dirs;
      files += sub.files;
      symlinks += sub.symlinks;
      bytes += sub.bytes;
      newestFileMtimeMs = Math.max(newestFileMtimeMs, sub.newestFileMtimeMs);
      linked ||= sub.linked;
    } else if (child.type === 'file') {
      files += 1;
      bytes += child.size;
      newestFileMtimeMs = Math.max(newestFileMtimeMs, child.mtimeMs);
      linked ||= child.dev !== undefined;
    } else symlinks += 1;
  }
  const facts = { files, dirs, symlinks, bytes, newestFileMtimeMs, linked };
  memo.set(dir, facts);
  return facts;
}
