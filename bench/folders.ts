/**
 * Work-folder figures (issue 12's note): listing 10,000 files, writing and reading 1,000 small
 * files, and one large file streamed through `Folders.write` / `open`, against a plain blob
 * store put/get of the same bytes; peak RSS sampled during the large upload. Local disk +
 * SQLite by default, `--backend s3pg` for S3 (s3rver) + PostgreSQL. `--big-mib N` sets the
 * large file (default 1024). Run with `npx tsx bench/folders.ts`.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { BlobStore } from '../src/blob-store/blob-store.js';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { createS3BlobStore } from '../src/blob-store/drivers/s3.js';
import { Folders } from '../src/folders/folders.js';
import { type MetadataStore, openMetadataStore } from '../src/metadata/metadata-store.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import { collectGarbage } from '../src/snapshot/gc/gc.js';
import { MAX_CHECKPOINT_MS } from '../src/snapshot/snapshot-deps.js';
import { createTestDatabase } from '../test/support/postgres.js';
import { startS3Target } from '../test/support/s3-server.js';

const args = process.argv.slice(2);
const backend = args.includes('--backend') ? args[args.indexOf('--backend') + 1] : 'local';
const bigMiB = args.includes('--big-mib') ? Number(args[args.indexOf('--big-mib') + 1]) : 1024;
const PIECE = 256 * 1024;

/** A deterministic pseudo-random stream of `bytes` (incompressible, never held whole). */
async function* stream(bytes: number, seed: number): AsyncGenerator<Uint8Array> {
  const block = randomBytes(PIECE);
  for (let at = 0, i = seed; at < bytes; at += PIECE, i += 1) {
    const piece = Buffer.from(block.subarray(0, Math.min(PIECE, bytes - at)));
    piece.writeUInt32LE(i, 0);
    yield piece;
  }
}

async function main(): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-bench-folders-'));
  let blobs: BlobStore;
  let meta: MetadataStore;
  const cleanups: Array<() => Promise<void>> = [];
  if (backend === 's3pg') {
    const db = await createTestDatabase();
    const s3 = await startS3Target();
    blobs = await createS3BlobStore({ kind: 's3', ...s3, credentials: { ...s3.credentials } });
    meta = await openMetadataStore({ kind: 'postgres', url: db.url });
    cleanups.push(s3.close, db.drop);
  } else {
    blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
    meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
  }
  const workers = new ContentWorkers();
  const folders = new Folders({ meta, blobs, workers });
  const tenant = await meta.tenants.create({ name: 'bench' });
  const ref = { tenantId: tenant.id, scope: 'project' as const, ownerId: 'bench' };
  const out: Record<string, unknown> = { backend };
  const time = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
    const t = performance.now();
    const r = await fn();
    return [r, performance.now() - t];
  };

  // 1,000 small files (4 KiB each), written one after the other, then read back.
  const small = Array.from({ length: 1000 }, (_, i) => randomBytes(4096).fill(i & 0xff, 0, 1));
  const [, writeMs] = await time(async () => {
    for (let i = 0; i < small.length; i += 1) {
      await folders.write(ref, `small/${i}`, Readable.from([small[i] as Buffer]), { operationId: `s${i}` });
    }
  });
  const [, readMs] = await time(async () => {
    for (let i = 0; i < small.length; i += 1) for await (const _ of (await folders.open(ref, `small/${i}`)).body);
  });
  const [, putMs] = await time(async () => {
    for (let i = 0; i < small.length; i += 1) await blobs.put(`bench/small/${i}`, small[i] as Buffer);
  });
  const [, getMs] = await time(async () => {
    for (let i = 0; i < small.length; i += 1) await blobs.get(`bench/small/${i}`);
  });
  // Pack blobs the 1,000 writes left, then after a GC run that sees them as old enough to compact.
  const packBlobs = async (): Promise<number> => {
    let n = 0;
    for await (const _ of blobs.list('packs/')) n += 1;
    return n;
  };
  const packsAfterWrites = await packBlobs();
  const [, gcMs] = await time(() => collectGarbage({ meta, blobs, workers }, { graceMs: 0, now: Date.now() + MAX_CHECKPOINT_MS + 1 }));
  const packsAfterGc = await packBlobs();
  out.small1000 = {
    folderWriteMs: Math.round(writeMs),
    writesPerSecond: Math.round(small.length / (writeMs / 1000)),
    packBlobsAfterWrites: packsAfterWrites,
    packBlobsAfterGc: packsAfterGc,
    gcMs: Math.round(gcMs),
    folderReadMs: Math.round(readMs),
    blobPutMs: Math.round(putMs),
    blobGetMs: Math.round(getMs),
  };

  // 10,000 rows to list (the 1,000 above plus directories and 9,000 more), pages of 1,000.
  for (let i = 0; i < 9000; i += 1) {
    await folders.write(ref, `many/${i}`, Readable.from([Buffer.from(`f${i}`)]), { operationId: `m${i}` });
  }
  const [rows, listMs] = await time(async () => {
    let n = 0;
    let cursor: string | undefined;
    do {
      const page = await folders.list(ref, { limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
      n += page.files.length;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    return n;
  });
  out.list = { rows, ms: Math.round(listMs), pageOf200Ms: Math.round((await time(() => folders.list(ref)))[1]) };

  // One large file: Folders vs a plain streamed blob put of the same bytes.
  const bytes = bigMiB * 1024 * 1024;
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 50);
  const rssBefore = process.memoryUsage().rss;
  const [, bigWriteMs] = await time(() => folders.write(ref, 'big.bin', stream(bytes, 1), { operationId: 'big' }));
  const folderPeak = peak;
  peak = 0;
  const [, bigReadMs] = await time(async () => {
    const h = createHash('sha256');
    for await (const p of (await folders.open(ref, 'big.bin')).body) h.update(p);
  });
  const [, bigPutMs] = await time(() => blobs.put('bench/big', Readable.from(stream(bytes, 2)), { expectedSize: bytes }));
  const putPeak = peak;
  const [, bigGetMs] = await time(async () => {
    for await (const _ of await blobs.getStream('bench/big'));
  });
  clearInterval(sampler);
  const mbs = (ms: number) => Math.round(bytes / 1e6 / (ms / 1000));
  out.big = {
    mib: bigMiB,
    folderWriteMBs: mbs(bigWriteMs),
    folderReadMBs: mbs(bigReadMs),
    blobPutMBs: mbs(bigPutMs),
    blobGetMBs: mbs(bigGetMs),
    rssBeforeMiB: Math.round(rssBefore / 2 ** 20),
    folderWritePeakRssMiB: Math.round(folderPeak / 2 ** 20),
    blobPutPeakRssMiB: Math.round(putPeak / 2 ** 20),
  };
  console.log(JSON.stringify(out, null, 2));
  await workers.close();
  await meta.close();
  await blobs.close();
  for (const c of cleanups) await c();
  await fs.rm(dir, { recursive: true, force: true });
}

await main();
