import fs from 'node:fs';
import path from 'node:path';
import type { DirectoryRules, ExcludeRules, Exclusion } from '../core/excludes.js';
import { permissionBits } from '../core/modes.js';
import { nameProblem } from '../core/paths.js';
import { InputError } from '../errors.js';
import { type ScanLimits, ScanTally } from './scan-limits.js';

export {
  DEFAULT_MAX_DIRS,
  DEFAULT_MAX_ENTRIES,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_MAX_TOTAL_BYTES,
  type ScanLimits,
} from './scan-limits.js';

/** A regular file as seen by `lstat`. */
export interface ScannedFile {
  readonly type: 'file';
  readonly name: string;
  readonly path: string;
  readonly mode: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
}

/** A symbolic link whose target stays inside the root. */
export interface ScannedSymlink {
  readonly type: 'symlink';
  readonly name: string;
  readonly path: string;
  readonly target: string;
  readonly mtimeMs: number;
}

/** A directory and what it holds. */
export interface ScannedDir {
  readonly type: 'dir';
  readonly name: string;
  readonly path: string;
  readonly mode: number;
  readonly mtimeMs: number;
  /** Exact (fractional) mtime and ctime, to notice entries added, removed or renamed later. */
  readonly exactMtimeMs: number;
  readonly ctimeMs: number;
  readonly children: ScannedEntry[];
}

export type ScannedEntry = ScannedFile | ScannedSymlink | ScannedDir;

/** The result of walking a workspace once. */
export interface ScanResult {
  readonly root: ScannedDir;
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** Everything left out, each with its reason. */
  readonly excluded: Exclusion[];
  /** Wall-clock time when the walk began (for the racy-file rule). */
  readonly startedAtMs: number;
}

/**
 * Walks `root` synchronously (`readdirSync` + `lstatSync` is several times faster than the
 * promise API for many small entries), never following symlinks, applying exclusion rules.
 * Directories a walk cannot read fail the scan rather than silently dropping content.
 * Modes keep their permission bits only: an entry with setuid, setgid or sticky is kept
 * without them and reported in `excluded` with reason `mode-stripped` (its content is not
 * left out; the report is the one place a checkpoint says what it changed).
 */
export function scanWorkspace(root: string, rules: ExcludeRules, limits: ScanLimits): ScanResult {
  const startedAtMs = Date.now();
  const tally = new ScanTally(limits, root, path.resolve(root));
  const rootStat = fs.statSync(root);
  if (!rootStat.isDirectory()) throw new InputError('INVALID_INPUT', `${root} is not a directory`, { data: { path: root } });

  const walk = (abs: string, rel: string, dirRules: DirectoryRules, children: ScannedEntry[]): void => {
    // Any stable order will do: tree encoding sorts entries by name bytes itself.
    const names = fs.readdirSync(abs).sort();
    for (const name of names) {
      const relPath = rel === '' ? name : `${rel}/${name}`;
      const problem = nameProblem(name);
      if (problem !== undefined) {
        tally.invalidName(relPath, problem);
        continue;
      }
      const absPath = path.join(abs, name);
      const st = fs.lstatSync(absPath);
      const isDir = st.isDirectory();
      const rule = dirRules.match(name, isDir);
      if (rule !== undefined) {
        tally.excluded.push(rule);
        continue;
      }
      if (isDir) {
        tally.addDir();
        const dir: ScannedDir = dirEntry(name, relPath, st, tally.mode(relPath, st.mode));
        walk(absPath, relPath, rules.enter(relPath, readGitignore(rules, absPath)), dir.children);
        children.push(dir);
      } else if (st.isFile()) {
        if (!tally.addFile(relPath, st.size)) continue;
        children.push({
          type: 'file',
          name,
          path: relPath,
          mode: tally.mode(relPath, st.mode),
          size: st.size,
          mtimeMs: st.mtimeMs,
          ctimeMs: st.ctimeMs,
          ino: st.ino,
        });
      } else if (st.isSymbolicLink()) {
        const target = tally.addSymlink(relPath, fs.readlinkSync(absPath));
        if (target !== undefined) children.push({ type: 'symlink', name, path: relPath, target, mtimeMs: Math.floor(st.mtimeMs) });
      } else {
        tally.excluded.push({ path: relPath, reason: 'special-file', rule: 'socket, FIFO or device' });
      }
    }
  };

  const top = dirEntry('', '', rootStat, permissionBits(rootStat.mode));
  walk(root, '', rules.enter('', readGitignore(rules, root)), top.children);
  return { root: top, ...tally.counts, excluded: tally.excluded, startedAtMs };
}

function readGitignore(rules: ExcludeRules, absDir: string): string | undefined {
  if (!rules.readsGitignore) return undefined;
  try {
    return fs.readFileSync(path.join(absDir, '.gitignore'), 'utf8');
  } catch {
    return undefined;
  }
}

function dirEntry(name: string, relPath: string, st: fs.Stats, mode: number): ScannedDir {
  return {
    type: 'dir',
    name,
    path: relPath,
    mode,
    mtimeMs: Math.floor(st.mtimeMs),
    exactMtimeMs: st.mtimeMs,
    ctimeMs: st.ctimeMs,
    children: [],
  };
}

/**
 * The second look of DESIGN section 4: true when nothing the checkpoint relied on has moved.
 * Adding, removing or renaming an entry changes its directory's mtime, so every directory is
 * `lstat`ed (no `readdir`). Files for which `wasRead` is true are `lstat`ed and compared on
 * size, mtime, ctime, inode and mode: their bytes were read after the scan, so a change in
 * between could pair old stat with new content. Files taken from the stat cache were not
 * read: their recorded content is exactly what their scanned stat vouches for, and a later
 * change is the next checkpoint's. Symlinks cannot change in place.
 */
export function unchangedSince(root: string, scan: ScanResult, wasRead: (path: string) => boolean = () => true): boolean {
  const check = (dir: ScannedDir): boolean => {
    const st = fs.lstatSync(path.join(root, dir.path), { throwIfNoEntry: false });
    if (
      st === undefined ||
      !st.isDirectory() ||
      st.mtimeMs !== dir.exactMtimeMs ||
      st.ctimeMs !== dir.ctimeMs ||
      permissionBits(st.mode) !== dir.mode
    )
      return false;
    for (const e of dir.children) {
      if (e.type === 'dir') {
        if (!check(e)) return false;
      } else if (e.type === 'file' && wasRead(e.path)) {
        const f = fs.lstatSync(path.join(root, e.path), { throwIfNoEntry: false });
        if (
          f === undefined ||
          f.size !== e.size ||
          f.mtimeMs !== e.mtimeMs ||
          f.ctimeMs !== e.ctimeMs ||
          f.ino !== e.ino ||
          permissionBits(f.mode) !== e.mode
        )
          return false;
      }
    }
    return true;
  };
  return check(scan.root);
}

/** Every file of a scanned tree, depth first. */
export function listFiles(dir: ScannedDir, out: ScannedFile[] = []): ScannedFile[] {
  for (const child of dir.children) {
    if (child.type === 'file') out.push(child);
    else if (child.type === 'dir') listFiles(child, out);
  }
  return out;
}
