import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type S3TestServer, startS3Server, startS3Target } from '../../../test/support/s3-server.js';
import { describeBlobStoreContract } from '../blob-store.contract.js';
import { createS3BlobStore, type S3BlobStoreConfig } from './s3.js';

const MiB = 1024 * 1024;

describeBlobStoreContract({
  name: 's3',
  create: async () => {
    const target = await startS3Target();
    const store = await createS3BlobStore({ kind: 's3', ...target, prefix: `${target.prefix}/contract` });
    return { store, cleanup: () => target.close() };
  },
});

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** `bytes` as a Readable of 64 KiB chunks, the way a file stream delivers them. */
function streamOf(bytes: Uint8Array): Readable {
  async function* chunks(): AsyncGenerator<Uint8Array> {
    for (let offset = 0; offset < bytes.length; offset += 64 * 1024) yield bytes.subarray(offset, offset + 64 * 1024);
  }
  return Readable.from(chunks(), { objectMode: false });
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function failure(promise: Promise<unknown>): Promise<{ code?: string; transient?: boolean; data?: Record<string, unknown> }> {
  try {
    await promise;
  } catch (error) {
    return error as { code?: string; transient?: boolean; data?: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}

describe('s3 driver', () => {
  let s3: S3TestServer;
  let counter = 0;

  beforeAll(async () => {
    s3 = await startS3Server();
  });
  afterAll(async () => {
    await s3.close();
  });
  beforeEach(() => {
    s3.faults.reset();
  });

  /** A config on the shared server with its own key prefix and fast retries. */
  function config(overrides: Partial<S3BlobStoreConfig> = {}): S3BlobStoreConfig {
    counter += 1;
    return {
      kind: 's3',
      bucket: s3.bucket,
      prefix: `case-${counter}`,
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: s3.credentials,
      retryBaseDelayMs: 1,
      retryMaxDelayMs: 20,
      ...overrides,
    };
  }

  /** Small multipart settings: 5 MiB parts (S3's minimum), multipart above 6 MiB. */
  const multipart = { multipartThresholdBytes: 6 * MiB, partSizeBytes: 5 * MiB, maxConcurrency: 3 } as const;

  async function uploadsLeft(): Promise<string[]> {
    const dir = s3.server.store.getResourcePath(s3.bucket, undefined, 'uploads');
    return fs.readdir(dir).catch(() => []);
  }

  describe('retries', () => {
    it('retries injected 503s and connection resets, and stores the object once', async () => {
      const store = await createS3BlobStore(config());
      s3.faults.failNext(2, 503, { method: 'PUT' });
      s3.faults.resetNext(1, { method: 'PUT' });
      const bytes = randomBytes(10_000);
      expect(await store.put('k', bytes)).toEqual({ created: true, size: 10_000 });
      expect(s3.faults.count({ method: 'PUT' })).toBe(4);
      expect(sha256(await store.get('k'))).toBe(sha256(bytes));
      await store.close();
    });

    it('retries reads: 500 and a reset on GET, a reset on HEAD', async () => {
      const store = await createS3BlobStore(config());
      await store.put('k', Buffer.from('hello'));
      s3.faults.failNext(1, 500, { method: 'GET' });
      s3.faults.resetNext(1, { method: 'GET' });
      expect(Buffer.from(await store.get('k')).toString()).toBe('hello');
      expect(s3.faults.count({ method: 'GET' })).toBe(3);
      s3.faults.resetNext(1, { method: 'HEAD' });
      expect(await store.stat('k')).toEqual({ key: 'k', size: 5 });
      await store.close();
    });

    it('treats 409 ConditionalRequestConflict as a conflict to retry', async () => {
      const store = await createS3BlobStore(config());
      s3.faults.failNext(1, 409, { method: 'PUT' });
      expect(await store.put('k', Buffer.from('v'))).toEqual({ created: true, size: 1 });
      expect(s3.faults.count({ method: 'PUT' })).toBe(2);
      await store.close();
    });

    it('times out a stalled request and retries it', async () => {
      const store = await createS3BlobStore(config({ requestTimeoutMs: 300 }));
      s3.faults.stallNext(1, { method: 'PUT' });
      expect(await store.put('k', Buffer.from('v'))).toEqual({ created: true, size: 1 });
      expect(s3.faults.count({ method: 'PUT' })).toBe(2);
      await store.close();
    });

    it('a lost answer to PutObject: the retry meets the stored object, whose bytes are right', async () => {
      const store = await createS3BlobStore(config());
      s3.faults.dropResponseNext(1, { method: 'PUT' });
      const bytes = randomBytes(5000);
      await store.put('k', bytes);
      expect(s3.faults.count({ method: 'PUT' })).toBe(2);
      expect(sha256(await store.get('k'))).toBe(sha256(bytes));
      await store.close();
    });

    it('a lost answer to CompleteMultipartUpload: the retry sees NoSuchUpload and reports the object created', async () => {
      const store = await createS3BlobStore(config(multipart));
      s3.faults.dropResponseNext(1, { method: 'POST', query: 'uploadId' });
      const bytes = randomBytes(7 * MiB);
      expect(await store.put('k', streamOf(bytes))).toEqual({ created: true, size: bytes.length });
      expect(s3.faults.count({ method: 'POST', query: 'uploadId' })).toBe(2);
      expect(sha256(await store.get('k'))).toBe(sha256(bytes));
      await store.close();
    });

    it('gives up after maxAttempts with a transient STORE_UNAVAILABLE', async () => {
      const store = await createS3BlobStore(config({ maxAttempts: 3 }));
      s3.faults.failNext(10, 503, { method: 'PUT' });
      const error = await failure(store.put('k', Buffer.from('v')));
      expect(error.code).toBe('STORE_UNAVAILABLE');
      expect(error.transient).toBe(true);
      expect(s3.faults.count({ method: 'PUT' })).toBe(3);
      s3.faults.reset();
      expect(await store.stat('k')).toBeUndefined();
      await store.close();
    });

    it('does not retry wrong credentials: STORE_UNAVAILABLE, not transient, one request', async () => {
      const store = await createS3BlobStore(config({ credentials: { accessKeyId: 'NOT-A-KEY', secretAccessKey: 'wrong' } }));
      const error = await failure(store.put('k', Buffer.from('v')));
      expect(error.code).toBe('STORE_UNAVAILABLE');
      expect(error.transient).toBe(false);
      expect(error.data?.s3Code).toBe('InvalidAccessKeyId');
      expect(s3.faults.count()).toBe(1);
      expect((await failure(store.get('k'))).code).toBe('STORE_UNAVAILABLE');
      expect(s3.faults.count()).toBe(2);
      await store.close();
    });

    it('does not retry a missing bucket, and names it', async () => {
      const store = await createS3BlobStore(config({ bucket: 'no-such-bucket' }));
      const error = await failure(store.put('k', Buffer.from('v')));
      expect(error.code).toBe('STORE_UNAVAILABLE');
      expect(error.transient).toBe(false);
      expect(error.data?.bucket).toBe('no-such-bucket');
      expect(error.data?.s3Code).toBe('NoSuchBucket');
      expect(s3.faults.count({ bucket: 'no-such-bucket' })).toBe(1);
      expect((await failure(store.list('')[Symbol.asyncIterator]().next())).code).toBe('STORE_UNAVAILABLE');
      await store.close();
    });
  });

  describe('multipart', () => {
    it('round-trips a 40 MiB stream byte-equal, with ranged reads across part boundaries', async () => {
      const store = await createS3BlobStore(config(multipart));
      const bytes = randomBytes(40 * MiB);
      expect(await store.put('big', streamOf(bytes), { expectedSize: bytes.length })).toEqual({ created: true, size: bytes.length });
      expect(s3.faults.count({ method: 'PUT', query: 'partNumber' })).toBe(8);
      expect(s3.faults.count({ method: 'PUT' })).toBe(8);
      expect(sha256(await readAll(await store.getStream('big')))).toBe(sha256(bytes));
      expect((await store.stat('big'))?.size).toBe(bytes.length);
      for (const [offset, length] of [
        [5 * MiB - 100, 200],
        [5 * MiB - 10, 5 * MiB + 20],
        [40 * MiB - 3, 10],
      ] as const) {
        const expected = bytes.subarray(offset, offset + length);
        expect(Buffer.from(await store.get('big', { offset, length })).equals(expected)).toBe(true);
        expect((await readAll(await store.getStream('big', { offset, length }))).equals(expected)).toBe(true);
      }
      await store.close();
    }, 120_000);

    it('a multipart put of an existing key returns created:false without uploading', async () => {
      const store = await createS3BlobStore(config(multipart));
      await store.put('k', randomBytes(7 * MiB));
      s3.faults.reset();
      const again = streamOf(randomBytes(12 * MiB));
      expect(await store.put('k', again)).toEqual({ created: false, size: 0 });
      expect(s3.faults.count({ method: 'POST' })).toBe(0);
      expect(s3.faults.count({ method: 'PUT' })).toBe(0);
      expect(again.destroyed).toBe(true);
      await store.close();
    });

    it('an expectedSize mismatch rejects with INTEGRITY, aborts the upload and stores nothing', async () => {
      const store = await createS3BlobStore(config(multipart));
      expect((await failure(store.put('short', streamOf(randomBytes(12 * MiB)), { expectedSize: 13 * MiB }))).code).toBe('INTEGRITY');
      expect((await failure(store.put('long', streamOf(randomBytes(12 * MiB)), { expectedSize: 11 * MiB }))).code).toBe('INTEGRITY');
      expect(await store.stat('short')).toBeUndefined();
      expect(await store.stat('long')).toBeUndefined();
      expect(s3.faults.count({ method: 'DELETE', query: 'uploadId' })).toBe(2);
      expect(await uploadsLeft()).toEqual([]);
      await store.close();
    });

    it('retries a failed part on its own', async () => {
      const store = await createS3BlobStore(config(multipart));
      s3.faults.failNext(1, 500, { method: 'PUT', query: 'partNumber' });
      s3.faults.resetNext(1, { method: 'PUT', query: 'partNumber' });
      const bytes = randomBytes(16 * MiB);
      expect(await store.put('k', streamOf(bytes))).toEqual({ created: true, size: bytes.length });
      expect(s3.faults.count({ method: 'PUT', query: 'partNumber' })).toBe(4 + 2);
      expect(s3.faults.count({ method: 'POST', query: 'uploads' })).toBe(1);
      expect(sha256(await store.get('k'))).toBe(sha256(bytes));
      await store.close();
    });

    it('a part that keeps failing aborts the upload and stores nothing', async () => {
      const store = await createS3BlobStore(config({ ...multipart, maxAttempts: 2 }));
      s3.faults.failNext(100, 503, { method: 'PUT', query: 'partNumber' });
      const error = await failure(store.put('k', streamOf(randomBytes(16 * MiB))));
      expect(error.code).toBe('STORE_UNAVAILABLE');
      expect(error.transient).toBe(true);
      expect(s3.faults.count({ method: 'DELETE', query: 'uploadId' })).toBe(1);
      s3.faults.reset();
      expect(await store.stat('k')).toBeUndefined();
      expect(await uploadsLeft()).toEqual([]);
      await store.close();
    });

    it('an abort signal mid-upload rejects with CANCELLED and aborts the upload', async () => {
      const store = await createS3BlobStore(config(multipart));
      const controller = new AbortController();
      async function* body(): AsyncGenerator<Uint8Array> {
        for (let i = 0; i < 30; i += 1) {
          if (i === 15) controller.abort();
          yield randomBytes(MiB);
        }
      }
      expect((await failure(store.put('k', body(), { signal: controller.signal }))).code).toBe('CANCELLED');
      expect(await store.stat('k')).toBeUndefined();
      // At least one abort went out; under load s3rver may answer the first with a 500 while the
      // cancelled parts are still landing, and the driver retries it. No upload may be left.
      expect(s3.faults.count({ method: 'DELETE', query: 'uploadId' })).toBeGreaterThanOrEqual(1);
      expect(await uploadsLeft()).toEqual([]);
      await store.close();
    });
  });

  describe('keys and bytes on the server', () => {
    it('stores a streamed body with exactly its length (no aws-chunked framing)', async () => {
      const settings = config(multipart);
      const store = await createS3BlobStore(settings);
      const small = randomBytes(1000);
      const large = randomBytes(7 * MiB + 3);
      await store.put('small', streamOf(small));
      await store.put('large', streamOf(large));
      for (const [key, bytes] of [
        ['small', small],
        ['large', large],
      ] as const) {
        expect((await store.stat(key))?.size).toBe(bytes.length);
        const file = s3.server.store.getResourcePath(s3.bucket, `${settings.prefix}/${key}`, 'object');
        expect((await fs.stat(file)).size).toBe(bytes.length);
        expect(sha256(await store.get(key))).toBe(sha256(bytes));
      }
      await store.close();
    });

    it('isolates stores with different prefixes in one bucket', async () => {
      const a = await createS3BlobStore(config({ prefix: 'iso-a' }));
      const b = await createS3BlobStore(config({ prefix: 'iso-b/nested' }));
      const root = await createS3BlobStore(config({ prefix: '' }));
      await a.put('same/key', Buffer.from('from a'));
      await b.put('same/key', Buffer.from('from b'));
      await b.put('only-b', Buffer.from('b'));
      const keys = async (store: typeof a, prefix = '') => {
        const out: string[] = [];
        for await (const stat of store.list(prefix)) out.push(stat.key);
        return out;
      };
      expect(await keys(a)).toEqual(['same/key']);
      expect(await keys(b)).toEqual(['only-b', 'same/key']);
      expect(await a.stat('only-b')).toBeUndefined();
      expect(Buffer.from(await a.get('same/key')).toString()).toBe('from a');
      expect(Buffer.from(await b.get('same/key')).toString()).toBe('from b');
      expect(await keys(root, 'iso-')).toEqual(['iso-a/same/key', 'iso-b/nested/only-b', 'iso-b/nested/same/key']);
      await Promise.all([a.close(), b.close(), root.close()]);
    });

    it('reads a one-byte range at offset 0 (s3rver answers bytes=0-0 with the whole object)', async () => {
      const store = await createS3BlobStore(config());
      await store.put('k', Buffer.from('abcdef'));
      expect(Buffer.from(await store.get('k', { offset: 0, length: 1 })).toString()).toBe('a');
      expect((await readAll(await store.getStream('k', { offset: 0, length: 1 }))).toString()).toBe('a');
      await store.close();
    });

    it('rejects settings outside S3 limits with INVALID_INPUT', async () => {
      expect((await failure(createS3BlobStore(config({ partSizeBytes: MiB })))).code).toBe('INVALID_INPUT');
      expect((await failure(createS3BlobStore(config({ maxConcurrency: 0 })))).code).toBe('INVALID_INPUT');
      expect((await failure(createS3BlobStore(config({ maxAttempts: 1.5 })))).code).toBe('INVALID_INPUT');
    });

    it('loads the AWS SDK lazily: the driver modules only import its types', async () => {
      const dir = path.dirname(fileURLToPath(import.meta.url));
      const files = ['s3.ts', ...(await fs.readdir(path.join(dir, 's3'))).map((f) => path.join('s3', f))];
      for (const file of files) {
        const source = await fs.readFile(path.join(dir, file), 'utf8');
        expect(source, file).not.toMatch(/^import (?!type )[^;]*from '@aws-sdk\//m);
      }
    });
  });
});
