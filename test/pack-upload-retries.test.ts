import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { DEFAULT_MAX_ATTEMPTS } from '../src/blob-store/drivers/s3/s3-settings.js';
import { createS3BlobStore } from '../src/blob-store/drivers/s3.js';
import { sha256Hex } from '../src/core/hash.js';
import { isHoldfastError } from '../src/errors.js';
import { packKey } from '../src/objects/pack-format.js';
import { uploadPack } from '../src/objects/pack-uploader.js';
import { PackWriter, type SealedPack } from '../src/objects/pack-writer.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';
import { type S3TestServer, startS3Server } from './support/s3-server.js';

/** A small sealed data pack with one object; `seed` makes its id unique. */
function pack(seed: string): SealedPack {
  const writer = new PackWriter('data');
  const raw = Buffer.from(`pack-upload retries ${seed}`);
  writer.add(sha256Hex(raw), raw, raw.length, 'none');
  return writer.seal();
}

/** The error an upload failed with (the test fails when it succeeded). */
async function failure(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => {
      throw new Error('the upload succeeded');
    },
    (error: unknown) => error,
  );
}

/**
 * One retry layer for pack uploads: the blob store retries its requests, the uploader does
 * not retry the whole upload again. A store that fails every PUT sees 1 + 3 attempts, not 16.
 */
describe('pack uploads are retried in one layer, a bounded number of times', () => {
  let s3: S3TestServer;
  let dir: string;
  beforeAll(async () => {
    s3 = await startS3Server();
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-upload-retries-'));
  });
  afterAll(async () => {
    await s3?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const s3Store = (prefix: string) =>
    createS3BlobStore({
      kind: 's3',
      bucket: s3.bucket,
      prefix,
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: s3.credentials,
      retryBaseDelayMs: 1,
      retryMaxDelayMs: 5,
    });

  it('an S3 server answering every PutObject with 503 sees exactly 1 + 3 PUTs of the pack, and the failure is transient STORE_UNAVAILABLE', async () => {
    expect(DEFAULT_MAX_ATTEMPTS).toBe(4);
    const store = await s3Store('every-put-fails');
    s3.faults.reset();
    s3.faults.failNext(1000, 503, { method: 'PUT' });
    const sealed = pack('503');
    const error = await failure(uploadPack(store, sealed));
    expect(isHoldfastError(error, 'STORE_UNAVAILABLE') && error.data.transient === true).toBe(true);
    expect(s3.faults.count({ method: 'PUT' })).toBe(DEFAULT_MAX_ATTEMPTS);
    s3.faults.reset();
    expect(await store.stat(packKey(sealed.id))).toBeUndefined();
    await store.close();
  });

  it('two failed PutObjects then success: 3 PUTs, the pack stored once with its bytes', async () => {
    const store = await s3Store('two-fail');
    s3.faults.reset();
    s3.faults.failNext(2, 503, { method: 'PUT' });
    const sealed = pack('two');
    expect(await uploadPack(store, sealed)).toEqual({ writes: 1, created: true });
    expect(s3.faults.count({ method: 'PUT' })).toBe(3);
    expect(sha256Hex(await store.get(packKey(sealed.id)))).toBe(sealed.id);
    await store.close();
  });

  it('a store double failing every put transiently, around S3 or local disk, is asked once per upload: nothing above the store retries', async () => {
    const local = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
    for (const inner of [local, await s3Store('double')]) {
      const faulty = new FaultInjectingBlobStore(inner);
      faulty.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
      const error = await failure(uploadPack(faulty, pack(`double-${inner.name}`)));
      expect(isHoldfastError(error, 'STORE_UNAVAILABLE') && error.data.transient === true, inner.name).toBe(true);
      expect(
        faulty.calls.filter((c) => c.op === 'put'),
        inner.name,
      ).toHaveLength(1);
      await inner.close();
    }
  });
});
