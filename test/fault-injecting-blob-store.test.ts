import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeBlobStoreContract } from '../src/blob-store/blob-store.contract.js';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';

async function tempStore(): Promise<{ store: LocalDiskBlobStore; dir: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-faulty-'));
  return { store: await LocalDiskBlobStore.open({ path: dir }), dir };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of stream) parts.push(p as Buffer);
  return Buffer.concat(parts);
}

// With no rules the wrapper must be a faithful BlobStore.
describeBlobStoreContract({
  name: 'fault-injecting wrapper without faults',
  create: async () => {
    const { store, dir } = await tempStore();
    return { store: new FaultInjectingBlobStore(store), cleanup: () => fs.rm(dir, { recursive: true, force: true }) };
  },
});

describe('FaultInjectingBlobStore', () => {
  let faulty: FaultInjectingBlobStore;
  let dir: string;
  beforeEach(async () => {
    const t = await tempStore();
    dir = t.dir;
    faulty = new FaultInjectingBlobStore(t.store);
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('fails exactly the nth matching call with a transient STORE_UNAVAILABLE', async () => {
    faulty.inject({ ops: ['put'], nth: 3, fault: { kind: 'error' } });
    const outcomes: string[] = [];
    for (let i = 1; i <= 5; i += 1) {
      outcomes.push(
        await faulty.put(`k/${i}`, Buffer.from([i])).then(
          () => 'ok',
          (e: { code: string; data: { transient: boolean } }) => `${e.code}:${e.data.transient}`,
        ),
      );
    }
    expect(outcomes).toEqual(['ok', 'ok', 'STORE_UNAVAILABLE:true', 'ok', 'ok']);
    expect(await faulty.inner.stat('k/3')).toBeUndefined();
    expect(faulty.calls.filter((c) => c.fault === 'error').map((c) => c.key)).toEqual(['k/3']);
  });

  it('matches by key pattern and fires `times` times', async () => {
    await faulty.put('packs/a', Buffer.from('a'));
    await faulty.put('other/b', Buffer.from('b'));
    faulty.inject({ ops: ['get'], key: /^packs\//, times: 2, fault: { kind: 'error' } });
    await expect(faulty.get('packs/a')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(Buffer.from(await faulty.get('other/b')).toString()).toBe('b');
    await expect(faulty.get('packs/a')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(Buffer.from(await faulty.get('packs/a')).toString()).toBe('a');
  });

  it('a lost acknowledgement stores the object but rejects the call', async () => {
    faulty.inject({ ops: ['put'], fault: { kind: 'lost-ack' } });
    await expect(faulty.put('lost/k', Buffer.from('kept'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(Buffer.from(await faulty.inner.get('lost/k')).toString()).toBe('kept');
    expect(await faulty.put('lost/k', Buffer.from('kept'))).toEqual({ created: false, size: 0 });
  });

  it('truncates and bit-flips buffered and streamed reads without touching the stored bytes', async () => {
    const bytes = randomBytes(300_000);
    await faulty.put('r/k', bytes);
    const hash = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

    faulty.inject({ ops: ['get', 'getStream'], times: 2, fault: { kind: 'truncate', keepBytes: 1000 } });
    expect(Buffer.from(await faulty.get('r/k')).equals(bytes.subarray(0, 1000))).toBe(true);
    expect((await readAll(await faulty.getStream('r/k'))).equals(bytes.subarray(0, 1000))).toBe(true);

    faulty.clear();
    faulty.inject({ ops: ['get', 'getStream'], times: 2, fault: { kind: 'bitflip', offset: 200_000, bit: 3 } });
    const flipped = Buffer.from(await faulty.get('r/k'));
    const streamed = await readAll(await faulty.getStream('r/k'));
    for (const got of [flipped, streamed]) {
      expect(got.length).toBe(bytes.length);
      expect(got[200_000]).toBe((bytes[200_000] ?? 0) ^ 0b1000);
      expect(got.subarray(0, 200_000).equals(bytes.subarray(0, 200_000))).toBe(true);
      expect(got.subarray(200_001).equals(bytes.subarray(200_001))).toBe(true);
    }
    expect(hash(await faulty.inner.get('r/k'))).toBe(hash(bytes));
  });

  it('adds latency and then proceeds', async () => {
    faulty.inject({ ops: ['stat'], fault: { kind: 'latency', ms: 120 } });
    const started = process.hrtime.bigint();
    expect(await faulty.stat('nothing/here')).toBeUndefined();
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeGreaterThanOrEqual(100);
  });

  it('a removed rule stops firing and the call log counts operations', async () => {
    const remove = faulty.inject({ ops: ['delete'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
    await expect(faulty.delete('d/k')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    remove();
    await faulty.delete('d/k');
    expect(faulty.count('delete')).toBe(2);
  });
});
