import type { Sha256Hex } from '../../core/hash.js';
import type { MetadataTransaction } from '../../metadata/metadata-store.js';
import type { WrittenObjects } from '../../objects/object-writer.js';
import type { ScannedDir } from '../../workspace-fs/scan.js';
import type { SettledSubtrees } from '../workspace-source.js';
import type { FileIds } from './tree-builder.js';

/**
 * The commit found a referenced object in a pack known missing (see {@link insertRefusingLost}).
 * Internal to the checkpoint: it retries once and reports a second loss as `STORE_UNAVAILABLE`.
 */
export class LostObjects extends Error {
  constructor(readonly packs: readonly string[]) {
    super(`referenced objects are in missing packs ${packs.join(', ')}`);
  }
}

/** What a checkpoint about to commit wrote and references. */
export interface CommitContent {
  readonly written: Pick<WrittenObjects, 'packs' | 'objects'>;
  /** Content ids of every included file. */
  readonly ids: ReadonlyMap<string, FileIds>;
  /** Every tree it references: encoded by it or reused from the tree cache. */
  readonly treeIds: readonly Sha256Hex[];
  /** Subtrees referenced whole, whose files and trees below the top are in neither list. */
  readonly settled?: SettledSubtrees;
}

/** Every object id `content` references: each included file's chunks and every tree. */
function* referencedIds(content: CommitContent): Generator<string> {
  for (const file of content.ids.values()) yield* file.chunks;
  yield* content.treeIds;
  const { settled } = content;
  if (settled === undefined) return;
  const below = function* (dir: ScannedDir): Generator<string> {
    for (const child of dir.children) {
      if (child.type === 'file') {
        const ids = settled.ids.get(child.path);
        // Ids the source cannot give (a damaged cache line) cannot be shown clear of the lost
        // packs: the checkpoint is captured again, every file read.
        if (ids === undefined) throw new LostObjects([]);
        yield* ids.chunks;
      } else if (child.type === 'dir') {
        const tree = settled.trees.get(child);
        if (tree !== undefined) yield tree;
        yield* below(child);
      }
    }
  };
  for (const dir of settled.dirs) yield* below(dir);
}

/** Object id -> pack of every row still pointing into a pack known missing (one indexed query when none is, the normal case). */
async function lostObjects(tx: MetadataTransaction): Promise<Map<string, string>> {
  const missing = await tx.objects.missingPackIds();
  if (missing.length === 0) return new Map();
  return new Map((await tx.objects.objectsInPacks(missing)).map((o) => [o.id, o.packId]));
}

/**
 * Registers the checkpoint's packs and objects, then throws {@link LostObjects} when an
 * object it references (and did not write itself: its own rows were just re-pointed by the
 * insert) still points into a pack known missing. A missing pack some of whose objects this
 * checkpoint wrote again is flagged for a new damage assessment (older checkpoints may be
 * whole again), which the next presence sweep makes.
 */
export async function insertRefusingLost(tx: MetadataTransaction, captured: CommitContent): Promise<void> {
  const before = await lostObjects(tx);
  await tx.objects.insertPacksAndObjects(captured.written.packs, captured.written.objects);
  if (before.size === 0) return;
  const lost = await lostObjects(tx);
  const healed = new Set<string>();
  for (const [id, pack] of before) if (!lost.has(id)) healed.add(pack);
  if (healed.size > 0) await tx.objects.markDamageChecked([...healed], null);
  if (lost.size === 0) return;
  const packs = new Set<string>();
  for (const id of referencedIds(captured)) {
    const pack = lost.get(id);
    if (pack !== undefined) packs.add(pack);
  }
  if (packs.size > 0) throw new LostObjects([...packs].sort());
}
