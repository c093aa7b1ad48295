/** Directory walks for the snapshot benchmark: store sizes (like `du`) and restore checks. */
import fs from 'node:fs/promises';
import path from 'node:path';

/** Size of a store directory. */
export interface StoreSize {
  /** Allocated blocks of files and directories, each inode once (what `du -s -B1` prints). */
  readonly diskBytes: number;
  /** Sum of regular file lengths (what `du -s -b` would print, minus directory entries). */
  readonly apparentBytes: number;
  readonly files: number;
}

/** Files and bytes below a directory. */
export interface TreeSummary {
  readonly files: number;
  readonly bytes: number;
}

/** Walks `root` like `du -s`: hard-linked inodes count once, symlinks are not followed. */
export async function storeSize(root: string): Promise<StoreSize> {
  const seen = new Set<string>();
  let diskBytes = 0;
  let apparentBytes = 0;
  let files = 0;
  await walk(root, async (full, isDir) => {
    const st = await fs.lstat(full, { bigint: false });
    const inode = `${st.dev}:${st.ino}`;
    if (seen.has(inode)) return;
    seen.add(inode);
    diskBytes += st.blocks * 512;
    if (!isDir && st.isFile()) {
      apparentBytes += st.size;
      files += 1;
    }
  });
  return { diskBytes, apparentBytes, files };
}

/** Counts regular files and their bytes below `root`, leaving out the top-level entries named in `skip`. */
export async function treeSummary(root: string, skip: readonly string[] = []): Promise<TreeSummary> {
  let files = 0;
  let bytes = 0;
  const skipped = skip.map((name) => path.join(root, name));
  await walk(root, async (full, isDir) => {
    if (skipped.some((s) => full === s || full.startsWith(`${s}${path.sep}`))) return;
    if (isDir) return;
    const st = await fs.lstat(full);
    if (!st.isFile()) return;
    files += 1;
    bytes += st.size;
  });
  return { files, bytes };
}

/**
 * Checks that `restored` holds the same number of files and bytes as `source`, and the same bytes
 * in each of `sample` (relative paths); top-level entries named in `skip` (a tool that never
 * stores them) are left out of both counts. Returns a description of the first difference, or undefined.
 */
export async function compareTrees(
  source: string,
  restored: string,
  sample: readonly string[],
  skip: readonly string[] = [],
): Promise<string | undefined> {
  const [want, got] = await Promise.all([treeSummary(source, skip), treeSummary(restored, skip)]);
  if (want.files !== got.files || want.bytes !== got.bytes) {
    return `expected ${want.files} files / ${want.bytes} bytes, restored ${got.files} files / ${got.bytes} bytes`;
  }
  for (const rel of sample) {
    const [a, b] = await Promise.all([fs.readFile(path.join(source, rel)), fs.readFile(path.join(restored, rel)).catch(() => undefined)]);
    if (b === undefined || !a.equals(b)) return `${rel} differs from the source`;
  }
  return undefined;
}

async function walk(dir: string, visit: (full: string, isDir: boolean) => Promise<void>): Promise<void> {
  await visit(dir, true);
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await walk(full, visit);
    else await visit(full, false);
  }
}
