import { createHash } from 'node:crypto';
import type { Sha256Hex } from '../core/hash.js';
import { symlinkStaysInside } from '../core/paths.js';
import { encodeTree, type TreeEntry } from '../core/tree.js';
import { InputError } from '../errors.js';
import type { ScannedDir } from './scan.js';
import type { DirIdentity, StatCache, StatCacheBuilder } from './stat-cache.js';

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

/** What lets a directory keep its previous tree id without being encoded again. */
export interface TreeReuse {
  /** Last checkpoint's cache (tree ids by directory identity). */
  readonly cache: StatCache;
  /** Paths whose content came from the stat cache (unchanged since the last checkpoint). */
  readonly hits: ReadonlySet<string>;
  /** Where this checkpoint's directory identities and tree ids are recorded. */
  readonly next: StatCacheBuilder;
}

/** The identity of a scanned directory as the stat cache records it. */
function identityOf(dir: ScannedDir): DirIdentity {
  const names = createHash('sha256');
  for (const child of dir.children) names.update(child.name).update('\0');
  return { exactMtimeMs: dir.exactMtimeMs, ctimeMs: dir.ctimeMs, mode: dir.mode, namesHash: names.digest('hex').slice(0, 16) };
}

/**
 * Encodes the scanned directories bottom-up into tree objects. `ids` gives every included
 * file's content ids by path; files missing from it (excluded while reading, e.g. a secret
 * found in their content) are left out of their tree. With `reuse`, a directory whose stat
 * and included names are unchanged, whose files all came from the stat cache, whose
 * subdirectories were all reused and which holds no symlink (a symlink's mtime can change
 * without its directory's) keeps its cached tree id: nothing is encoded, and the tree is
 * known to exist. Returns the root id and the trees that were encoded. Every tree passes the
 * validation a restore applies (`INVALID_INPUT` otherwise, e.g. a setuid mode or an escaping
 * symlink a source reported): a checkpoint never stores a tree it could not restore.
 */
export function buildTrees(
  root: ScannedDir,
  ids: ReadonlyMap<string, FileIds>,
  reuse?: TreeReuse,
): { rootId: Sha256Hex; trees: EncodedTree[] } {
  const trees: EncodedTree[] = [];
  const encodeDir = (dir: ScannedDir): { id: Sha256Hex; reused: boolean } => {
    // Children first (their ids go into this tree); then decide whether this tree can be reused
    // before building any entry objects for it.
    const subtrees = new Map<ScannedDir, Sha256Hex>();
    let unchanged = reuse !== undefined;
    for (const child of dir.children) {
      if (child.type === 'dir') {
        const sub = encodeDir(child);
        subtrees.set(child, sub.id);
        unchanged &&= sub.reused;
      } else if (child.type === 'symlink') {
        unchanged = false;
      } else if (reuse?.hits.has(child.path) !== true) {
        unchanged = false;
      }
    }
    const identity = reuse === undefined ? undefined : identityOf(dir);
    const cached = unchanged && identity !== undefined ? reuse?.cache.treeOf(dir.path, identity) : undefined;
    const id = cached ?? encodeAndKeep(entriesOf(dir, ids, subtrees), trees);
    if (identity !== undefined) reuse?.next.addDir(dir.path, identity, id);
    return { id, reused: cached !== undefined };
  };
  return { rootId: encodeDir(root).id, trees };
}

function entriesOf(dir: ScannedDir, ids: ReadonlyMap<string, FileIds>, subtrees: ReadonlyMap<ScannedDir, Sha256Hex>): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const child of dir.children) {
    if (child.type === 'dir') {
      entries.push({ name: child.name, type: 'dir', mode: child.mode, mtimeMs: child.mtimeMs, tree: subtrees.get(child) as Sha256Hex });
    } else if (child.type === 'symlink') {
      // The scan (or the host's check of an agent's scan) already excluded escaping links; a
      // tree is never written with one, whatever its source reported.
      if (!symlinkStaysInside(child.path, child.target))
        throw new InputError('INVALID_INPUT', `symlink ${child.path} leads outside the workspace`, { data: { path: child.path } });
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
  return entries;
}

function encodeAndKeep(entries: TreeEntry[], trees: EncodedTree[]): Sha256Hex {
  const tree = encodeTree(entries);
  trees.push(tree);
  return tree.id;
}
