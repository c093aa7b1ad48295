import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../core/hash.js';
import { type MetadataStore, type ObjectRecord, openMetadataStore } from '../../metadata/metadata-store.js';
import { liveUsage } from './gc-mark.js';

describe('liveUsage', () => {
  let dir: string;
  let meta: MetadataStore;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-usage-'));
    meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
  });
  afterAll(async () => {
    await meta.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('counts a solid block once, in proportion to the raw bytes of its live members', async () => {
    const packId = sha256Hex('pack');
    const id = (n: number): string => sha256Hex(`object ${n}`);
    // One block of 1,000 stored bytes holding members of 100, 300 and 600 raw bytes, then a lone object.
    const rows: ObjectRecord[] = [
      { id: id(1), packId, kind: 'data', offset: 8, length: 1_000, rawLength: 100, codec: 'zstd', blockOffset: 0 },
      { id: id(2), packId, kind: 'data', offset: 8, length: 1_000, rawLength: 300, codec: 'zstd', blockOffset: 100 },
      { id: id(3), packId, kind: 'data', offset: 8, length: 1_000, rawLength: 600, codec: 'zstd', blockOffset: 400 },
      { id: id(4), packId, kind: 'data', offset: 1_008, length: 50, rawLength: 50, codec: 'none' },
    ];
    await meta.objects.insertPacksAndObjects([{ id: packId, kind: 'data', size: 1_200, objectCount: 4 }], rows);
    const packs = await meta.objects.listPacks();
    const usage = async (live: number[]) => (await liveUsage(meta, packs, (o) => live.some((n) => id(n) === o))).get(packId);
    expect(await usage([2])).toEqual({ liveRows: 1, liveBytes: 300 });
    expect(await usage([1, 3, 4])).toEqual({ liveRows: 3, liveBytes: 700 + 50 });
    expect(await usage([1, 2, 3])).toEqual({ liveRows: 3, liveBytes: 1_000 });
    expect(await usage([])).toEqual({ liveRows: 0, liveBytes: 0 });
  });
});
