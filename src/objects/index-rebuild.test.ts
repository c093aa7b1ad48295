import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBlobStore } from '../blob-store/drivers/local-disk.js';
import { sha256Hex } from '../core/hash.js';
import { type MetadataStore, type ObjectRecord, openMetadataStore } from '../metadata/metadata-store.js';
import { ContentWorkers } from './content-workers.js';
import { rebuildIndex } from './index-rebuild.js';
import { ObjectReader } from './object-reader.js';
import { ObjectWriter } from './object-writer.js';

describe('rebuildIndex with solid blocks', () => {
  let dir: string;
  let blobs: LocalDiskBlobStore;
  let workers: ContentWorkers;
  const stores: MetadataStore[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-rebuild-'));
    blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
    workers = new ContentWorkers(1);
  });
  afterAll(async () => {
    await workers.close();
    for (const store of stores) await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const open = async (name: string): Promise<MetadataStore> => {
    const store = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, `${name}.db`) });
    stores.push(store);
    return store;
  };
  const byId = (rows: readonly ObjectRecord[]) => [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));

  it('registers every block member with its block range and offset, from the trailers alone', async () => {
    const original = await open('original');
    const raws = [
      ...Array.from({ length: 300 }, (_, i) => Buffer.from(`small text object ${i}\n`.repeat(1 + (i % 40)))),
      randomBytes(200),
      Buffer.from('a larger, compressible object\n'.repeat(2000)),
    ];
    const writer = new ObjectWriter(blobs, workers, async () => {});
    for (const raw of raws) await writer.add(sha256Hex(raw), 'data', raw);
    const written = await writer.finish();
    await original.objects.insertPacksAndObjects(written.packs, written.objects);
    expect(written.objects.filter((o) => o.blockOffset !== undefined).length).toBeGreaterThan(290);
    expect(written.objects.some((o) => o.blockOffset === undefined)).toBe(true);

    const rebuilt = await open('rebuilt');
    const report = await rebuildIndex({ blobs, meta: rebuilt }, { verifyPacks: true });
    expect(report).toMatchObject({ packsRegistered: written.packs.length, objectsRegistered: raws.length, damaged: [] });
    const packIds = written.packs.map((p) => p.id);
    expect(byId(await rebuilt.objects.objectsInPacks(packIds))).toEqual(byId(await original.objects.objectsInPacks(packIds)));
    const read = await new ObjectReader(blobs, rebuilt).readMany(raws.map((r) => sha256Hex(r)));
    for (const raw of raws) expect(Buffer.from(read.get(sha256Hex(raw)) as Uint8Array)).toEqual(raw);
  });
});
