import { randomUUID } from 'node:crypto';
import type { Sha256Hex } from '../../core/hash.js';
import type { PackInfo } from '../../metadata/metadata-store.js';
import { ObjectReader } from '../../objects/object-reader.js';
import { ObjectWriter, type WrittenObjects } from '../../objects/object-writer.js';
import type { SnapshotDeps } from '../snapshot-deps.js';

/** The services a repack uses. */
export type RepackDeps = Pick<SnapshotDeps, 'blobs' | 'meta' | 'workers'>;

/** Raw bytes of live objects moved per group: one read, one writer, one commit transaction. */
export const REPACK_GROUP_RAW_BYTES = 64 * 1024 * 1024;

/** What {@link repackPacks} did. */
export interface RepackResult {
  /** Packs now condemned (sparse or small), their live objects moved. */
  readonly repacked: Sha256Hex[];
  /** New packs written. */
  readonly packsWritten: number;
  readonly objectsMoved: number;
}

/**
 * Moves the live objects of sparse or small packs into new, full-size packs, so the old ones
 * can be condemned and later deleted (DESIGN section 7). Per group of packs: the live objects are read through
 * the ObjectReader (every one verified against its id), written with an ObjectWriter (new
 * packs, durable before anything else changes), then ONE transaction condemns the old packs
 * and registers the new ones; registering re-points each object whose row still names a
 * condemned pack (see `insertPacksAndObjects`). Each new pack has an upload intent from before
 * its blob is written until that commit, so a concurrent GC leaves it alone. Killed before the
 * commit, the new packs are merely unindexed blobs for GC to remove once their intents are
 * older than MAX_CHECKPOINT_MS and the grace has passed; after it, the index is consistent. `isLive` decides which rows of the old packs move; the rest stay behind.
 */
export async function repackPacks(
  deps: RepackDeps,
  packs: readonly PackInfo[],
  isLive: (id: Sha256Hex) => boolean,
  at: number,
): Promise<RepackResult> {
  const reader = new ObjectReader(deps.blobs, deps.meta);
  const result = { repacked: [] as Sha256Hex[], packsWritten: 0, objectsMoved: 0 };
  for (const group of await groupByLiveBytes(deps, packs, isLive)) {
    const ids = group.rows.map((r) => r.id);
    const raws = await reader.readMany(ids);
    const writerId = `repack-${randomUUID()}`;
    const writer = new ObjectWriter(deps.blobs, deps.workers, (packId) =>
      deps.meta.gc.recordIntent({ packId, writerId, checkpointId: null }),
    );
    const packIds = group.packs.map((p) => p.id);
    let written: WrittenObjects;
    try {
      for (const row of group.rows) await writer.add(row.id, row.kind, raws.get(row.id) as Uint8Array);
      written = await writer.finish();
      await deps.meta.transaction(async (tx) => {
        await tx.objects.condemnPacks(packIds, at);
        await tx.objects.insertPacksAndObjects(written.packs, written.objects);
        await tx.gc.releaseIntents(writerId);
      });
    } catch (error) {
      await deps.meta.gc.releaseIntents(writerId).catch(() => undefined);
      throw error;
    }
    result.repacked.push(...packIds);
    result.packsWritten += written.packs.length;
    result.objectsMoved += written.objects.length;
  }
  return result;
}

interface Group {
  readonly packs: PackInfo[];
  readonly rows: Array<{ id: Sha256Hex; kind: PackInfo['kind'] }>;
  rawBytes: number;
}

/** Splits the packs into groups whose live objects total about {@link REPACK_GROUP_RAW_BYTES}. */
async function groupByLiveBytes(deps: RepackDeps, packs: readonly PackInfo[], isLive: (id: Sha256Hex) => boolean): Promise<Group[]> {
  const groups: Group[] = [];
  let current: Group | undefined;
  for (const pack of packs) {
    const rows = (await deps.meta.objects.objectsInPacks([pack.id])).filter((r) => isLive(r.id));
    const rawBytes = rows.reduce((n, r) => n + r.rawLength, 0);
    if (current === undefined || (current.rawBytes > 0 && current.rawBytes + rawBytes > REPACK_GROUP_RAW_BYTES)) {
      current = { packs: [], rows: [], rawBytes: 0 };
      groups.push(current);
    }
    current.packs.push(pack);
    current.rows.push(...rows.map((r) => ({ id: r.id, kind: r.kind })));
    current.rawBytes += rawBytes;
  }
  return groups;
}
