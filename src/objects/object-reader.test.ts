import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBlobStore } from '../blob-store/drivers/local-disk.js';
import { sha256Hex } from '../core/hash.js';
import { type MetadataStore, type ObjectRecord, openMetadataStore } from '../metadata/metadata-store.js';
import { ContentWorkers, MIN_COMPRESS_BYTES } from './content-workers.js';
import { ObjectReader } from './object-reader.js';
import { ObjectWriter } from './object-writer.js';
import { MAX_BLOCK_RAW_BYTES } from './pack-format.js';
import { uploadPack } from './pack-uploader.js';
import { PackWriter } from './pack-writer.js';

const zstd = createRequire(import.meta.url)('zstd-napi') as { compress(input: Uint8Array): Buffer };

/** Small text objects that compress well together: what solid blocks are for. */
function smallObjects(count: number): Buffer[] {
  return Array.from({ length: count }, (_, i) =>
    Buffer.from(`export function helper${i}(value) {\n  return value * ${i} + ${'x'.repeat(i % 50)};\n}\n`.repeat(20)),
  );
}

describe('ObjectReader over solid blocks', () => {
  let dir: string;
  let blobs: LocalDiskBlobStore;
  let meta: MetadataStore;
  let workers: ContentWorkers;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-reader-'));
    blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
    meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
    workers = new ContentWorkers(1);
  });
  afterAll(async () => {
    await workers.close();
    await meta.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Writes `raws` through an ObjectWriter and registers what it wrote. */
  async function write(raws: readonly Buffer[]): Promise<ObjectRecord[]> {
    const writer = new ObjectWriter(blobs, workers, async () => {});
    for (const raw of raws) await writer.add(sha256Hex(raw), 'data', raw);
    const written = await writer.finish();
    await meta.objects.insertPacksAndObjects(written.packs, written.objects);
    return written.objects;
  }

  /** Uploads a pack holding `stored` as one block and registers `rows` (which may lie) for it. */
  async function plantBlock(stored: Uint8Array, rows: ReadonlyArray<Omit<ObjectRecord, 'packId' | 'offset' | 'length'>>): Promise<void> {
    const writer = new PackWriter('data');
    writer.addBlock(
      rows.map((r) => ({ id: r.id, rawLength: r.rawLength, blockOffset: r.blockOffset ?? 0 })),
      stored,
    );
    const pack = writer.seal();
    await uploadPack(blobs, pack);
    await meta.objects.insertPacksAndObjects(
      [{ id: pack.id, kind: 'data', size: pack.size, objectCount: rows.length }],
      rows.map((r) => ({ ...r, packId: pack.id, offset: 8, length: stored.byteLength })),
    );
  }

  const codeOf = (promise: Promise<unknown>): Promise<unknown> =>
    promise.then(
      () => 'resolved',
      (e: { code?: string }) => e.code,
    );

  it('stores small objects as block members, much smaller than raw, and reads every one back verified', async () => {
    const raws = smallObjects(200);
    const rows = await write(raws);
    const members = rows.filter((r) => r.blockOffset !== undefined);
    expect(members.length).toBe(raws.length);
    const blockBytes = new Set(members.map((r) => `${r.packId}:${r.offset}:${r.length}`));
    const stored = [...blockBytes].reduce((n, key) => n + Number(key.split(':')[2]), 0);
    const raw = raws.reduce((n, r) => n + r.length, 0);
    expect(stored).toBeLessThan(raw / 5);

    const located = await meta.objects.locate(rows.map((r) => r.id));
    expect(located.get(members[3]?.id as string)?.blockOffset).toBe(members[3]?.blockOffset);
    const read = await new ObjectReader(blobs, meta).readMany(raws.map((r) => sha256Hex(r)));
    for (const r of raws) expect(Buffer.from(read.get(sha256Hex(r)) as Uint8Array)).toEqual(r);
  });

  it('compresses trees under the block threshold too', async () => {
    const tree = Buffer.from(JSON.stringify({ v: 1, entries: [{ type: 'file', name: 'a'.repeat(500) }] }).repeat(4));
    expect(tree.length).toBeLessThan(MIN_COMPRESS_BYTES);
    const writer = new ObjectWriter(blobs, workers, async () => {});
    await writer.add(sha256Hex(tree), 'tree', tree);
    const written = await writer.finish();
    expect(written.objects).toMatchObject([{ kind: 'tree', codec: 'zstd', blockOffset: 0 }]);
    expect(written.stats.storedBytesWritten).toBeLessThan(tree.length / 3);
  });

  it('a member whose recorded slice reaches past its block is INTEGRITY', async () => {
    const raw = Buffer.from('lying block member '.repeat(30));
    await plantBlock(zstd.compress(raw), [
      { id: sha256Hex(raw.subarray(0, 100)), kind: 'data', rawLength: 100, codec: 'zstd', blockOffset: raw.length - 50 },
    ]);
    expect(await codeOf(new ObjectReader(blobs, meta).read(sha256Hex(raw.subarray(0, 100))))).toBe('INTEGRITY');
  });

  it('a member whose recorded length lies is INTEGRITY, and its neighbours are not returned unverified', async () => {
    const raw = Buffer.from('first member|second member');
    const first = raw.subarray(0, 12);
    const second = raw.subarray(13);
    await plantBlock(zstd.compress(raw), [
      { id: sha256Hex(first), kind: 'data', rawLength: 12, codec: 'zstd', blockOffset: 0 },
      { id: sha256Hex(second), kind: 'data', rawLength: 5, codec: 'zstd', blockOffset: 13 },
    ]);
    expect(await codeOf(new ObjectReader(blobs, meta).readMany([sha256Hex(first), sha256Hex(second)]))).toBe('INTEGRITY');
    expect(Buffer.from(await new ObjectReader(blobs, meta).read(sha256Hex(first)))).toEqual(first);
  });

  it('a block that decompresses beyond the largest block size is INTEGRITY before anything that size is allocated', async () => {
    // A decompression bomb: a few hundred stored bytes that would expand to 256 MiB.
    const bomb = zstd.compress(Buffer.alloc(256 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const id = sha256Hex(Buffer.alloc(10));
    await plantBlock(bomb, [{ id, kind: 'data', rawLength: 10, codec: 'zstd', blockOffset: 0 }]);
    const before = process.memoryUsage().arrayBuffers;
    expect(await codeOf(new ObjectReader(blobs, meta).read(id))).toBe('INTEGRITY');
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(MAX_BLOCK_RAW_BYTES * 4);
  });

  it('a lone zstd object whose frame declares more than its recorded length is INTEGRITY', async () => {
    const id = sha256Hex(Buffer.alloc(100, 7));
    const writer = new PackWriter('data');
    writer.add(id, zstd.compress(Buffer.alloc(64 * 1024 * 1024, 7)), 100, 'zstd');
    const pack = writer.seal();
    await uploadPack(blobs, pack);
    await meta.objects.insertPacksAndObjects(
      [{ id: pack.id, kind: 'data', size: pack.size, objectCount: 1 }],
      pack.objects.map((o) => ({ ...o, packId: pack.id })),
    );
    const before = process.memoryUsage().arrayBuffers;
    expect(await codeOf(new ObjectReader(blobs, meta).read(id))).toBe('INTEGRITY');
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 * 1024 * 1024);
  });
});
