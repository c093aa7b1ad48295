import fs from 'node:fs';
import path from 'node:path';
import { textFromBytes } from '../core/name-bytes.js';
import { LongPaths } from './long-paths.js';

/**
 * Removes a tree, read-only directories included (a restored workspace may hold `0555`
 * directories, whose entries not even their owner may unlink), paths longer than one system
 * call takes and names that are not UTF-8 too. The fast path is `fs.rmSync`; when it fails
 * (`EACCES`/`EPERM`, or `ENAMETOOLONG` on a deep tree) the tree is walked through
 * {@link LongPaths}, every directory given owner rwx before it is read. Symlinks are never
 * followed. A missing `p` is no error.
 */
export function removeTree(p: string): void {
  try {
    fs.rmSync(p, { recursive: true, force: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'ENAMETOOLONG') throw error;
    const long = new LongPaths();
    try {
      removeWalk(long, path.resolve(p));
    } finally {
      long.close();
    }
  }
}

/** Removes `abs` and everything under it, depth first, one entry at a time. */
function removeWalk(long: LongPaths, abs: string): void {
  const st = fs.lstatSync(long.at(abs), { throwIfNoEntry: false });
  if (st === undefined) return;
  if (!st.isDirectory()) {
    fs.unlinkSync(long.at(abs));
    return;
  }
  fs.chmodSync(long.at(abs), 0o700);
  for (const name of fs.readdirSync(long.at(abs), { encoding: 'buffer' })) removeWalk(long, path.join(abs, textFromBytes(name)));
  fs.rmdirSync(long.at(abs));
}
