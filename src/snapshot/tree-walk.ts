import type { Sha256Hex } from '../core/hash.js';
import { byteLength } from '../core/name-bytes.js';
import { MAX_PATH_BYTES, printable, symlinkStaysInside } from '../core/paths.js';
import { compareNames, decodeTree, type FileEntry, type SymlinkEntry, type TreeEntry } from '../core/tree.js';
import { InputError, IntegrityError } from '../errors.js';
import type { ObjectReader } from '../objects/object-reader.js';
import {
  DEFAULT_MAX_DIRS,
  DEFAULT_MAX_ENTRIES,
  DEFAULT_MAX_FILE_BYTES,
  DEFAULT_MAX_TOTAL_BYTES,
  type ScanLimits,
} from '../workspace-fs/scan.js';

/**
 * Orders workspace paths as a depth-first walk of trees sorted by name bytes meets them
 * ("flatten order"): segment by segment with `compareNames`, a directory before what it holds.
 */
export function comparePaths(a: string, b: string): number {
  if (a === b) return 0;
  const as = a.split('/');
  const bs = b.split('/');
  for (let i = 0; i < Math.min(as.length, bs.length); i += 1) {
    const c = compareNames(as[i] as string, bs[i] as string);
    if (c !== 0) return c;
  }
  return as.length - bs.length;
}

/**
 * Checks every hard link of a flattened tree (the host never trusts a stored tree): a
 * member's `hardlink` must name a file that precedes it in flatten order, is no member
 * itself, and has equal sha256, size, mode and mtime. Throws `INTEGRITY` (data: `path`,
 * `hardlink`, `reason`) otherwise. Linear in the files when the tree holds no link.
 */
export function checkHardlinks(files: FlatTree['files']): void {
  const members = files.filter((f) => f.hardlink !== undefined);
  if (members.length === 0) return;
  const wanted = new Set(members.map((m) => m.hardlink as string));
  const leaders = new Map(files.filter((f) => wanted.has(f.path)).map((f) => [f.path, f]));
  for (const m of members) {
    const to = m.hardlink as string;
    const leader = leaders.get(to);
    const why =
      leader === undefined
        ? 'names no file of the checkpoint'
        : comparePaths(to, m.path) >= 0
          ? 'names a file that does not precede it'
          : leader.hardlink !== undefined
            ? 'names a file that is itself a link'
            : leader.sha256 !== m.sha256 || leader.size !== m.size || leader.mode !== m.mode || leader.mtimeMs !== m.mtimeMs
              ? 'names a file with other content, mode or mtime'
              : undefined;
    if (why !== undefined) {
      throw new IntegrityError('INTEGRITY', `stored hard link ${printable(m.path)} -> ${printable(to)} ${why}`, {
        data: { path: m.path, hardlink: to, reason: why },
      });
    }
  }
}

/** A checkpoint's content, flattened: every directory, file and symlink with its path. */
export interface FlatTree {
  /** Directories, parents before children; the root is `''`. */
  readonly dirs: Array<{ readonly path: string; readonly mode: number; readonly mtimeMs: number; readonly tree: Sha256Hex }>;
  readonly files: Array<FileEntry & { readonly path: string }>;
  readonly symlinks: Array<SymlinkEntry & { readonly path: string }>;
}

/** The limits a walk applies: a scan's, every one filled in with the scan's default. */
export type TreeLimits = Required<ScanLimits>;

/** `limits` with the scan defaults for everything not given. */
export function treeLimits(limits: Partial<ScanLimits> = {}): TreeLimits {
  return {
    maxFileBytes: limits.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
    maxEntries: limits.maxEntries ?? DEFAULT_MAX_ENTRIES,
    maxDirs: limits.maxDirs ?? DEFAULT_MAX_DIRS,
    maxTotalBytes: limits.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES,
  };
}

/** Figures a checkpoint row records about its own tree (written by the host at commit). */
interface RecordedStats {
  readonly files?: unknown;
  readonly symlinks?: unknown;
  readonly dirs?: unknown;
  readonly bytes?: unknown;
}

/**
 * The limits a walk of checkpoint `checkpoint`'s tree applies: `given` where set, otherwise a
 * scan's defaults, raised to what the checkpoint's own row says it holds. The row is the
 * host's record (the metadata store is trusted; stored trees are not), so a checkpoint taken
 * with raised limits still restores, while a tree that holds more than its checkpoint
 * recorded fails with `LIMIT_EXCEEDED` before anything is created.
 */
export function checkpointLimits(checkpoint: { readonly stats: unknown }, given: Partial<ScanLimits> = {}): TreeLimits {
  const stats = (checkpoint.stats ?? {}) as RecordedStats;
  const n = (v: unknown): number => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : 0);
  const bytes = n(stats.bytes);
  return treeLimits({
    maxEntries: Math.max(DEFAULT_MAX_ENTRIES, n(stats.files) + n(stats.symlinks)),
    maxDirs: Math.max(DEFAULT_MAX_DIRS, n(stats.dirs)),
    maxTotalBytes: Math.max(DEFAULT_MAX_TOTAL_BYTES, bytes),
    // The largest file is not recorded; no file is larger than all of them together.
    maxFileBytes: Math.max(DEFAULT_MAX_FILE_BYTES, bytes),
    ...given,
  });
}

/**
 * The path of `entry` inside a tree found at `dirPath`, after the rules that depend on it:
 * the path fits in {@link MAX_PATH_BYTES} and a symlink stays inside the root
 * ({@link symlinkStaysInside}). Throws `INTEGRITY` (data: `tree`, `path`) otherwise. The
 * rules that need no path were applied by `decodeTree`.
 */
export function entryPath(tree: Sha256Hex, dirPath: string, entry: TreeEntry): string {
  const p = dirPath === '' ? entry.name : `${dirPath}/${entry.name}`;
  const refuse = (why: string): IntegrityError =>
    new IntegrityError('INTEGRITY', `tree ${tree} is malformed: ${p} ${why}`, { data: { tree, path: p, reason: why } });
  // A UTF-16 unit is at most 3 bytes: only a path that could be too long is measured.
  if (p.length * 3 > MAX_PATH_BYTES && byteLength(p) > MAX_PATH_BYTES) throw refuse(`is longer than ${MAX_PATH_BYTES} bytes`);
  if (entry.type === 'symlink' && !symlinkStaysInside(p, entry.target))
    throw refuse(`is a symlink leading outside (${printable(entry.target)})`);
  return p;
}

/** Reads and decodes the tree `id` found at `dirPath`, checking every entry at its path ({@link entryPath}). */
export async function readTreeAt(reader: ObjectReader, id: Sha256Hex, dirPath: string): Promise<TreeEntry[]> {
  const entries = await reader.readTree(id);
  for (const entry of entries) entryPath(id, dirPath, entry);
  return entries;
}

function limitExceeded(what: string, limit: number, at: string): InputError {
  return new InputError('LIMIT_EXCEEDED', `this checkpoint holds more than ${limit} ${what} (at ${at}); nothing was written`, {
    data: { limit, path: at, what },
  });
}

/**
 * Reads a checkpoint's trees level by level (one batched, coalesced read per level) and
 * flattens them. Every tree is verified by the reader and every entry checked at its path
 * ({@link entryPath}). The scan's limits hold here too, counting a subtree each time it
 * appears (a tree may share one subtree many times over): more files and symlinks than
 * `maxEntries`, more directories than `maxDirs`, a file over `maxFileBytes` or more than
 * `maxTotalBytes` in all fail with `LIMIT_EXCEEDED` as soon as the walk sees them, so a
 * small store cannot unfold into an unbounded restore. Hard links are checked last
 * ({@link checkHardlinks}). `root` describes the root directory, which has no entry of its own.
 */
export async function flattenTree(
  reader: ObjectReader,
  rootTree: Sha256Hex,
  root: { mode: number; mtimeMs: number } = { mode: 0o755, mtimeMs: 0 },
  limits: TreeLimits = treeLimits(),
): Promise<FlatTree> {
  const flat: FlatTree = { dirs: [{ path: '', mode: root.mode, mtimeMs: root.mtimeMs, tree: rootTree }], files: [], symlinks: [] };
  let level: Array<{ path: string; tree: Sha256Hex }> = [{ path: '', tree: rootTree }];
  let totalBytes = 0;
  while (level.length > 0) {
    const objects = await reader.readMany(level.map((d) => d.tree));
    const nextLevel: Array<{ path: string; tree: Sha256Hex }> = [];
    for (const dir of level) {
      for (const entry of decodeTree(dir.tree, objects.get(dir.tree) as Uint8Array)) {
        const p = entryPath(dir.tree, dir.path, entry);
        if (entry.type === 'dir') {
          if (flat.dirs.length > limits.maxDirs) throw limitExceeded('directories', limits.maxDirs, p);
          flat.dirs.push({ path: p, mode: entry.mode, mtimeMs: entry.mtimeMs, tree: entry.tree });
          nextLevel.push({ path: p, tree: entry.tree });
          continue;
        }
        if (flat.files.length + flat.symlinks.length >= limits.maxEntries) throw limitExceeded('files and symlinks', limits.maxEntries, p);
        if (entry.type === 'file') {
          if (entry.size > limits.maxFileBytes) throw limitExceeded('bytes in one file', limits.maxFileBytes, p);
          totalBytes += entry.size;
          if (totalBytes > limits.maxTotalBytes) throw limitExceeded('bytes of files', limits.maxTotalBytes, p);
          flat.files.push({ ...entry, path: p });
        } else {
          flat.symlinks.push({ ...entry, path: p });
        }
      }
    }
    level = nextLevel;
  }
  checkHardlinks(flat.files);
  return flat;
}
