import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../src/core/hash.js';
import { packKey } from '../src/objects/pack-format.js';
import { uploadPack } from '../src/objects/pack-uploader.js';
import { PackWriter, type SealedPack } from '../src/objects/pack-writer.js';
import { collectGarbage, type GcOptions } from '../src/snapshot/gc/gc.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const KEEP_TWO = { keepLast: 2, keepDaily: 0 };
const OLD = Date.UTC(2024, 0, 1);

describe.each(BACKENDS)('gc on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;

  beforeEach(async () => {
    b = await backend.open();
    ({ snapshots } = b);
  }, 60_000);
  afterEach(async () => {
    await b?.cleanup();
  });

  const gc = (options: GcOptions) => collectGarbage(b, options);

  /** Five versions of one workspace: a shared 200 KB file, and a 50 KB file unique to each version. */
  async function fiveVersions(): Promise<Array<{ id: string; dir: string }>> {
    const out: Array<{ id: string; dir: string }> = [];
    for (let v = 0; v < 5; v += 1) {
      const dir = path.join(b.dir, `v${v}`);
      writeFile(dir, 'shared.bin', seededBytes(200_000, 'shared'), 0o644, OLD);
      writeFile(dir, 'unique.bin', seededBytes(50_000, `unique-${v}`), 0o644, OLD);
      const result = await snapshots.checkpoint({ dir, workspace: 'ws' });
      out.push({ id: result.checkpoint.id, dir });
    }
    return out;
  }

  async function storedKeys(): Promise<Map<string, number>> {
    const keys = new Map<string, number>();
    for await (const { key, size } of b.blobs.list('')) keys.set(key, size);
    return keys;
  }

  async function expectRestores(versions: ReadonlyArray<{ id: string; dir: string }>): Promise<void> {
    for (const v of versions) {
      const target = path.join(b.dir, `restore-${v.id}`);
      await snapshots.restore({ dir: target, workspace: 'ws', checkpoint: v.id });
      expect(describeTree(target)).toEqual(describeTree(v.dir));
      fs.rmSync(target, { recursive: true });
    }
  }

  async function orphanPack(seed: string): Promise<SealedPack> {
    const writer = new PackWriter('data');
    const raw = Buffer.from(`left behind by a failed checkpoint ${seed}`);
    writer.add(sha256Hex(raw), raw, raw.length, 'none');
    const pack = writer.seal();
    await uploadPack(b.blobs, pack);
    return pack;
  }

  it('forgotten checkpoints: their unique packs are condemned, deleted only after grace; shared chunks survive', async () => {
    const versions = await fiveVersions();
    const t0 = Date.now();
    const first = await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 });
    // v0's data pack also holds the shared chunk, which stays live: it is neither condemned nor
    // sparse. v0's tree pack and v1/v2's data and tree packs are condemned.
    expect(first).toMatchObject({ forgotten: 3, packsCondemned: 5, packsRepacked: 0, packsDeleted: 0, dryRun: false });
    expect((await snapshots.log('ws')).map((c) => c.id)).toEqual([versions[4]?.id, versions[3]?.id]);
    const condemned = (await b.meta.objects.listPacks()).filter((p) => p.condemnedAt !== null);
    expect(condemned).toHaveLength(5);
    for (const p of condemned) expect(await b.blobs.stat(packKey(p.id))).toBeDefined();
    await expectRestores(versions.slice(3));

    const early = await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 + DAY - HOUR });
    expect(early).toMatchObject({ forgotten: 0, packsCondemned: 0, packsDeleted: 0 });

    const later = await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 + DAY + HOUR });
    expect(later).toMatchObject({ forgotten: 0, packsCondemned: 0, packsDeleted: 5, orphanPacksDeleted: 0 });
    expect(later.bytesFreed).toBe(condemned.reduce((n, p) => n + p.size, 0));
    for (const p of condemned) expect(await b.blobs.stat(packKey(p.id))).toBeUndefined();
    expect(await b.meta.objects.objectsInPacks(condemned.map((p) => p.id))).toEqual([]);
    expect(await b.meta.gc.unfinishedDeletions()).toEqual([]);
    expect(await b.meta.objects.findMissing([sha256Hex(seededBytes(200_000, 'shared'))])).toEqual(new Set());
    await expectRestores(versions.slice(3));
    expect((await verifyStore(b, { readData: true })).ok).toBe(true);
  }, 120_000);

  it('a sparse pack is repacked: its live objects move to a new pack and stay restorable', async () => {
    const dir = path.join(b.dir, 'sparse');
    for (let i = 0; i < 4; i += 1) writeFile(dir, `f${i}.bin`, seededBytes(100_000, `sparse-${i}`), 0o644, OLD);
    await snapshots.checkpoint({ dir, workspace: 'ws' });
    const [sparse] = (await b.meta.objects.listPacks()).filter((p) => p.kind === 'data');
    for (let i = 1; i < 4; i += 1) fs.rmSync(path.join(dir, `f${i}.bin`));
    const kept = await snapshots.checkpoint({ dir, workspace: 'ws' });
    const report = await gc({ retention: { keepLast: 1, keepDaily: 0 }, graceMs: 0 });
    // The old tree pack is empty and condemned; the data pack keeps 1 of 4 chunks and is repacked.
    expect(report).toMatchObject({ forgotten: 1, packsRepacked: 1, packsCondemned: 1, packsDeleted: 2 });
    expect(await b.blobs.stat(packKey(sparse?.id ?? ''))).toBeUndefined();
    const live = await b.meta.objects.locate([sha256Hex(seededBytes(100_000, 'sparse-0'))]);
    expect([...live.values()][0]?.packId).not.toBe(sparse?.id);
    const target = path.join(b.dir, 'sparse-restored');
    await snapshots.restore({ dir: target, workspace: 'ws', checkpoint: kept.checkpoint.id });
    expect(describeTree(target)).toEqual(describeTree(dir));
    expect((await verifyStore(b, { readData: true })).ok).toBe(true);
    // Nothing is sparse any more: a second run has nothing to do.
    expect(await gc({ retention: { keepLast: 1, keepDaily: 0 }, graceMs: 0 })).toMatchObject({
      packsRepacked: 0,
      packsCondemned: 0,
      packsDeleted: 0,
    });
  }, 120_000);

  it('a dry run reports what it would do and changes nothing', async () => {
    await fiveVersions();
    await orphanPack('dry');
    const snapshot = async () => ({
      blobs: await storedKeys(),
      packs: await b.meta.objects.listPacks(),
      checkpoints: await b.meta.checkpoints.listAll(),
      queue: await b.meta.gc.listQueue(),
      journal: await b.meta.db.selectFrom('deletion_journal').selectAll().execute(),
    });
    const before = await snapshot();
    const report = await gc({ retention: KEEP_TWO, graceMs: 0, dryRun: true });
    expect(report).toMatchObject({
      dryRun: true,
      forgotten: 3,
      packsCondemned: 5,
      packsDeleted: 5,
      orphanPacksDeleted: 1,
      orphanPacksQueued: 0,
    });
    expect(report.bytesFreed).toBeGreaterThan(0);
    expect(await snapshot()).toEqual(before);
  }, 120_000);

  it('unindexed packs are deleted only after they have been seen unindexed for longer than the grace', async () => {
    await fiveVersions();
    const orphan = await orphanPack('late');
    const rescued = await orphanPack('rescued');
    const t0 = Date.now();
    expect(await gc({ graceMs: DAY, now: t0 })).toMatchObject({ orphanPacksQueued: 2, orphanPacksDeleted: 0 });
    expect(await gc({ graceMs: DAY, now: t0 + DAY - HOUR })).toMatchObject({ orphanPacksQueued: 2, orphanPacksDeleted: 0 });
    expect(await b.blobs.stat(packKey(orphan.id))).toBeDefined();
    // A pack that gets indexed meanwhile (its checkpoint committed late) is no orphan any more.
    const objects = rescued.objects.map((o) => ({ ...o, packId: rescued.id }));
    await b.meta.objects.insertPacksAndObjects([{ id: rescued.id, kind: 'data', size: rescued.size, objectCount: 1 }], objects);
    const later = await gc({ graceMs: DAY, now: t0 + DAY + HOUR });
    expect(later).toMatchObject({ orphanPacksQueued: 0, orphanPacksDeleted: 1 });
    expect(later.bytesFreed).toBe(orphan.size);
    expect(await b.blobs.stat(packKey(orphan.id))).toBeUndefined();
    expect(await b.blobs.stat(packKey(rescued.id))).toBeDefined();
    expect(await b.meta.gc.listQueue()).toEqual([]);
  }, 120_000);

  it('a deletion cut short after its journal entry is finished by the next run; one whose pack was revived is called off', async () => {
    const versions = await fiveVersions();
    const t0 = Date.now();
    await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 });
    const [cut, revived] = (await b.meta.objects.listPacks()).filter((p) => p.condemnedAt !== null);
    if (cut === undefined || revived === undefined) throw new Error('expected condemned packs');
    // A GC killed right after deleting the blob; another killed after journaling a pack that a checkpoint then revived.
    await b.meta.gc.startDeletion({ packId: cut.id, key: packKey(cut.id) }, t0);
    await b.blobs.delete(packKey(cut.id));
    await b.meta.gc.startDeletion({ packId: revived.id, key: packKey(revived.id) }, t0);
    await b.meta.objects.revivePacks([revived.id]);
    const next = await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 + HOUR });
    expect(next).toMatchObject({ packsDeleted: 1, bytesFreed: 0 });
    expect(await b.meta.gc.unfinishedDeletions()).toEqual([]);
    expect((await b.meta.objects.listPacks()).map((p) => p.id)).not.toContain(cut.id);
    expect(await b.blobs.stat(packKey(revived.id))).toBeDefined();
    await expectRestores(versions.slice(3));
  }, 120_000);

  it('content checkpointed again after its packs were condemned is revived by re-registration and survives the sweep', async () => {
    const versions = await fiveVersions();
    const t0 = Date.now();
    await gc({ retention: KEEP_TWO, graceMs: DAY, now: t0 });
    // v1's content comes back: its objects count as missing, so the checkpoint writes them again.
    const again = await snapshots.checkpoint({ dir: versions[1]?.dir ?? '', workspace: 'ws' });
    expect(again.stats.objectsWritten).toBeGreaterThan(0);
    const report = await gc({ retention: { keepLast: 3, keepDaily: 0 }, graceMs: DAY, now: t0 + DAY + HOUR });
    expect(report.forgotten).toBe(0);
    await expectRestores([...versions.slice(3), { id: again.checkpoint.id, dir: versions[1]?.dir ?? '' }]);
    expect((await verifyStore(b, { readData: true })).ok).toBe(true);
  }, 120_000);
});
