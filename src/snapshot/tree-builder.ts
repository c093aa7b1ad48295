import type { Sha256Hex } from '../core/hash.js';
import { encodeTree, type TreeEntry } from '../core/tree.js';
import type { ScannedDir } from './scan.js';

/** Content ids of a file, as resolved by hashing or from the stat cache. */
export interface FileIds {
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
}

/** One encoded tree object. */
export interface EncodedTree {
  readonly id: Sha256Hex;
  readonly bytes: Buffer;
}

/**
 * Encodes the scanned directories bottom-up into tree objects. `ids` gives every included
 * file's content ids by path; files missing from it (excluded while reading, e.g. a secret
 * found in their content) are left out of their tree. Returns the root id and all trees.
 */
export function buildTrees(root: ScannedDir, ids: ReadonlyMap<string, FileIds>): { rootId: Sha256Hex; trees: EncodedTree[] } {
  const trees: EncodedTree[] = [];
  const encodeDir = (dir: ScannedDir): Sha256Hex => {
    const entries: TreeEntry[] = [];
    for (const child of dir.children) {
      if (child.type === 'dir') {
        entries.push({ name: child.name, type: 'dir', mode: child.mode, mtimeMs: child.mtimeMs, tree: encodeDir(child) });
      } else if (child.type === 'symlink') {
        entries.push({ name: child.name, type: 'symlink', target: child.target, mtimeMs: child.mtimeMs });
      } else {
        const content = ids.get(child.path);
        if (content === undefined) continue;
        entries.push({
          name: child.name,
          type: 'file',
          mode: child.mode,
          size: child.size,
          mtimeMs: Math.floor(child.mtimeMs),
          sha256: content.sha256,
          chunks: content.chunks,
        });
      }
    }
    const tree = encodeTree(entries);
    trees.push(tree);
    return tree.id;
  };
  const rootId = encodeDir(root);
  return { rootId, trees };
}
