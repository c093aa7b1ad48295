import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { hasSpecialBits, permissionBits } from '../core/modes.js';
import type { StatCache, StatCacheBuilder } from './stat-cache.js';
import type { FlatTree } from './tree-walk.js';

const { O_RDONLY, O_NOFOLLOW } = fs.constants;
const HASH_BLOCK_BYTES = 4 * 1024 * 1024;

/**
 * Decides, once per directory, whether a path inside the old target leads only through real
 * directories: every parent segment is `lstat`ed and a symlink (or anything else) there ends
 * the walk. The old target's own path was checked by the caller.
 */
class RealDirs {
  private readonly known = new Map<string, boolean>([['', true]]);

  constructor(private readonly base: string) {}

  /** True when every parent of `rel` is a real directory under the base. */
  parentsAreDirs(rel: string): boolean {
    const cut = rel.lastIndexOf('/');
    return cut < 0 || this.isDir(rel.slice(0, cut));
  }

  private isDir(rel: string): boolean {
    const seen = this.known.get(rel);
    if (seen !== undefined) return seen;
    const cut = rel.lastIndexOf('/');
    const ok =
      (cut < 0 || this.isDir(rel.slice(0, cut))) &&
      fs.lstatSync(path.join(this.base, rel), { throwIfNoEntry: false })?.isDirectory() === true;
    this.known.set(rel, ok);
    return ok;
  }
}

function hashFd(fd: number): string {
  const hash = createHash('sha256');
  const block = Buffer.allocUnsafe(HASH_BLOCK_BYTES);
  for (let at = 0; ; ) {
    const n = fs.readSync(fd, block, 0, HASH_BLOCK_BYTES, at);
    if (n === 0) return hash.digest('hex');
    hash.update(block.subarray(0, n));
    at += n;
  }
}

/**
 * Hard-links files of the previous copy at `target` whose content, mode and mtime already
 * match the checkpoint, so a warm restore fetches and writes only what differs. Links never
 * change the old inode, so a failed restore leaves the target exactly as it was.
 *
 * No symlink inside the old target is ever followed: a file is considered only when every
 * directory on its way is a real directory (`lstat`), it is opened with `O_NOFOLLOW`, and the
 * new link must name the very inode that was opened and checked. So a symlinked directory
 * pointing outside (`d -> /elsewhere`) can never put an outside inode into the workspace.
 */
export function reuseUnchanged(flat: FlatTree, target: string, staging: string, old: StatCache, cache: StatCacheBuilder): Set<string> {
  const reused = new Set<string>();
  const dirs = new RealDirs(target);
  for (const file of flat.files) {
    if (!dirs.parentsAreDirs(file.path)) continue;
    const from = path.join(target, file.path);
    let fd: number;
    try {
      fd = fs.openSync(from, O_RDONLY | O_NOFOLLOW);
    } catch {
      continue;
    }
    try {
      const st = fs.fstatSync(fd);
      const mode = permissionBits(st.mode);
      // A setuid, setgid or sticky file is never linked in: the new inode would keep the bits.
      if (!st.isFile() || hasSpecialBits(st.mode) || mode !== file.mode) continue;
      if (st.size !== file.size || Math.floor(st.mtimeMs) !== file.mtimeMs) continue;
      const identity = { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode };
      const sha = old.lookup(file.path, identity, Date.now())?.sha256 ?? hashFd(fd);
      if (sha !== file.sha256) continue;
      const to = path.join(staging, file.path);
      fs.linkSync(from, to);
      const linked = fs.lstatSync(to);
      if (linked.ino !== st.ino || linked.dev !== st.dev) {
        // The path was swapped between the check and the link: drop the link, write the file afresh.
        fs.unlinkSync(to);
        continue;
      }
      reused.add(file.path);
      cache.add(file.path, { ...identity, sha256: file.sha256, chunks: file.chunks });
    } finally {
      fs.closeSync(fd);
    }
  }
  return reused;
}
