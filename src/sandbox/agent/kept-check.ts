import type fs from 'node:fs';
import { IntegrityError } from '../../errors.js';

/**
 * Fails with `INTEGRITY` (data: `path`, `field`) when an entry just written does not hold the
 * permission bits or the whole-millisecond mtime the restore set: a filesystem that cannot keep
 * them (no permissions, coarse or bounded timestamps) must not yield a restore that claims it
 * was verified. `mtimeMs` undefined skips the time (the staging root, whose time publish sets).
 */
export function expectKept(st: fs.Stats, relPath: string, mode: number | undefined, mtimeMs: number | undefined): void {
  if (mode !== undefined && (st.mode & 0o7777) !== mode) throw notKept(relPath, 'mode', mode.toString(8), (st.mode & 0o7777).toString(8));
  if (mtimeMs !== undefined && Math.floor(st.mtimeMs) !== Math.floor(mtimeMs)) {
    throw notKept(relPath, 'mtime', String(Math.floor(mtimeMs)), String(Math.floor(st.mtimeMs)));
  }
}

function notKept(relPath: string, field: 'mode' | 'mtime', wanted: string, got: string): IntegrityError {
  return new IntegrityError(
    'INTEGRITY',
    `[agent] ${relPath || '/'} did not keep its ${field} (set ${wanted}, reads back ${got}): the sandbox filesystem cannot hold this checkpoint exactly`,
    { data: { path: relPath, field } },
  );
}
