import type { BlobStore } from '../blob-store/blob-store.js';
import { forEachLimit } from '../core/concurrency.js';
import type { Sha256Hex } from '../core/hash.js';
import { isHoldfastError } from '../errors.js';
import type { MetadataStore, ObjectRecord, PackRecord } from '../metadata/metadata-store.js';
import { type PackTrailer, packIdFromKey, packKey } from './pack-format.js';
import { inspectPackBytes, readPackTrailer } from './pack-inspector.js';

/** Packs read at once (with `verifyPacks` each holds one whole pack, about 16 MiB). */
export const REBUILD_CONCURRENCY = 4;
/** Packs registered per index transaction. */
export const REBUILD_COMMIT_PACKS = 200;

/** Options of {@link rebuildIndex}. */
export interface RebuildOptions {
  /** Read each pack whole and check its hash and every object before registering it. */
  readonly verifyPacks?: boolean;
  readonly onProgress?: (done: number, total: number) => void;
}

/** What a rebuild did. */
export interface RebuildReport {
  /** Pack blobs found under `packs/`. */
  readonly packsScanned: number;
  /** Packs that were not in the index before and now are. */
  readonly packsRegistered: number;
  /** Object rows offered to the index (existing rows are left as they are). */
  readonly objectsRegistered: number;
  /** Packs left alone because GC has condemned them (re-registering would revive them). */
  readonly packsSkippedCondemned: number;
  /** Packs that could not be read or failed their checks; none of their objects were registered. */
  readonly damaged: Array<{ readonly packId: Sha256Hex; readonly detail: string }>;
}

/**
 * Rebuilds the object index from the blob store alone (DESIGN section 2): lists `packs/`,
 * reads each pack's footer and trailer with two ranged reads, and registers the pack and its
 * objects. Idempotent: rows already present are kept (the index's first-writer-wins rule),
 * so running it on a healthy index changes nothing. Packs GC has condemned are skipped, so a
 * rebuild never undoes a GC decision. A pack whose trailer is damaged (or, with
 * `verifyPacks`, whose bytes do not hash to its id or hold a bad object) is reported and not
 * registered. Rebuild and GC must not run at the same time.
 */
export async function rebuildIndex(
  deps: { readonly blobs: BlobStore; readonly meta: MetadataStore },
  options: RebuildOptions = {},
): Promise<RebuildReport> {
  const listed: Array<{ id: Sha256Hex; size: number }> = [];
  for await (const { key, size } of deps.blobs.list('packs/')) {
    const id = packIdFromKey(key);
    if (id !== undefined) listed.push({ id, size });
  }
  const existing = new Map((await deps.meta.objects.listPacks()).map((p) => [p.id, p]));
  const todo = listed.filter((p) => (existing.get(p.id)?.condemnedAt ?? null) === null);
  const damaged: RebuildReport['damaged'] = [];
  let pending: Array<{ pack: PackRecord; objects: ObjectRecord[] }> = [];
  let packsRegistered = 0;
  let objectsRegistered = 0;
  let done = 0;

  const flush = async (): Promise<void> => {
    const batch = pending;
    pending = [];
    if (batch.length === 0) return;
    await deps.meta.objects.insertPacksAndObjects(
      batch.map((b) => b.pack),
      batch.flatMap((b) => b.objects),
    );
    packsRegistered += batch.filter((b) => !existing.has(b.pack.id)).length;
    objectsRegistered += batch.reduce((n, b) => n + b.objects.length, 0);
  };

  // Reading runs concurrently; registering is serialised through `flush`, one transaction per batch.
  let committing: Promise<void> = Promise.resolve();
  await forEachLimit(todo, REBUILD_CONCURRENCY, async ({ id, size }) => {
    const trailer = await readTrailer(deps.blobs, id, size, options.verifyPacks === true, damaged);
    if (trailer !== undefined) {
      const pack: PackRecord = { id, kind: trailer.kind, size, objectCount: trailer.objects.length };
      const objects = trailer.objects.map((o): ObjectRecord => {
        const row = { id: o.id, packId: id, kind: o.kind, offset: o.offset, length: o.length, rawLength: o.rawLength, codec: o.codec };
        return o.blockOffset === undefined ? row : { ...row, blockOffset: o.blockOffset };
      });
      pending.push({ pack, objects });
      if (pending.length >= REBUILD_COMMIT_PACKS) {
        committing = committing.then(flush);
        await committing;
      }
    }
    done += 1;
    options.onProgress?.(done, todo.length);
  });
  committing = committing.then(flush);
  await committing;
  return { packsScanned: listed.length, packsRegistered, objectsRegistered, packsSkippedCondemned: listed.length - todo.length, damaged };
}

async function readTrailer(
  blobs: BlobStore,
  id: Sha256Hex,
  size: number,
  verify: boolean,
  damaged: RebuildReport['damaged'],
): Promise<PackTrailer | undefined> {
  try {
    if (!verify) return await readPackTrailer(blobs, id, size);
    const inspection = inspectPackBytes(id, await blobs.get(packKey(id)));
    const first = inspection.damage[0];
    if (first === undefined) return inspection.trailer;
    damaged.push({ packId: id, detail: first.detail });
    return undefined;
  } catch (error) {
    // A pack deleted between the listing and the read (GC) is simply no longer there.
    if (isHoldfastError(error, 'NOT_FOUND')) return undefined;
    if (!isHoldfastError(error, 'INTEGRITY')) throw error;
    damaged.push({ packId: id, detail: error.message });
    return undefined;
  }
}
