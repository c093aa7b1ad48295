/**
 * What the snapshot benchmark needs to know about a tree it did not generate (the npm trees) or
 * must pick a piece of (the directory the rename measurement moves): its files, directories and
 * depth, from one walk that never follows a symlink.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

/** One regular file of a tree. */
export interface FactFile {
  /** Relative path, `/`-separated. */
  readonly rel: string;
  readonly size: number;
}

/** The shape of a tree. */
export interface TreeFacts {
  /** Regular files in sorted walk order. */
  readonly files: readonly FactFile[];
  readonly bytes: number;
  /** Directories below the root (the root itself not counted). */
  readonly dirs: number;
  /** Deepest directory, counted in path components below the root. */
  readonly maxDepth: number;
  readonly symlinks: number;
  /** Regular files below each directory (recursively), keyed by relative path. */
  readonly filesBelow: ReadonlyMap<string, number>;
}

/** A directory to rename, and how many files it holds. */
export interface RenameDir {
  readonly path: string;
  readonly files: number;
}

/** Walks `root`. */
export async function treeFacts(root: string): Promise<TreeFacts> {
  const files: FactFile[] = [];
  const filesBelow = new Map<string, number>();
  let bytes = 0;
  let dirs = 0;
  let maxDepth = 0;
  let symlinks = 0;
  const walk = async (rel: string, depth: number): Promise<number> => {
    const entries = await fs.readdir(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    let count = 0;
    for (const entry of entries) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        dirs += 1;
        maxDepth = Math.max(maxDepth, depth + 1);
        count += await walk(child, depth + 1);
      } else if (entry.isSymbolicLink()) {
        symlinks += 1;
      } else if (entry.isFile()) {
        const { size } = await fs.lstat(path.join(root, child));
        files.push({ rel: child, size });
        bytes += size;
        count += 1;
      }
    }
    filesBelow.set(rel, count);
    return count;
  };
  await walk('', 0);
  return { files, bytes, dirs, maxDepth, symlinks, filesBelow };
}

/**
 * The directory holding closest to `target` files (recursively), outside `.git`; ties go to the
 * shorter, then the alphabetically first path. Undefined when none holds between half and twice
 * `target`, so a workload without such a directory skips the rename measurement.
 */
export function pickRenameDir(facts: TreeFacts, target: number): RenameDir | undefined {
  let best: RenameDir | undefined;
  for (const [dir, files] of facts.filesBelow) {
    if (dir === '' || dir === '.git' || dir.startsWith('.git/') || files < target / 2 || files > target * 2) continue;
    const better =
      best === undefined ||
      Math.abs(files - target) < Math.abs(best.files - target) ||
      (Math.abs(files - target) === Math.abs(best.files - target) &&
        (dir.length < best.path.length || (dir.length === best.path.length && dir < best.path)));
    if (better) best = { path: dir, files };
  }
  return best;
}
