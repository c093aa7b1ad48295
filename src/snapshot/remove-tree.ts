import fs from 'node:fs';
import path from 'node:path';
import { LongPaths } from '../core/long-paths.js';
import { textFromBytes } from '../core/name-bytes.js';

/**
 * Removes a tree, read-only directories and paths longer than PATH_MAX included (a restored
 * workspace may hold `0555` directories, whose entries not even their owner may unlink, and
 * paths `fs.rmSync` fails on with `ENAMETOOLONG`): on `EACCES`, `EPERM` or `ENAMETOOLONG` the
 * tree is removed entry by entry, each directory given owner rwx first and deep paths reached
 * through open directories (`core/long-paths.ts`). Symlinks are never followed.
 */
export function removeTree(p: string): void {
  try {
    fs.rmSync(p, { recursive: true, force: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'ENAMETOOLONG') throw error;
    const long = new LongPaths();
    try {
      removeEntry(long, p);
    } finally {
      long.close();
    }
  }
}

function removeEntry(long: LongPaths, abs: string): void {
  const st = fs.lstatSync(long.at(abs), { throwIfNoEntry: false });
  if (st === undefined) return;
  if (!st.isDirectory()) {
    fs.unlinkSync(long.at(abs));
    return;
  }
  if ((st.mode & 0o700) !== 0o700) fs.chmodSync(long.at(abs), 0o700);
  // As bytes: a name that is not UTF-8 would not survive a string read.
  for (const name of fs.readdirSync(long.at(abs), { encoding: 'buffer' })) removeEntry(long, path.join(abs, textFromBytes(name)));
  // A deep directory's descriptor may be held open; removing the directory itself is still allowed.
  fs.rmdirSync(long.at(abs));
}
