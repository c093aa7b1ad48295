import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InputError } from '../errors.js';
import { removeTree } from '../workspace-fs/remove-tree.js';

/**
 * The mtime every entry of a bundle is captured with (2000-01-01T00:00:00Z): a bundle is
 * content, so the same files are the same tree whenever and wherever they were written (and
 * whatever a tar upload claims), and the deployment id follows the content alone.
 */
export const BUNDLE_MTIME_MS = Date.UTC(2000, 0, 1);
/** Entries a bundle may hold (files, directories and symlinks). */
export const MAX_BUNDLE_ENTRIES = 100_000;
/** Permission bits a bundle keeps: no setuid, setgid or sticky bit ever reaches a sandbox. */
const MODE_BITS = 0o777;

/** Runs `fn` with a fresh private temp directory, removed afterwards whatever happens. */
export async function withStagingDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'holdfast-bundle-'));
  try {
    return await fn(dir);
  } finally {
    removeTree(dir);
  }
}

/**
 * Copies directory `src` to `dest` (which must not exist) as a bundle is captured: regular
 * files, directories and symlinks (as links, never followed) with their permission bits, every
 * mtime set to {@link BUNDLE_MTIME_MS}. Anything else (a socket, a FIFO, a device), a name
 * that is not UTF-8, or more than {@link MAX_BUNDLE_ENTRIES} entries is `INVALID_INPUT` /
 * `LIMIT_EXCEEDED` with the path, before anything is stored.
 */
export function copyBundleDir(src: string, dest: string): void {
  const counter = { entries: 0 };
  fs.mkdirSync(dest, { mode: 0o700 });
  copyChildren(src, dest, '', counter);
  finishDir(dest, fs.statSync(src).mode);
}

function copyChildren(src: string, dest: string, rel: string, counter: { entries: number }): void {
  for (const raw of fs.readdirSync(src, { encoding: 'buffer' })) {
    const name = raw.toString('utf8');
    const relPath = rel === '' ? name : `${rel}/${name}`;
    if (!Buffer.from(name, 'utf8').equals(raw)) throw refuse('INVALID_INPUT', relPath, 'invalid-path', 'not UTF-8');
    counter.entries += 1;
    if (counter.entries > MAX_BUNDLE_ENTRIES) throw refuse('LIMIT_EXCEEDED', relPath, 'entry-limit', `${MAX_BUNDLE_ENTRIES} entries`);
    const from = path.join(src, name);
    const to = path.join(dest, name);
    const st = fs.lstatSync(from);
    if (st.isDirectory()) {
      fs.mkdirSync(to, { mode: 0o700 });
      copyChildren(from, to, relPath, counter);
      finishDir(to, st.mode);
    } else if (st.isFile()) {
      fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL);
      fs.chmodSync(to, st.mode & MODE_BITS);
      fs.utimesSync(to, BUNDLE_MTIME_MS / 1000, BUNDLE_MTIME_MS / 1000);
    } else if (st.isSymbolicLink()) {
      fs.symlinkSync(fs.readlinkSync(from), to);
      fs.lutimesSync(to, BUNDLE_MTIME_MS / 1000, BUNDLE_MTIME_MS / 1000);
    } else {
      throw refuse('INVALID_INPUT', relPath, 'special-file', 'not a regular file, directory or symlink');
    }
  }
}

/** Gives a filled directory its final permission bits and the bundle mtime (after its children changed it). */
export function finishDir(dir: string, mode: number): void {
  fs.chmodSync(dir, mode & MODE_BITS);
  fs.utimesSync(dir, BUNDLE_MTIME_MS / 1000, BUNDLE_MTIME_MS / 1000);
}

/** A refused bundle entry: `data` names the path, the reason (an exclusion reason) and the rule. */
export function refuse(code: 'INVALID_INPUT' | 'LIMIT_EXCEEDED', relPath: string, reason: string, rule: string): InputError {
  return new InputError(code, `bundle entry ${JSON.stringify(relPath)} refused (${reason}: ${rule}); a bundle keeps every entry or none`, {
    data: { path: relPath, reason, rule },
  });
}
