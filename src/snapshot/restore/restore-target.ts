import fs from 'node:fs';
import path from 'node:path';
import { InputError } from '../../errors.js';
import type { SnapshotDeps } from '../snapshot-deps.js';

/**
 * `p` (absolute) with every symlink of its existing ancestors resolved: the deepest part
 * that exists goes through `realpath`, the rest is appended as written. Two paths that name
 * the same place compare equal this way even before the target exists.
 */
export function realPathOf(p: string): string {
  const missing: string[] = [];
  let at = path.resolve(p);
  for (;;) {
    try {
      return path.join(fs.realpathSync(at), ...missing.reverse());
    } catch {
      const parent = path.dirname(at);
      if (parent === at) return path.join(at, ...missing.reverse());
      missing.push(path.basename(at));
      at = parent;
    }
  }
}

/** True when `a` and `b` are the same path or one lies inside the other. */
function overlaps(a: string, b: string): boolean {
  const inside = (x: string, y: string): boolean => x === y || x.startsWith(y.endsWith(path.sep) ? y : `${y}${path.sep}`);
  return inside(a, b) || inside(b, a);
}

/** The files SQLite keeps beside its database file (write-ahead log, shared memory, rollback journal). */
const SQLITE_SIDE_FILE_SUFFIXES = ['-wal', '-shm', '-journal'] as const;

/**
 * Refuses, with `INVALID_INPUT` (data: `target`, `store`, `storePath`), a restore target that
 * is, contains or lies inside a place Holdfast keeps its own state: the blob store's
 * directory, the SQLite database file and its side files (`-wal`, `-shm`, `-journal`) or the
 * stat-cache directory. Siblings of those places (another directory beside the database file)
 * are allowed. Paths are compared after resolving symlinks, so a link to the store is caught
 * too. Nothing is touched.
 */
export function refuseStoreOverlap(target: string, deps: Pick<SnapshotDeps, 'blobs' | 'meta' | 'cacheDir'>): void {
  const db = deps.meta.localPath;
  const places: Array<[string, string | undefined]> = [
    ['blob store', deps.blobs.localPath],
    ...(db === undefined ? [] : [db, ...SQLITE_SIDE_FILE_SUFFIXES.map((suffix) => `${db}${suffix}`)]).map((file): [string, string] => [
      'metadata store',
      file,
    ]),
    ['stat cache', deps.cacheDir],
  ];
  const real = realPathOf(target);
  for (const [store, at] of places) {
    if (at === undefined) continue;
    const storePath = realPathOf(at);
    if (overlaps(real, storePath)) {
      throw new InputError('INVALID_INPUT', `restore target ${target} overlaps the ${store} at ${storePath}: restore somewhere else`, {
        data: { target, store, storePath },
      });
    }
  }
}
