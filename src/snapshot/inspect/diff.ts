import type { Sha256Hex } from '../../core/hash.js';
import { compareNames, type TreeEntry } from '../../core/tree.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import { readTreeAt } from '../tree-walk.js';

/** One difference between two checkpoints. */
export interface DiffEntry {
  readonly path: string;
  readonly change: 'added' | 'removed' | 'modified' | 'type-changed' | 'mode-changed';
  readonly type: TreeEntry['type'];
}

/**
 * Differences from tree `a` to tree `b`. Subtrees with equal ids are skipped without being
 * read, so the cost follows the size of the change, not the size of the workspace. Every
 * tree read is checked at its path (`INTEGRITY`, see `readTreeAt`).
 */
export async function diffTrees(reader: ObjectReader, a: Sha256Hex, b: Sha256Hex): Promise<DiffEntry[]> {
  const out: DiffEntry[] = [];
  const walkAll = async (tree: Sha256Hex, prefix: string, change: 'added' | 'removed'): Promise<void> => {
    for (const e of await readTreeAt(reader, tree, prefix.replace(/\/$/, ''))) {
      const p = prefix + e.name;
      out.push({ path: p, change, type: e.type });
      if (e.type === 'dir') await walkAll(e.tree, `${p}/`, change);
    }
  };
  const compare = async (ta: Sha256Hex, tb: Sha256Hex, prefix: string): Promise<void> => {
    if (ta === tb) return;
    const at = prefix.replace(/\/$/, '');
    const [ea, eb] = [await readTreeAt(reader, ta, at), await readTreeAt(reader, tb, at)];
    let i = 0;
    let j = 0;
    while (i < ea.length || j < eb.length) {
      const x = ea[i];
      const y = eb[j];
      const order = x === undefined ? 1 : y === undefined ? -1 : compareNames(x.name, y.name);
      if (order < 0 && x !== undefined) {
        out.push({ path: prefix + x.name, change: 'removed', type: x.type });
        if (x.type === 'dir') await walkAll(x.tree, `${prefix}${x.name}/`, 'removed');
        i += 1;
      } else if (order > 0 && y !== undefined) {
        out.push({ path: prefix + y.name, change: 'added', type: y.type });
        if (y.type === 'dir') await walkAll(y.tree, `${prefix}${y.name}/`, 'added');
        j += 1;
      } else if (x !== undefined && y !== undefined) {
        await compareEntries(x, y, prefix);
        i += 1;
        j += 1;
      }
    }
  };
  const compareEntries = async (x: TreeEntry, y: TreeEntry, prefix: string): Promise<void> => {
    const p = prefix + x.name;
    if (x.type !== y.type) {
      out.push({ path: p, change: 'type-changed', type: y.type });
      return;
    }
    if (x.type === 'dir' && y.type === 'dir') {
      if (x.mode !== y.mode) out.push({ path: p, change: 'mode-changed', type: 'dir' });
      await compare(x.tree, y.tree, `${p}/`);
    } else if (x.type === 'file' && y.type === 'file') {
      if (x.sha256 !== y.sha256) out.push({ path: p, change: 'modified', type: 'file' });
      else if (x.mode !== y.mode) out.push({ path: p, change: 'mode-changed', type: 'file' });
    } else if (x.type === 'symlink' && y.type === 'symlink' && x.target !== y.target) {
      out.push({ path: p, change: 'modified', type: 'symlink' });
    }
  };
  await compare(a, b, '');
  return out;
}
