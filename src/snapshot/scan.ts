import fs from 'node:fs';
import path from 'node:path';
import type { DirectoryRules, ExcludeRules, Exclusion } from '../core/excludes.js';
import { hasSpecialBits, permissionBits } from '../core/modes.js';
import { nameProblem, symlinkStaysInside } from '../core/paths.js';
import { InputError } from '../errors.js';

/** Largest file a checkpoint takes; bigger ones are excluded with reason `too-large`. */
export const DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024;
/** Most files and symlinks one scan accepts; more fails with `LIMIT_EXCEEDED` (never a partial checkpoint). */
export const DEFAULT_MAX_ENTRIES = 100_000;

/** Most directories one scan accepts (the root not counted); more fails with `LIMIT_EXCEEDED`. */
export const DEFAULT_MAX_DIRS = 100_000;
/**
 * Most bytes of files one scan accepts in all; more fails with `LIMIT_EXCEEDED`. A hundred
 * files at the file limit: far above a real workspace, far below what a restore of a crafted
 * tree (one shared 1 GiB file under many names) could otherwise write to the host's disk.
 */
export const DEFAULT_MAX_TOTAL_BYTES = 100 * DEFAULT_MAX_FILE_BYTES;

/**
 * Limits applied by a scan, and by every restore and walk of a stored tree (which counts a
 * shared subtree each time it appears). Unset optional limits take their `DEFAULT_MAX_*`.
 */
export interface ScanLimits {
  readonly maxFileBytes: number;
  readonly maxEntries: number;
  readonly maxDirs?: number;
  readonly maxTotalBytes?: number;
}

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
  const excluded: Exclusion[] = [];
  const counts = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  const rootStat = fs.statSync(root);
  if (!rootStat.isDirectory()) throw new InputError('INVALID_INPUT', `${root} is not a directory`, { data: { path: root } });
  const maxDirs = limits.maxDirs ?? DEFAULT_MAX_DIRS;
  const maxTotalBytes = limits.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES;
  const tooMany = (what: string, limit: number): InputError =>
    new InputError('LIMIT_EXCEEDED', `${root} has more than ${limit} ${what}; raise the limit or exclude some`, { data: { limit, what } });
  const stripped = (relPath: string, st: fs.Stats): void => {
    if (hasSpecialBits(st.mode))
      excluded.push({
        path: relPath,
        reason: 'mode-stripped',
        rule: `mode ${(st.mode & 0o7777).toString(8)} kept as ${permissionBits(st.mode).toString(8)}`,
      });
  };

  const walk = (abs: string, rel: string, dirRules: DirectoryRules, children: ScannedEntry[]): void => {
    // Any stable order will do: tree encoding sorts entries by name bytes itself.
    const names = fs.readdirSync(abs).sort();
    for (const name of names) {
      const relPath = rel === '' ? name : `${rel}/${name}`;
      const problem = nameProblem(name);
      if (problem !== undefined) {
        excluded.push({ path: relPath, reason: 'invalid-path', rule: problem });
        continue;
      }
      const absPath = path.join(abs, name);
      const st = fs.lstatSync(absPath);
      const isDir = st.isDirectory();
      const rule = dirRules.match(name, isDir);
      if (rule !== undefined) {
        excluded.push(rule);
        continue;
      }
      if (isDir) {
        const dir: ScannedDir = dirEntry(name, relPath, st);
        counts.dirs += 1;
        if (counts.dirs > maxDirs) throw tooMany('directories', maxDirs);
        stripped(relPath, st);
        walk(absPath, relPath, rules.enter(relPath, readGitignore(rules, absPath)), dir.children);
        children.push(dir);
      } else if (st.isFile()) {
        if (st.size > limits.maxFileBytes) {
          excluded.push({ path: relPath, reason: 'too-large', rule: `larger than ${limits.maxFileBytes} bytes` });
          continue;
        }
        counts.files += 1;
        counts.bytes += st.size;
        if (counts.bytes > maxTotalBytes) throw tooMany('bytes of files', maxTotalBytes);
        stripped(relPath, st);
        children.push({
          type: 'file',
          name,
          path: relPath,
          mode: permissionBits(st.mode),
          size: st.size,
          mtimeMs: st.mtimeMs,
          ctimeMs: st.ctimeMs,
          ino: st.ino,
        });
      } else if (st.isSymbolicLink()) {
        const target = fs.readlinkSync(absPath);
        if (!symlinkStaysInside(relPath, target)) {
          excluded.push({ path: relPath, reason: 'symlink-escape', rule: `points outside the workspace (${target})` });
          continue;
        }
        counts.symlinks += 1;
        children.push({ type: 'symlink', name, path: relPath, target, mtimeMs: Math.floor(st.mtimeMs) });
      } else {
        excluded.push({ path: relPath, reason: 'special-file', rule: 'socket, FIFO or device' });
        continue;
      }
      if (counts.files + counts.symlinks > limits.maxEntries) throw tooMany('files and symlinks', limits.maxEntries);
    }
  };

  const top = dirEntry('', '', rootStat);
  walk(root, '', rules.enter('', readGitignore(rules, root)), top.children);
  return { root: top, ...counts, excluded, startedAtMs };
}

function readGitignore(rules: ExcludeRules, absDir: string): string | undefined {
  if (!rules.readsGitignore) return undefined;
  try {
    return fs.readFileSync(path.join(absDir, '.gitignore'), 'utf8');
  } catch {
    return undefined;
  }
}

function dirEntry(name: string, relPath: string, st: fs.Stats): ScannedDir {
  return {
    type: 'dir',
    name,
    path: relPath,
    mode: permissionBits(st.mode),
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
