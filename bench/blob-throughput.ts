import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { BlobStore } from '../src/blob-store/blob-store.js';
import { median, timeMs } from './stats.js';

const MiB = 1024 * 1024;

/** A store under test plus a reference that moves the same bytes without Holdfast. */
export interface ThroughputTarget {
  readonly name: string;
  readonly store: BlobStore;
  /** Reference write of the same bytes (e.g. a plain fsynced file, a single raw PutObject). */
  readonly referencePut: (key: string, bytes: Buffer) => Promise<void>;
  /** Reference read of what `referencePut` wrote. */
  readonly referenceGet: (key: string) => Promise<void>;
}

/** Medians in MiB/s for one target. */
export interface ThroughputResult {
  readonly name: string;
  readonly sizeMiB: number;
  readonly putMiBs: number;
  readonly getMiBs: number;
  readonly refPutMiBs: number;
  readonly refGetMiBs: number;
}

function chunked(bytes: Buffer): Readable {
  async function* gen(): AsyncGenerator<Buffer> {
    for (let at = 0; at < bytes.length; at += MiB) yield bytes.subarray(at, at + MiB);
  }
  return Readable.from(gen());
}

async function drain(stream: Readable): Promise<number> {
  let n = 0;
  for await (const chunk of stream) n += (chunk as Buffer).length;
  return n;
}

/** Puts (streamed, 1 MiB chunks) and gets (streamed) an object of `sizeMiB`, `runs` times. */
export async function measureThroughput(target: ThroughputTarget, sizeMiB = 64, runs = 5): Promise<ThroughputResult> {
  const bytes = randomBytes(sizeMiB * MiB);
  const put: number[] = [];
  const get: number[] = [];
  const refPut: number[] = [];
  const refGet: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const key = `bench/${randomBytes(8).toString('hex')}`;
    put.push(await timeMs(() => target.store.put(key, chunked(bytes), { expectedSize: bytes.length })));
    get.push(
      await timeMs(async () => {
        if ((await drain(await target.store.getStream(key))) !== bytes.length) throw new Error(`${target.name}: short read`);
      }),
    );
    await target.store.delete(key);
    const refKey = `bench-ref/${randomBytes(8).toString('hex')}`;
    refPut.push(await timeMs(() => target.referencePut(refKey, bytes)));
    refGet.push(await timeMs(() => target.referenceGet(refKey)));
  }
  const rate = (ms: number[]) => Math.round((sizeMiB / (median(ms) / 1000)) * 10) / 10;
  return { name: target.name, sizeMiB, putMiBs: rate(put), getMiBs: rate(get), refPutMiBs: rate(refPut), refGetMiBs: rate(refGet) };
}

/** Reference for local disk: write + fsync a plain file, read it back. */
export async function plainFileReference(dir: string): Promise<Pick<ThroughputTarget, 'referencePut' | 'referenceGet'>> {
  const refDir = await fs.mkdtemp(path.join(dir || os.tmpdir(), 'ref-'));
  return {
    async referencePut(key, bytes) {
      const handle = await fs.open(path.join(refDir, key.replace(/\//g, '_')), 'wx');
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
    },
    async referenceGet(key) {
      const file = path.join(refDir, key.replace(/\//g, '_'));
      await drain((await fs.open(file)).createReadStream());
      await fs.rm(file);
    },
  };
}

/** Runs the 64 MiB benchmark on local disk and on S3 (s3rver on loopback) and prints medians. */
async function main(): Promise<void> {
  const json = process.argv.includes('--json');
  const { LocalDiskBlobStore } = await import('../src/blob-store/drivers/local-disk.js');
  const { createS3BlobStore } = await import('../src/blob-store/drivers/s3.js');
  const { startS3Server } = await import('../test/support/s3-server.js');
  const { S3Client, PutObjectCommand, GetObjectCommand } = await import('@aws-sdk/client-s3');
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-bench-blobs-'));
  const s3 = await startS3Server({ bucket: 'bench' });
  const results: ThroughputResult[] = [];
  try {
    const local = await LocalDiskBlobStore.open({ path: path.join(dir, 'store') });
    results.push(await measureThroughput({ name: 'local-disk', store: local, ...(await plainFileReference(dir)) }));
    const s3Config = { endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, credentials: { ...s3.credentials } };
    const store = await createS3BlobStore({ kind: 's3', bucket: s3.bucket, prefix: 'hf', ...s3Config });
    const raw = new S3Client({ ...s3Config, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    results.push(
      await measureThroughput({
        name: 's3 (s3rver, loopback)',
        store,
        async referencePut(key, bytes) {
          await raw.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `raw/${key}`, Body: bytes, ContentLength: bytes.length }));
        },
        async referenceGet(key) {
          const out = await raw.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `raw/${key}` }));
          await drain(out.Body as Readable);
        },
      }),
    );
    await store.close();
    raw.destroy();
  } finally {
    await s3.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
  if (json) {
    process.stdout.write(`${JSON.stringify({ results }, null, 2)}\n`);
    return;
  }
  const { printTable } = await import('./stats.js');
  printTable(
    'blob store: 64 MiB object, streamed put / get, median of 5 (MiB/s); reference = plain fsynced file / one raw PutObject',
    ['store', 'put', 'ref put', 'put/ref', 'get', 'ref get', 'get/ref'],
    results.map((r) => [
      r.name,
      String(r.putMiBs),
      String(r.refPutMiBs),
      (r.putMiBs / r.refPutMiBs).toFixed(2),
      String(r.getMiBs),
      String(r.refGetMiBs),
      (r.getMiBs / r.refGetMiBs).toFixed(2),
    ]),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
