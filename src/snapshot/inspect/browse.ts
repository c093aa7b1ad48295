import type { Sha256Hex } from '../../core/hash.js';
import { splitRelativePath } from '../../core/paths.js';
import type { FileEntry, TreeEntry } from '../../core/tree.js';
import { InputError, NotFoundError } from '../../errors.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import { readTreeAt } from '../tree-walk.js';

/** Chunks read per batch when streaming a file out of a checkpoint. */
const CAT_BATCH_CHUNKS = 8;

/** What a path names inside a checkpoint: a directory's entries, or one non-directory entry. */
export type Lookup =
  | { readonly kind: 'dir'; readonly tree: Sha256Hex; readonly entries: TreeEntry[] }
  | { readonly kind: 'entry'; readonly entry: TreeEntry };

/**
 * Resolves `relPath` (empty for the root) inside the tree `rootTree`. Missing paths are
 * `NOT_FOUND`; every tree on the way is checked at its path (`INTEGRITY`, see `readTreeAt`).
 */
export async function lookupPath(reader: ObjectReader, rootTree: Sha256Hex, relPath: string): Promise<Lookup> {
  let tree = rootTree;
  let entries = await readTreeAt(reader, tree, '');
  const segments = relPath === '' || relPath === '.' ? [] : splitRelativePath(relPath.replace(/\/+$/, ''));
  for (let i = 0; i < segments.length; i += 1) {
    const entry = entries.find((e) => e.name === segments[i]);
    if (entry === undefined) throw new NotFoundError(`no ${relPath} in this checkpoint`, { data: { path: relPath } });
    if (entry.type !== 'dir') {
      if (i === segments.length - 1) return { kind: 'entry', entry };
      throw new NotFoundError(`no ${relPath} in this checkpoint (${segments.slice(0, i + 1).join('/')} is not a directory)`, {
        data: { path: relPath },
      });
    }
    tree = entry.tree;
    entries = await readTreeAt(reader, tree, segments.slice(0, i + 1).join('/'));
  }
  return { kind: 'dir', tree, entries };
}

/** Streams a file's verified bytes out of a checkpoint. */
export async function* readFileFromTree(reader: ObjectReader, rootTree: Sha256Hex, relPath: string): AsyncGenerator<Uint8Array> {
  const found = await lookupPath(reader, rootTree, relPath);
  if (found.kind !== 'entry' || found.entry.type !== 'file') {
    throw new InputError('INVALID_INPUT', `${relPath} is not a regular file in this checkpoint`, { data: { path: relPath } });
  }
  const file: FileEntry = found.entry;
  for (let i = 0; i < file.chunks.length; i += CAT_BATCH_CHUNKS) {
    const ids = file.chunks.slice(i, i + CAT_BATCH_CHUNKS);
    const got = await reader.readMany(ids);
    for (const id of ids) yield got.get(id) as Uint8Array;
  }
}
