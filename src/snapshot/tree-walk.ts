import type { Sha256Hex } from '../core/hash.js';
import { decodeTree, type FileEntry, type SymlinkEntry } from '../core/tree.js';
import type { ObjectReader } from '../objects/object-reader.js';

/** A checkpoint's content, flattened: every directory, file and symlink with its path. */
export interface FlatTree {
  /** Directories, parents before children; the root is `''`. */
  readonly dirs: Array<{ readonly path: string; readonly mode: number; readonly mtimeMs: number; readonly tree: Sha256Hex }>;
  readonly files: Array<FileEntry & { readonly path: string }>;
  readonly symlinks: Array<SymlinkEntry & { readonly path: string }>;
}

/**
 * Reads a checkpoint's trees level by level (one batched, coalesced read per level) and
 * flattens them. Every tree is verified by the reader. `rootMode`/`rootMtimeMs` describe the
 * root directory, which has no entry of its own.
 */
export async function flattenTree(
  reader: ObjectReader,
  rootTree: Sha256Hex,
  root: { mode: number; mtimeMs: number } = { mode: 0o755, mtimeMs: 0 },
): Promise<FlatTree> {
  const flat: FlatTree = { dirs: [{ path: '', mode: root.mode, mtimeMs: root.mtimeMs, tree: rootTree }], files: [], symlinks: [] };
  let level: Array<{ path: string; tree: Sha256Hex }> = [{ path: '', tree: rootTree }];
  while (level.length > 0) {
    const objects = await reader.readMany(level.map((d) => d.tree));
    const nextLevel: Array<{ path: string; tree: Sha256Hex }> = [];
    for (const dir of level) {
      for (const entry of decodeTree(dir.tree, objects.get(dir.tree) as Uint8Array)) {
        const p = dir.path === '' ? entry.name : `${dir.path}/${entry.name}`;
        if (entry.type === 'dir') {
          flat.dirs.push({ path: p, mode: entry.mode, mtimeMs: entry.mtimeMs, tree: entry.tree });
          nextLevel.push({ path: p, tree: entry.tree });
        } else if (entry.type === 'file') {
          flat.files.push({ ...entry, path: p });
        } else {
          flat.symlinks.push({ ...entry, path: p });
        }
      }
    }
    level = nextLevel;
  }
  return flat;
}
