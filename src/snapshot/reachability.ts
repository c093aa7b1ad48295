import type { Sha256Hex } from '../core/hash.js';
import { decodeTree } from '../core/tree.js';
import { isHoldfastError } from '../errors.js';
import type { ObjectReader } from '../objects/object-reader.js';

/** Trees read per batched, coalesced read while walking. */
export const WALK_BATCH_TREES = 1000;

/** Everything reachable from a set of root trees. */
export interface Reachable {
  /** Tree objects visited (unreadable ones included, so they are not retried). */
  readonly trees: Set<Sha256Hex>;
  /** File chunks the readable trees name. */
  readonly data: Set<Sha256Hex>;
}

/** An empty {@link Reachable}, to accumulate several walks into. */
export function emptyReachable(): Reachable {
  return { trees: new Set(), data: new Set() };
}

/**
 * Walks the trees under `roots` breadth first, reading each distinct tree once (unchanged
 * subtrees shared between checkpoints are skipped), and adds every tree and chunk id to
 * `into`. Trees are read and verified by `reader`.
 *
 * Without `onUnreadable` the first tree that cannot be read or decoded rejects the walk: GC
 * must never decide liveness from a partial walk. With it, a failing batch is retried tree by
 * tree, each unreadable tree is reported, and the walk carries on (verify lists everything).
 * Errors other than `INTEGRITY` / `RESTORE_INCOMPLETE` (the store being down) always reject.
 */
export async function walkReachable(
  reader: ObjectReader,
  roots: Iterable<Sha256Hex>,
  into: Reachable = emptyReachable(),
  onUnreadable?: (tree: Sha256Hex, error: unknown) => void,
): Promise<Reachable> {
  let level = [...new Set(roots)].filter((id) => !into.trees.has(id));
  while (level.length > 0) {
    for (const id of level) into.trees.add(id);
    const next: Sha256Hex[] = [];
    for (let i = 0; i < level.length; i += WALK_BATCH_TREES) {
      const batch = level.slice(i, i + WALK_BATCH_TREES);
      for (const [id, bytes] of await readBatch(reader, batch, onUnreadable)) {
        let entries: ReturnType<typeof decodeTree>;
        try {
          entries = decodeTree(id, bytes);
        } catch (error) {
          if (onUnreadable === undefined) throw error;
          onUnreadable(id, error);
          continue;
        }
        for (const entry of entries) {
          if (entry.type === 'dir' && !into.trees.has(entry.tree)) {
            into.trees.add(entry.tree);
            next.push(entry.tree);
          } else if (entry.type === 'file') {
            for (const chunk of entry.chunks) into.data.add(chunk);
          }
        }
      }
    }
    level = next;
  }
  return into;
}

async function readBatch(
  reader: ObjectReader,
  ids: Sha256Hex[],
  onUnreadable: ((tree: Sha256Hex, error: unknown) => void) | undefined,
): Promise<Map<Sha256Hex, Uint8Array>> {
  try {
    return await reader.readMany(ids);
  } catch (error) {
    if (onUnreadable === undefined || !isDataProblem(error)) throw error;
  }
  const out = new Map<Sha256Hex, Uint8Array>();
  for (const id of ids) {
    try {
      out.set(id, await reader.read(id));
    } catch (error) {
      if (!isDataProblem(error)) throw error;
      onUnreadable(id, error);
    }
  }
  return out;
}

/** True for the errors that mean "these bytes are missing or wrong", as opposed to "the store is down". */
export function isDataProblem(error: unknown): boolean {
  return isHoldfastError(error, 'INTEGRITY') || isHoldfastError(error, 'RESTORE_INCOMPLETE');
}
