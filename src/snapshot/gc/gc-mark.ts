import type { Sha256Hex } from '../../core/hash.js';
import type { Checkpoint, MetadataStore, PackInfo } from '../../metadata/metadata-store.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import { isDataProblem, type Reachable, walkReachable } from '../reachability.js';

/** Object-index rows read per page while counting live objects per pack. */
export const SCAN_PAGE_ROWS = 10_000;

/**
 * Where GC finds live objects besides retained checkpoints. Collection files and trash
 * (DESIGN section 10) register a source here when they exist; GC walks every tree a source
 * names and keeps every object it names, exactly as for checkpoints.
 */
export interface LiveRootSource {
  /** Shown in errors, e.g. `collections`. */
  readonly name: string;
  /** Root trees and individual objects that must survive this GC run. */
  roots(): Promise<{ readonly trees: readonly Sha256Hex[]; readonly objects: readonly Sha256Hex[] }>;
}

/** Walks the trees of retained ready checkpoints and of every extra root source; returns the live ids and the checkpoints walked. */
export async function markLive(
  reader: ObjectReader,
  retained: readonly Checkpoint[],
  sources: readonly LiveRootSource[],
): Promise<{ live: Reachable; marked: Set<string> }> {
  const live: Reachable = { trees: new Set(), data: new Set() };
  const marked = new Set<string>();
  for (const c of retained) {
    if (c.status !== 'ready' || c.rootTree === null) continue;
    marked.add(c.id);
    await walkReachable(reader, [c.rootTree], live);
  }
  for (const source of sources) {
    const roots = await source.roots();
    await walkReachable(reader, roots.trees, live);
    for (const id of roots.objects) live.data.add(id);
  }
  return { live, marked };
}

/** Live rows of one pack and their stored bytes. */
export interface Usage {
  liveRows: number;
  liveBytes: number;
}

/**
 * Live rows and their stored bytes per listed pack, from one paged pass over the object index.
 * Members of a solid block share its stored range, so a block counts once, in proportion to
 * the raw bytes of its live members: a block whose members are mostly dead makes its pack
 * sparse just as dead lone objects do.
 */
export async function liveUsage(
  meta: MetadataStore,
  packs: readonly PackInfo[],
  isLive: (id: Sha256Hex) => boolean,
): Promise<Map<string, Usage>> {
  const usage = new Map<string, Usage>(packs.map((p) => [p.id, { liveRows: 0, liveBytes: 0 }]));
  const blocks = new Map<string, { usage: Usage; length: number; liveRaw: number; totalRaw: number }>();
  let after: string | undefined;
  for (;;) {
    const page = await meta.objects.scanObjects(after, SCAN_PAGE_ROWS);
    for (const row of page) {
      const u = usage.get(row.packId);
      if (u === undefined) continue;
      const live = isLive(row.id);
      if (live) u.liveRows += 1;
      if (row.blockOffset === undefined) {
        if (live) u.liveBytes += row.length;
        continue;
      }
      const key = `${row.packId}:${row.offset}`;
      const block = blocks.get(key) ?? { usage: u, length: row.length, liveRaw: 0, totalRaw: 0 };
      blocks.set(key, block);
      block.totalRaw += row.rawLength;
      if (live) block.liveRaw += row.rawLength;
    }
    if (page.length < SCAN_PAGE_ROWS) break;
    after = page.at(-1)?.id;
  }
  for (const b of blocks.values()) if (b.liveRaw > 0) b.usage.liveBytes += (b.length * b.liveRaw) / Math.max(1, b.totalRaw);
  return usage;
}

/**
 * Walks checkpoints that became ready after the mark, adding their objects to `live`. One
 * that reuses an object this run just condemned cannot be read yet (condemned objects count
 * as missing), so those packs are revived first and the walk retried.
 */
export async function markNewCheckpoints(
  meta: MetadataStore,
  reader: ObjectReader,
  marked: Set<string>,
  live: Reachable,
  condemned: Sha256Hex[],
): Promise<void> {
  const fresh = (await meta.checkpoints.listAll({ status: 'ready' })).filter((c) => !marked.has(c.id) && c.rootTree !== null);
  if (fresh.length === 0) return;
  const roots = fresh.map((c) => c.rootTree as Sha256Hex);
  // Walk into a copy of the visited trees, so a walk cut short by a condemned tree can be redone.
  let trial: Reachable = { trees: new Set(live.trees), data: live.data };
  try {
    await walkReachable(reader, roots, trial);
  } catch (error) {
    if (!isDataProblem(error)) throw error;
    await meta.objects.revivePacks(condemned);
    trial = { trees: new Set(live.trees), data: live.data };
    await walkReachable(reader, roots, trial);
  }
  for (const id of trial.trees) live.trees.add(id);
}
