import type { BlobStore } from '../../blob-store/blob-store.js';
import { forEachLimit } from '../../core/concurrency.js';
import type { Sha256Hex } from '../../core/hash.js';
import { isHoldfastError } from '../../errors.js';
import type { MetadataStore, PackInfo } from '../../metadata/metadata-store.js';
import { ObjectReader } from '../../objects/object-reader.js';
import { type PackTrailer, packIdFromKey, packKey } from '../../objects/pack-format.js';
import { inspectPackBytes, readPackTrailer } from '../../objects/pack-inspector.js';
import { emptyReachable, walkReachable } from '../reachability.js';
import { assessDamage, type PackDamage } from './damage.js';

/** Packs checked at once (with `readData` each holds one whole pack, about 16 MiB, in memory). */
export const VERIFY_PACK_CONCURRENCY = 4;
/** Problems listed in a report; beyond this only the counts grow, so a lost store cannot exhaust memory. */
export const MAX_REPORTED_PROBLEMS = 10_000;
/** Object ids located per index query. */
const LOCATE_BATCH_IDS = 10_000;

/** What kind of damage verify found. `unindexed-pack` is garbage GC removes, not damage. */
export type VerifyProblemKind = 'missing-object' | 'missing-pack' | 'damaged-object' | 'damaged-pack' | 'index-mismatch' | 'unindexed-pack';

/** One finding: the object or pack id concerned and what is wrong with it. */
export interface VerifyProblem {
  readonly kind: VerifyProblemKind;
  readonly id: string;
  readonly detail: string;
}

/** Progress of a verify run, phase by phase. */
export interface VerifyProgress {
  readonly phase: 'trees' | 'index' | 'packs';
  readonly done: number;
  readonly total: number;
}

/** Options of {@link verifyStore}. */
export interface VerifyOptions {
  /** Also read every reachable pack whole and check every byte (slow: reads all stored data). */
  readonly readData: boolean;
  readonly onProgress?: (progress: VerifyProgress) => void;
}

/** What a verify run checked and found. */
export interface VerifyReport {
  /** Ready checkpoints whose trees were walked. */
  readonly checkpoints: number;
  /** Distinct tree objects reached. */
  readonly trees: number;
  /** Distinct objects (trees and chunks) reached. */
  readonly objects: number;
  /** Indexed (not condemned) packs checked against the blob store and their trailers. */
  readonly packs: number;
  /** Bytes read from the blob store. */
  readonly bytesRead: number;
  /** Findings, at most {@link MAX_REPORTED_PROBLEMS}; `problemCounts` has the full tally. */
  readonly problems: VerifyProblem[];
  readonly problemCounts: Readonly<Record<VerifyProblemKind, number>>;
  /**
   * Every pack known missing that still holds objects (recorded by this run or earlier ones),
   * with the ready checkpoints that reference them and the damaged paths in each; those
   * checkpoints are marked damaged (`Checkpoint.damage`), and marks that no longer hold are
   * cleared. A missing pack whose objects were all written again since is healed and absent.
   */
  readonly damage: readonly PackDamage[];
  /** True when nothing but unindexed packs (garbage awaiting GC) was found. */
  readonly ok: boolean;
}

/**
 * Checks that every ready checkpoint of every workspace can be restored (DESIGN section 2):
 *
 * - walks every checkpoint's trees, each read and verified (a bad tree is a problem, and the
 *   walk carries on around it);
 * - every referenced object must be in the index, in a pack that is not condemned;
 * - every indexed pack must exist in the blob store with its recorded size (one `list`, not
 *   a `stat` per pack), and blobs under `packs/` that no row names are listed as unindexed;
 * - every indexed pack's trailer (two ranged reads) must agree with the index rows pointing
 *   into it. All packs are checked, not a sample: a trailer is a few KiB per ~16 MiB pack,
 *   and a sample would miss exactly the one pack a rebuild would need.
 * - with `readData`, every pack holding a reachable object is read whole: its SHA-256 must
 *   equal its id and every object in it must decompress to bytes that hash to the object id.
 *
 * Packs found missing (absent from the listing, or answering `NOT_FOUND` to a read) are
 * recorded missing in the index, packs known missing that are back are recorded present, and
 * the damage is assessed and recorded ({@link assessDamage}). A missing pack none of whose
 * objects is still indexed in it (all written again by later checkpoints) is not a problem.
 *
 * Problems are collected, not thrown, so one report lists them all. Store outages reject.
 */
export async function verifyStore(
  deps: { readonly blobs: BlobStore; readonly meta: MetadataStore },
  options: VerifyOptions,
): Promise<VerifyReport> {
  const blobs = countingReads(deps.blobs);
  const problems = new Problems();
  const reader = new ObjectReader(blobs, deps.meta);

  const checkpoints = await deps.meta.checkpoints.listAll({ status: 'ready' });
  const reachable = emptyReachable();
  for (const [i, checkpoint] of checkpoints.entries()) {
    options.onProgress?.({ phase: 'trees', done: i, total: checkpoints.length });
    await walkReachable(reader, [checkpoint.rootTree as Sha256Hex], reachable, (tree, error) =>
      problems.add(
        isHoldfastError(error, 'RESTORE_INCOMPLETE') ? 'missing-object' : 'damaged-object',
        tree,
        `tree of checkpoint ${checkpoint.id}: ${describe(error)}`,
      ),
    );
  }

  const ids = [...reachable.trees, ...reachable.data];
  const reachablePacks = new Set<string>();
  // An object in a pack known missing is one `missing-pack` problem (and damage), not one per object.
  const condemned = new Set((await deps.meta.objects.listPacks()).filter((p) => p.condemnedAt !== null).map((p) => p.id));
  for (let i = 0; i < ids.length; i += LOCATE_BATCH_IDS) {
    options.onProgress?.({ phase: 'index', done: i, total: ids.length });
    const batch = ids.slice(i, i + LOCATE_BATCH_IDS);
    const found = await deps.meta.objects.locate(batch, { includeCondemned: true });
    for (const id of batch) {
      const loc = found.get(id);
      if (loc === undefined || condemned.has(loc.packId))
        problems.add('missing-object', id, 'referenced by a checkpoint but not in the index (or only in a condemned pack)');
      else reachablePacks.add(loc.packId);
    }
  }

  const stored = new Map<string, number>();
  for await (const { key, size } of blobs.list('packs/')) {
    const id = packIdFromKey(key);
    if (id !== undefined) stored.set(id, size);
  }
  const allPacks = await deps.meta.objects.listPacks();
  const known = new Set(allPacks.map((p) => p.id));
  for (const id of stored.keys())
    if (!known.has(id))
      problems.add('unindexed-pack', id, 'in the blob store but not in the index (left by a failed checkpoint; GC removes it)');
  const live = allPacks.filter((p) => p.condemnedAt === null);
  const absent = live.filter((p) => !stored.has(p.id)).map((p) => p.id);
  await deps.meta.objects.markPacksMissing(absent);
  await deps.meta.objects.markPacksPresent(live.filter((p) => p.missingAt !== null && stored.get(p.id) === p.size).map((p) => p.id));
  const holding = new Set((await deps.meta.objects.objectsInPacks(absent)).map((o) => o.packId));
  const present = live.filter((p) => {
    const size = stored.get(p.id);
    if (size === undefined && holding.has(p.id))
      problems.add('missing-pack', p.id, `indexed but missing from the ${deps.blobs.name} store`);
    else if (size !== undefined && size !== p.size)
      problems.add('damaged-pack', p.id, `is ${size} bytes in the blob store, the index says ${p.size}`);
    return size !== undefined;
  });

  let done = 0;
  await forEachLimit(present, VERIFY_PACK_CONCURRENCY, async (pack) => {
    const size = stored.get(pack.id) as number;
    const trailer =
      options.readData && reachablePacks.has(pack.id)
        ? await readWhole(blobs, pack, problems)
        : await readTrailer(blobs, pack, size, problems);
    if (trailer !== undefined) await compareWithIndex(deps.meta, pack, trailer, problems);
    else if (problems.has('missing-pack', pack.id)) await deps.meta.objects.markPacksMissing([pack.id]);
    done += 1;
    options.onProgress?.({ phase: 'packs', done, total: present.length });
  });
  const damage = (await assessDamage(deps, Date.now())).packs.filter((p) => p.objects > 0);

  return {
    checkpoints: checkpoints.length,
    trees: reachable.trees.size,
    objects: ids.length,
    packs: present.length,
    bytesRead: blobs.bytesRead,
    problems: problems.list,
    problemCounts: problems.counts,
    damage,
    ok: problems.damaging === 0,
  };
}

async function readTrailer(blobs: BlobStore, pack: PackInfo, size: number, problems: Problems): Promise<PackTrailer | undefined> {
  try {
    return await readPackTrailer(blobs, pack.id, size);
  } catch (error) {
    if (isHoldfastError(error, 'NOT_FOUND')) problems.add('missing-pack', pack.id, 'disappeared from the blob store during verify');
    else if (isHoldfastError(error, 'INTEGRITY')) problems.add('damaged-pack', pack.id, describe(error));
    else throw error;
    return undefined;
  }
}

async function readWhole(blobs: BlobStore, pack: PackInfo, problems: Problems): Promise<PackTrailer | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await blobs.get(packKey(pack.id));
  } catch (error) {
    if (!isHoldfastError(error, 'NOT_FOUND')) throw error;
    problems.add('missing-pack', pack.id, 'disappeared from the blob store during verify');
    return undefined;
  }
  const inspection = inspectPackBytes(pack.id, bytes);
  for (const d of inspection.damage) problems.add(d.target === 'pack' ? 'damaged-pack' : 'damaged-object', d.id, d.detail);
  return inspection.trailer;
}

/** Every index row pointing into `pack` must match its trailer entry exactly. */
async function compareWithIndex(meta: MetadataStore, pack: PackInfo, trailer: PackTrailer, problems: Problems): Promise<void> {
  if (trailer.kind !== pack.kind || trailer.objects.length !== pack.objectCount) {
    problems.add(
      'index-mismatch',
      pack.id,
      `index says ${pack.objectCount} ${pack.kind} objects, trailer lists ${trailer.objects.length} ${trailer.kind} objects`,
    );
  }
  const entries = new Map(trailer.objects.map((e) => [e.id, e]));
  for (const row of await meta.objects.objectsInPacks([pack.id])) {
    const e = entries.get(row.id);
    if (e === undefined) problems.add('index-mismatch', row.id, `indexed in pack ${pack.id}, whose trailer does not list it`);
    else if (
      e.offset !== row.offset ||
      e.length !== row.length ||
      e.rawLength !== row.rawLength ||
      e.codec !== row.codec ||
      e.blockOffset !== row.blockOffset ||
      e.kind !== row.kind
    ) {
      problems.add('index-mismatch', row.id, `index and trailer of pack ${pack.id} disagree on where or how it is stored`);
    }
  }
}

/** Collects problems, one per kind and id, listing at most {@link MAX_REPORTED_PROBLEMS}. */
class Problems {
  readonly list: VerifyProblem[] = [];
  readonly counts: Record<VerifyProblemKind, number> = {
    'missing-object': 0,
    'missing-pack': 0,
    'damaged-object': 0,
    'damaged-pack': 0,
    'index-mismatch': 0,
    'unindexed-pack': 0,
  };
  damaging = 0;
  private readonly seen = new Set<string>();

  /** Whether a problem of `kind` about `id` was found. */
  has(kind: VerifyProblemKind, id: string): boolean {
    return this.seen.has(`${kind} ${id}`);
  }

  add(kind: VerifyProblemKind, id: string, detail: string): void {
    const key = `${kind} ${id}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.counts[kind] += 1;
    if (kind !== 'unindexed-pack') this.damaging += 1;
    if (this.list.length < MAX_REPORTED_PROBLEMS) this.list.push({ kind, id, detail });
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The store with `get` counting the bytes it returns; everything else passes straight through. */
function countingReads(inner: BlobStore): BlobStore & { readonly bytesRead: number } {
  let bytesRead = 0;
  return {
    name: inner.name,
    get bytesRead() {
      return bytesRead;
    },
    put: (key, body, options) => inner.put(key, body, options),
    async get(key, range) {
      const bytes = await inner.get(key, range);
      bytesRead += bytes.byteLength;
      return bytes;
    },
    getStream: (key, range) => inner.getStream(key, range),
    stat: (key) => inner.stat(key),
    list: (prefix) => inner.list(prefix),
    delete: (key) => inner.delete(key),
    close: () => inner.close(),
  };
}
