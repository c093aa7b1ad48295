import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../test/support/error-code.js';
import type { BlobStore } from './blob-store.js';

/** How a driver's test file plugs into the shared suite. */
export interface BlobStoreContractOptions {
  /** Driver name shown in the test titles. */
  readonly name: string;
  /** Opens a fresh, empty store; `cleanup` removes whatever it created. */
  readonly create: () => Promise<{ store: BlobStore; cleanup(): Promise<void> }>;
}

const MiB = 1024 * 1024;

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A stream of `total` pseudo-random bytes in `chunk`-sized pieces, and the hash of them all. */
function generatedStream(total: number, chunk = 256 * 1024): { stream: Readable; digest: Promise<string> } {
  const hash = createHash('sha256');
  let resolveDigest: (d: string) => void = () => undefined;
  const digest = new Promise<string>((r) => {
    resolveDigest = r;
  });
  async function* gen(): AsyncGenerator<Uint8Array> {
    for (let sent = 0; sent < total; sent += chunk) {
      const piece = randomBytes(Math.min(chunk, total - sent));
      hash.update(piece);
      yield piece;
    }
    resolveDigest(hash.digest('hex'));
  }
  return { stream: Readable.from(gen(), { objectMode: false }), digest };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

async function collect(iterable: AsyncIterable<{ key: string; size: number }>): Promise<Array<{ key: string; size: number }>> {
  const out: Array<{ key: string; size: number }> = [];
  for await (const item of iterable) out.push({ key: item.key, size: item.size });
  return out;
}

/**
 * The BlobStore contract: every driver runs every case against a real backend; there is no
 * way to skip one.
 */
export function describeBlobStoreContract(options: BlobStoreContractOptions): void {
  describe(`BlobStore contract: ${options.name}`, () => {
    let store: BlobStore;
    let cleanup: () => Promise<void> = async () => undefined;

    beforeAll(async () => {
      const opened = await options.create();
      store = opened.store;
      cleanup = opened.cleanup;
    });
    afterAll(async () => {
      await store?.close();
      await cleanup();
    });

    it('put then get returns the same bytes', async () => {
      const bytes = randomBytes(100_000);
      expect(await store.put('basic/one', bytes)).toEqual({ created: true, size: 100_000 });
      expect(sha256(await store.get('basic/one'))).toBe(sha256(bytes));
      expect(await store.stat('basic/one')).toEqual({ key: 'basic/one', size: 100_000 });
    });

    it('put of an existing key is a no-op that keeps the first bytes', async () => {
      const first = Buffer.from('first version');
      await store.put('idem/k', first);
      expect(await store.put('idem/k', Buffer.from('second, different'))).toEqual({ created: false, size: 0 });
      const { stream } = generatedStream(3 * MiB);
      expect((await store.put('idem/k', stream)).created).toBe(false);
      expect(Buffer.from(await store.get('idem/k')).equals(first)).toBe(true);
    });

    it('concurrent puts of one key all resolve and leave one object', async () => {
      const bytes = randomBytes(64 * 1024);
      const results = await Promise.all(Array.from({ length: 8 }, () => store.put('race/k', bytes)));
      expect(results.some((r) => r.created)).toBe(true);
      expect(sha256(await store.get('race/k'))).toBe(sha256(bytes));
      expect(await collect(store.list('race/'))).toEqual([{ key: 'race/k', size: bytes.length }]);
    });

    it('empty objects', async () => {
      expect(await store.put('empty/zero', new Uint8Array(0))).toEqual({ created: true, size: 0 });
      expect((await store.get('empty/zero')).length).toBe(0);
      expect(await store.stat('empty/zero')).toEqual({ key: 'empty/zero', size: 0 });
      expect((await store.get('empty/zero', { offset: 0, length: 10 })).length).toBe(0);
    });

    it('streamed put of a Readable larger than a multipart part', async () => {
      const { stream, digest } = generatedStream(20 * MiB);
      expect(await store.put('stream/big', stream, { expectedSize: 20 * MiB })).toEqual({ created: true, size: 20 * MiB });
      const back = await readAll(await store.getStream('stream/big'));
      expect(back.length).toBe(20 * MiB);
      expect(sha256(back)).toBe(await digest);
      expect((await store.stat('stream/big'))?.size).toBe(20 * MiB);
    }, 120_000);

    it('streamed put of an async iterable', async () => {
      const parts = [randomBytes(1000), randomBytes(1), randomBytes(70_000)];
      async function* gen(): AsyncGenerator<Uint8Array> {
        yield* parts;
      }
      expect(await store.put('stream/iter', gen())).toEqual({ created: true, size: 71_001 });
      expect(sha256(await store.get('stream/iter'))).toBe(sha256(Buffer.concat(parts)));
    });

    it('missing keys: get and getStream reject NOT_FOUND, stat is undefined', async () => {
      expect(await codeOf(store.get('missing/nothing'))).toBe('NOT_FOUND');
      expect(await codeOf(store.getStream('missing/nothing'))).toBe('NOT_FOUND');
      expect(await codeOf(store.get('missing/nothing', { offset: 0, length: 0 }))).toBe('NOT_FOUND');
      expect(await store.stat('missing/nothing')).toBeUndefined();
    });

    it('byte ranges', async () => {
      const bytes = randomBytes(10_000);
      await store.put('range/obj', bytes);
      const slice = async (offset: number, length: number) => Buffer.from(await store.get('range/obj', { offset, length }));
      expect((await slice(0, 10)).equals(bytes.subarray(0, 10))).toBe(true);
      expect((await slice(1234, 4321)).equals(bytes.subarray(1234, 5555))).toBe(true);
      expect((await slice(9990, 100)).equals(bytes.subarray(9990))).toBe(true);
      expect((await slice(500, 0)).length).toBe(0);
      expect((await slice(10_000, 5)).length).toBe(0);
      expect(await codeOf(store.get('range/obj', { offset: 10_001, length: 1 }))).toBe('INVALID_INPUT');
      expect(await codeOf(store.get('range/obj', { offset: -1, length: 1 }))).toBe('INVALID_INPUT');
      const streamed = await readAll(await store.getStream('range/obj', { offset: 4096, length: 4096 }));
      expect(streamed.equals(bytes.subarray(4096, 8192))).toBe(true);
    });

    it('list by prefix in ascending key order', async () => {
      const keys = ['ls/a', 'ls/a.x', 'ls/a/b', 'ls/a/c/d', 'ls/ab', 'ls/b-1', 'ls/B', 'ls/_u'];
      await Promise.all(keys.map((k, i) => store.put(k, randomBytes(i + 1))));
      const sorted = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      expect((await collect(store.list('ls/'))).map((s) => s.key)).toEqual(sorted);
      expect((await collect(store.list('ls/a'))).map((s) => s.key)).toEqual(sorted.filter((k) => k.startsWith('ls/a')));
      expect((await collect(store.list('ls/a/'))).map((s) => s.key)).toEqual(['ls/a/b', 'ls/a/c/d']);
      expect(await collect(store.list('ls/zz'))).toEqual([]);
      expect(await collect(store.list('nothing-here/'))).toEqual([]);
      const sizes = new Map((await collect(store.list('ls/'))).map((s) => [s.key, s.size]));
      keys.forEach((k, i) => {
        expect(sizes.get(k)).toBe(i + 1);
      });
    });

    it('list pages through more than 1000 keys and can stop early', async () => {
      const keys = Array.from({ length: 1205 }, (_, i) => `many/${String(i).padStart(5, '0')}`);
      for (let i = 0; i < keys.length; i += 50) {
        await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, Buffer.from(k))));
      }
      expect((await collect(store.list('many/'))).map((s) => s.key)).toEqual(keys);
      let seen = 0;
      for await (const _ of store.list('many/')) {
        seen += 1;
        if (seen === 3) break;
      }
      expect(seen).toBe(3);
    }, 120_000);

    it('delete is idempotent and a key can be written again afterwards', async () => {
      await store.put('del/k', Buffer.from('one'));
      await store.delete('del/k');
      expect(await store.stat('del/k')).toBeUndefined();
      await store.delete('del/k');
      await store.delete('del/never-existed');
      expect(await store.put('del/k', Buffer.from('two'))).toEqual({ created: true, size: 3 });
      expect(Buffer.from(await store.get('del/k')).toString()).toBe('two');
    });

    it('invalid keys and prefixes are rejected with INVALID_INPUT', async () => {
      const bad = ['', '/abs', 'a//b', '../x', 'a/../b', 'a/./b', '.hidden', 'a/.tmp/x', 'sp ace', 'new\nline', 'a/', 'x'.repeat(1025)];
      for (const key of bad) {
        expect(await codeOf(store.put(key, Buffer.from('x'))), key).toBe('INVALID_INPUT');
        expect(await codeOf(store.get(key)), key).toBe('INVALID_INPUT');
        expect(await codeOf(store.stat(key)), key).toBe('INVALID_INPUT');
        expect(await codeOf(store.delete(key)), key).toBe('INVALID_INPUT');
      }
      for (const prefix of ['/x', '../', 'a//', '.tmp']) {
        expect(await codeOf(collect(store.list(prefix))), prefix).toBe('INVALID_INPUT');
      }
    });

    it('a size mismatch rejects with INTEGRITY and stores nothing', async () => {
      expect(await codeOf(store.put('size/buf', randomBytes(100), { expectedSize: 99 }))).toBe('INTEGRITY');
      expect(await store.stat('size/buf')).toBeUndefined();
      const { stream } = generatedStream(MiB + 17);
      expect(await codeOf(store.put('size/stream', stream, { expectedSize: MiB }))).toBe('INTEGRITY');
      expect(await store.stat('size/stream')).toBeUndefined();
    });

    it('a body that fails mid-stream rejects and stores nothing', async () => {
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield randomBytes(300_000);
        throw Object.assign(new Error('source went away'), { code: 'EPIPE' });
      }
      expect(await codeOf(store.put('fail/mid', failing()))).not.toBe('RESOLVED');
      expect(await store.stat('fail/mid')).toBeUndefined();
      expect(await collect(store.list('fail/'))).toEqual([]);
    });

    it('an aborted put rejects with CANCELLED and stores nothing', async () => {
      const controller = new AbortController();
      controller.abort();
      expect(await codeOf(store.put('abort/k', randomBytes(10), { signal: controller.signal }))).toBe('CANCELLED');
      expect(await store.stat('abort/k')).toBeUndefined();
    });
  });
}
