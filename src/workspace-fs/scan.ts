/**
 * `workspace-fs/`: file-system code used on both sides of the sandbox boundary (the host and
 * the in-sandbox agent, so plain `node:` code only): the scan and its limits, the stat cache,
 * exact byte names, long paths, atomic files, tree removal.
 */
import fs from 'node:fs';
import path from 'node:path';
import { permissionBits } from '../core/modes.js';
import { byteLength, hasByteEscapes } from '../core/name-bytes.js';
import { MAX_NAME_BYTES, MAX_PATH_BYTES, nameProblem } from '../core/paths.js';
import { InputError } from '../errors.js';
import type { ExcludeRules, Exclusion } from '../rules/excludes.js';
import { INFO_EXCLUDE_PATH, ignoreFileTooLarge, ignoreText, MAX_IGNORE_FILE_BYTES } from '../rules/ignore-files.js';
import { readLinkTarget, readNames } from './fs-exact.js';
import { LongPaths, SYSCALL_PATH_BYTES } from './long-paths.js';
import { type ScanLimits, ScanTally, type SubtreeTally } from './scan-limits.js';

export {
  DEFAULT_MAX_DIRS,
  DEFAULT_MAX_ENTRIES,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_MAX_TOTAL_BYTES,
  type ScanLimits,
  type SubtreeTally,
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
  /**
   * Present when the file has other hard links (`nlink > 1`): with {@link ino}, the inode it
   * is, so the checkpoint can record its links (`FileEntry.hardlink`).
   */
  readonly dev?: number;
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
 * What a watcher (the agent's `WorkspaceWatch`) adds to a walk. Every member is optional; a
 * walk without hooks reads every directory.
 */
export interface ScanHooks {
  /** Called with each directory (the root too) before it is read: a watcher watches it first, so nothing changed after the read goes unseen. */
  readonly entering?: (absPath: string, relPath: string, st: fs.Stats) => void;
  /** The scan before this one: `reuse` is offered its directory at the same path. */
  readonly earlier?: ScannedDir;
  /**
   * For a directory that is still a directory at the same path (`st`, its `lstat` now) and
   * still included: the earlier directory there, to be taken over whole with its subtree, and
   * what that subtree counted; undefined to read it.
   */
  readonly reuse?: (earlier: ScannedDir, st: fs.Stats) => SubtreeTally | undefined;
  /**
   * Called for each directory read (the root too), once its subtree is done, with what the
   * subtree counted and the earlier scan's directory at the same path, if any.
   */
  readonly walked?: (dir: ScannedDir, counted: SubtreeTally, earlier: ScannedDir | undefined) => void;
}

/**
 * Walks `root` synchronously (`readdirSync` + `lstatSync` is several times faster than the
 * promise API for many small entries), never following symlinks, applying exclusion rules.
 * Directories a walk cannot read fail the scan rather than silently dropping content; an
 * entry that cannot be used (its `lstat` fails, its path is over `MAX_PATH_BYTES`) is
 * reported `invalid-path` and the walk goes on. An entry named by a credential, or a symlink
 * whose target holds one, is left out (`secret-content`, see `ScanTally.secretName`).
 *
 * Names are bytes (`core/name-bytes.ts`): a directory is read as strings, and read again as
 * bytes only when a name came back with U+FFFD (not valid UTF-8), so such a name is kept
 * exactly. Paths longer than one system call takes are reached through {@link LongPaths}.
 * Modes keep their permission bits only: an entry with setuid, setgid or sticky is kept
 * without them and reported in `excluded` with reason `mode-stripped` (its content is not
 * left out; the report is the one place a checkpoint says what it changed). A file with
 * other hard links carries its `dev` (with `ino`, its inode) so links can be recorded.
 */
export function scanWorkspace(root: string, rules: ExcludeRules, limits: ScanLimits, hooks: ScanHooks = {}): ScanResult {
  const startedAtMs = Date.now();
  const tally = new ScanTally(limits, root, path.resolve(root));
  const rootStat = fs.statSync(root);
  if (!rootStat.isDirectory()) throw new InputError('INVALID_INPUT', `${root} is not a directory`, { data: { path: root } });
  const long = new LongPaths();

  const walk = (abs: string, rel: string, children: ScannedEntry[], earlier: ScannedDir | undefined): void => {
    const read = sortedNames(abs, long);
    // A directory's own `.gitignore` is opened only when it is listed (a failed open costs an
    // exception per directory); one created after the listing moves the directory, and the
    // second look sees it. The root's `.git/info/exclude` is always looked for.
    const ignore = rel === '' || read.names.includes('.gitignore') ? readGitignore(rules, abs, rel, long) : undefined;
    const dirRules = rules.enter(rel, ignore);
    let earlierDirs: Map<string, ScannedDir> | undefined;
    // Most directories hold no escaped name and are far from PATH_MAX: their entries' paths go
    // to `fs` as they are, with no per-entry check. The others go through LongPaths.
    const direct = !read.escaped && byteLength(abs) + 1 + MAX_NAME_BYTES <= SYSCALL_PATH_BYTES;
    const relBytes = rel === '' ? 0 : byteLength(rel) + 1;
    const prefix = childPrefix(abs);
    for (const name of read.names) {
      const relPath = rel === '' ? name : `${rel}/${name}`;
      if (tally.secretName(relPath, name)) continue;
      const problem = nameProblem(name) ?? (relBytes + MAX_NAME_BYTES > MAX_PATH_BYTES ? pathProblem(relPath) : undefined);
      if (problem !== undefined) {
        tally.invalidName(relPath, problem);
        continue;
      }
      const absPath = prefix + name;
      const at = direct ? absPath : long.at(absPath);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(at);
      } catch (error) {
        // Gone since readdir: the second look sees its directory moved. Anything else is this entry's alone.
        if (errorCode(error) !== 'ENOENT') tally.invalidName(relPath, `cannot be read (${errorCode(error)})`);
        continue;
      }
      const isDir = st.isDirectory();
      const rule = dirRules.match(name, isDir);
      if (rule !== undefined) {
        tally.excluded.push(rule);
        continue;
      }
      if (isDir) {
        if (earlier !== undefined)
          earlierDirs ??= new Map(earlier.children.flatMap((c) => (c.type === 'dir' ? [[c.name, c] as const] : [])));
        const was = earlierDirs?.get(name);
        const counted = was === undefined ? undefined : hooks.reuse?.(was, st);
        if (counted !== undefined) {
          tally.adopt(counted);
          children.push(was as ScannedDir);
          continue;
        }
        const mark = tally.mark();
        tally.addDir();
        const dir: ScannedDir = dirEntry(name, relPath, st, tally.mode(relPath, st.mode));
        hooks.entering?.(absPath, relPath, st);
        walk(absPath, relPath, dir.children, was);
        children.push(dir);
        hooks.walked?.(dir, tally.since(mark), was);
      } else if (st.isFile()) {
        if (!tally.addFile(relPath, st.size)) continue;
        const file = {
          type: 'file',
          name,
          path: relPath,
          mode: tally.mode(relPath, st.mode),
          size: st.size,
          mtimeMs: st.mtimeMs,
          ctimeMs: st.ctimeMs,
          ino: st.ino,
        } as const;
        children.push(st.nlink > 1 ? { ...file, dev: st.dev } : file);
      } else if (st.isSymbolicLink()) {
        const target = tally.addSymlink(relPath, readLinkTarget(at));
        if (target !== undefined) children.push({ type: 'symlink', name, path: relPath, target, mtimeMs: Math.floor(st.mtimeMs) });
      } else {
        tally.excluded.push({ path: relPath, reason: 'special-file', rule: 'socket, FIFO or device' });
      }
    }
  };

  try {
    const mark = tally.mark();
    const top = dirEntry('', '', rootStat, permissionBits(rootStat.mode));
    hooks.entering?.(root, '', rootStat);
    walk(root, '', top.children, hooks.earlier);
    hooks.walked?.(top, tally.since(mark), hooks.earlier);
    return { root: top, ...tally.counts, excluded: tally.excluded, startedAtMs };
  } finally {
    long.close();
  }
}

/**
 * What a path under directory `dir` starts with: `dir` and one slash. A name from readdir, or a
 * path of such names (a scanned path), appended to it is what `path.join` gives when `dir` is
 * normalized, without normalizing every entry.
 */
export function childPrefix(dir: string): string {
  return dir.endsWith('/') ? dir : `${dir}/`;
}

/** The names in directory `abs`, sorted, and whether one holds bytes that are not UTF-8. */
function sortedNames(abs: string, long: LongPaths): { names: string[]; escaped: boolean } {
  // Any stable order will do: tree encoding sorts entries by name bytes itself.
  const names = readNames(long.at(abs)).sort();
  return { names, escaped: names.some(hasByteEscapes) };
}

/** Why a workspace path cannot be kept (too long), or undefined. */
function pathProblem(relPath: string): string | undefined {
  return byteLength(relPath) > MAX_PATH_BYTES ? `path longer than ${MAX_PATH_BYTES} bytes` : undefined;
}

const errorCode = (error: unknown): string => String((error as { code?: unknown }).code ?? 'error');

/**
 * The ignore text the walk hands `rules.enter` for directory `absDir` (`relDir` in the
 * workspace): its `.gitignore`, and at the root `.git/info/exclude` too ({@link ignoreText}).
 * A `.gitignore` that is a symlink is not followed (as git does not follow one in the working
 * tree); `.git/info/exclude` is. One over {@link MAX_IGNORE_FILE_BYTES} fails the scan with
 * `LIMIT_EXCEEDED`; one that cannot be read counts as absent.
 */
function readGitignore(rules: ExcludeRules, absDir: string, relDir: string, long: LongPaths): string | undefined {
  if (!rules.readsGitignore) return undefined;
  const own = readIgnoreFile(long, path.join(absDir, '.gitignore'), relDir === '' ? '.gitignore' : `${relDir}/.gitignore`, false);
  const info = relDir === '' ? readIgnoreFile(long, path.join(absDir, INFO_EXCLUDE_PATH), INFO_EXCLUDE_PATH, true) : undefined;
  return ignoreText(relDir, own, info);
}

function readIgnoreFile(long: LongPaths, abs: string, relPath: string, follow: boolean): string | undefined {
  let fd: number;
  try {
    fd = fs.openSync(long.at(abs), fs.constants.O_RDONLY | (follow ? 0 : fs.constants.O_NOFOLLOW));
  } catch {
    return undefined;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return undefined;
    if (st.size > MAX_IGNORE_FILE_BYTES) throw ignoreFileTooLarge(relPath, st.size);
    // One byte past the bound tells a file that grew since fstat.
    const buf = Buffer.alloc(MAX_IGNORE_FILE_BYTES + 1);
    let got = 0;
    for (let n = 1; n > 0 && got < buf.length; got += n) n = fs.readSync(fd, buf, got, buf.length - got, got);
    if (got > MAX_IGNORE_FILE_BYTES) throw ignoreFileTooLarge(relPath, got);
    return buf.toString('utf8', 0, got);
  } catch (error) {
    if (error instanceof InputError) throw error;
    return undefined;
  } finally {
    fs.closeSync(fd);
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
 * change is the next checkpoint's; so are the files under `settled` (subtrees the cache
 * vouched for whole), whose directories are still looked at. Symlinks cannot change in place.
 */
export function unchangedSince(
  root: string,
  scan: ScanResult,
  wasRead: (path: string) => boolean = () => true,
  settled: ReadonlySet<ScannedDir> = new Set(),
): boolean {
  const long = new LongPaths();
  const look = (abs: string, direct: boolean): fs.Stats | undefined => {
    if (direct) return fs.lstatSync(abs, { throwIfNoEntry: false });
    try {
      return fs.lstatSync(long.at(abs), { throwIfNoEntry: false });
    } catch {
      return undefined; // unreachable now (e.g. a directory on its long path replaced by a symlink): it moved
    }
  };
  const check = (dir: ScannedDir, vouched: boolean): boolean => {
    const abs = dir.path === '' ? root : path.join(root, dir.path);
    // As in the scan: a directory far from PATH_MAX, without escapes, is reached by plain paths.
    const direct = !hasByteEscapes(abs) && byteLength(abs) + 1 + MAX_NAME_BYTES <= SYSCALL_PATH_BYTES;
    const st = look(abs, direct);
    if (
      st === undefined ||
      !st.isDirectory() ||
      st.mtimeMs !== dir.exactMtimeMs ||
      st.ctimeMs !== dir.ctimeMs ||
      permissionBits(st.mode) !== dir.mode
    )
      return false;
    const filesVouched = vouched || settled.has(dir);
    for (const e of dir.children) {
      if (e.type === 'dir') {
        if (!check(e, filesVouched)) return false;
      } else if (e.type === 'file' && !filesVouched && wasRead(e.path)) {
        const f = look(path.join(abs, e.name), direct && !hasByteEscapes(e.name));
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
  try {
    return check(scan.root, false);
  } finally {
    long.close();
  }
}

/** Every file of a scanned tree outside the directories in `skip` (their subtrees too), depth first. */
export function listFilesOutside(dir: ScannedDir, skip: ReadonlySet<ScannedDir>, out: ScannedFile[] = []): ScannedFile[] {
  if (skip.has(dir)) return out;
  for (const child of dir.children) {
    if (child.type === 'file') out.push(child);
    else if (child.type === 'dir') listFilesOutside(child, skip, out);
  }
  return out;
}

/** Every file of a scanned tree, depth first. */
export function listFiles(dir: ScannedDir, out: ScannedFile[] = []): ScannedFile[] {
  for (const child of dir.children) {
    if (child.type === 'file') out.push(child);
    else if (child.type === 'dir') listFiles(child, out);
  }
  return out;
}
