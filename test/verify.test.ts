import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../src/blob-store/blob-store.js';
import { sha256Hex } from '../src/core/hash.js';
import type { PackInfo } from '../src/metadata/metadata-store.js';
import { packKey } from '../src/objects/pack-format.js';
import { readPackTrailer } from '../src/objects/pack-inspector.js';
import { uploadPack } from '../src/objects/pack-uploader.js';
import { PackWriter } from '../src/objects/pack-writer.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

/**
 * Offsets corrupted per pack: every one on local disk; every 5th on S3, where each iteration
 * costs a dozen HTTP round trips to s3rver (every offset there takes minutes). The footer and
 * trailer checksum are small and always covered in full.
 */
const STRIDE: Record<string, number> = { 'local-disk + sqlite': 1, 's3 + postgres': 5 };

async function overwrite(blobs: BlobStore, key: string, bytes: Uint8Array): Promise<void> {
  await blobs.delete(key);
  await blobs.put(key, bytes);
}

async function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'RESOLVED',
    (error: { code?: string }) => String(error.code),
  );
}

describe.each(BACKENDS)('verify on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let source: string;
  let packs: PackInfo[];

  beforeAll(async () => {
    b = await backend.open();
    ({ snapshots } = b);
    source = path.join(b.dir, 'source');
    const old = Date.UTC(2024, 0, 1);
    writeFile(source, 'a.bin', seededBytes(300, 'verify-a'), 0o644, old);
    // Compressible and over 4 KiB: stored with zstd, so the loop also corrupts compressed bytes.
    writeFile(source, 'b/log.txt', 'a line of a log file\n'.repeat(200), 0o644, old);
    writeFile(source, 'b/c.bin', seededBytes(200, 'verify-c'), 0o600, old);
    await snapshots.checkpoint({ dir: source, workspace: 'small' });
    packs = await b.meta.objects.listPacks();
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('a clean store verifies ok, with and without --read-data', async () => {
    expect(packs.map((p) => p.kind).sort()).toEqual(['data', 'tree']);
    expect((await b.meta.objects.objectsInPacks(packs.map((p) => p.id))).map((o) => o.codec)).toContain('zstd');
    const quick = await verifyStore(b, { readData: false });
    expect(quick).toMatchObject({ ok: true, checkpoints: 1, trees: 2, objects: 5, packs: 2, problems: [] });
    const full = await verifyStore(b, { readData: true });
    expect(full).toMatchObject({ ok: true, problems: [] });
    expect(full.bytesRead).toBeGreaterThanOrEqual(packs.reduce((n, p) => n + p.size, 0));
  });

  it('an unindexed pack is listed but does not make the store unhealthy', async () => {
    const writer = new PackWriter('data');
    const raw = Buffer.from('left behind by a failed checkpoint');
    writer.add(sha256Hex(raw), raw, raw.length, 'none');
    const pack = writer.seal();
    await uploadPack(b.blobs, pack);
    const report = await verifyStore(b, { readData: false });
    expect(report.ok).toBe(true);
    expect(report.problems).toEqual([expect.objectContaining({ kind: 'unindexed-pack', id: pack.id })]);
    await b.blobs.delete(packKey(pack.id));
  });

  it('an index row that disagrees with the pack trailer is an index-mismatch', async () => {
    const [row] = await b.meta.objects.objectsInPacks([packs.find((p) => p.kind === 'data')?.id ?? '']);
    if (row === undefined) throw new Error('no object row');
    await b.meta.db
      .updateTable('objects')
      .set({ raw_length: row.rawLength + 1 })
      .where('id', '=', row.id)
      .execute();
    try {
      const report = await verifyStore(b, { readData: false });
      expect(report.ok).toBe(false);
      expect(report.problems).toEqual([expect.objectContaining({ kind: 'index-mismatch', id: row.id })]);
    } finally {
      await b.meta.db.updateTable('objects').set({ raw_length: row.rawLength }).where('id', '=', row.id).execute();
    }
  });

  it('every single-byte corruption of a data pack and a tree pack is caught by verify --read-data and by restore, leaving the target untouched', async () => {
    const target = path.join(b.dir, 'target');
    writeFile(target, 'keep-me.txt', 'the previous content of the target', 0o644, Date.UTC(2023, 0, 1));
    const before = describeTree(target);
    const expected = describeTree(source);
    const stride = STRIDE[backend.name] ?? 1;
    let restoreFailures = 0;
    for (const pack of packs) {
      const key = packKey(pack.id);
      const original = Buffer.from(await b.blobs.get(key));
      const trailer = await readPackTrailer(b.blobs, pack.id, pack.size);
      const objectsEnd = Math.max(...trailer.objects.map((o) => o.offset + o.length));
      const objectsStart = Math.min(...trailer.objects.map((o) => o.offset));
      const tailStart = original.length - 64;
      for (let at = 0; at < original.length; at += at >= tailStart ? 1 : stride) {
        const corrupted = Buffer.from(original);
        corrupted[at] = (corrupted[at] ?? 0) ^ 0xff;
        await overwrite(b.blobs, key, corrupted);
        const report = await verifyStore(b, { readData: true });
        expect(report.ok, `verify --read-data misses a flipped byte at ${pack.kind} pack offset ${at}`).toBe(false);
        const code = await outcome(snapshots.restore({ dir: target, workspace: 'small', replace: true }));
        const inObjects = at >= objectsStart && at < objectsEnd;
        if (code === 'RESOLVED') {
          // Header and trailer bytes are not read by a restore (the index says where objects are): the result must be exact.
          expect(inObjects, `restore accepted a flipped byte inside an object at ${pack.kind} pack offset ${at}`).toBe(false);
          expect(describeTree(target)).toEqual(expected);
          fs.rmSync(target, { recursive: true });
          writeFile(target, 'keep-me.txt', 'the previous content of the target', 0o644, Date.UTC(2023, 0, 1));
        } else {
          expect(code, `offset ${at}`).toBe('INTEGRITY');
          expect(describeTree(target)).toEqual(before);
          restoreFailures += 1;
        }
      }
      await overwrite(b.blobs, key, original);
    }
    expect(restoreFailures).toBeGreaterThan(0);
    expect(fs.readdirSync(b.dir).filter((n) => n.includes('holdfast-'))).toEqual([]);
    expect((await verifyStore(b, { readData: true })).ok).toBe(true);
  }, 240_000);

  it('a deleted pack is reported as missing-pack', async () => {
    const data = packs.find((p) => p.kind === 'data') as PackInfo;
    await b.blobs.delete(packKey(data.id));
    for (const readData of [false, true]) {
      const report = await verifyStore(b, { readData });
      expect(report.ok).toBe(false);
      expect(report.problems).toEqual([expect.objectContaining({ kind: 'missing-pack', id: data.id })]);
    }
  });
});
