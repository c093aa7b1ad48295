import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { LocalDiskBlobStore } from '../../src/blob-store/drivers/local-disk.js';
import { createS3BlobStore } from '../../src/blob-store/drivers/s3.js';
import { type MetadataStore, openMetadataStore } from '../../src/metadata/metadata-store.js';
import { ContentWorkers } from '../../src/objects/content-workers.js';
import { Snapshots } from '../../src/snapshot/snapshots.js';
import { createTestDatabase } from './postgres.js';
import { startS3Target } from './s3-server.js';

/** One opened pair of storage backends for an end-to-end test, with the engine on top. */
export interface OpenedBackends {
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
  /** A fresh temp directory for workspaces, restores and caches. */
  readonly dir: string;
  readonly workers: ContentWorkers;
  /** The snapshot service over these stores (stat caches under `dir/cache`). */
  readonly snapshots: Snapshots;
  /** Stops the workers, closes the stores and removes everything the backends created. */
  cleanup(): Promise<void>;
}

/** A backend combination that engine tests run against. */
export interface BackendCase {
  readonly name: string;
  open(): Promise<OpenedBackends>;
}

/** Puts the engine on opened stores; `release` undoes what the backend itself set up. */
function withEngine(dir: string, blobs: BlobStore, meta: MetadataStore, release: () => Promise<void>): OpenedBackends {
  const workers = new ContentWorkers();
  const snapshots = new Snapshots({ blobs, meta, workers, cacheDir: path.join(dir, 'cache') });
  return {
    blobs,
    meta,
    dir,
    workers,
    snapshots,
    async cleanup() {
      await workers.close();
      await meta.close();
      await blobs.close();
      await release();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/** The embedded pair (local disk + SQLite) and the scaled-out pair (S3 + PostgreSQL). */
const ALL_BACKENDS: readonly BackendCase[] = [
  {
    name: 'local-disk + sqlite',
    async open() {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-e2e-'));
      const blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'store', 'blobs') });
      const meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'store', 'meta.db') });
      return withEngine(dir, blobs, meta, async () => undefined);
    },
  },
  {
    name: 's3 + postgres',
    async open() {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-e2e-'));
      const db = await createTestDatabase({ migrated: true });
      const s3 = await startS3Target();
      const blobs = await createS3BlobStore({
        kind: 's3',
        bucket: s3.bucket,
        prefix: s3.prefix,
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: s3.forcePathStyle,
        credentials: { ...s3.credentials },
      });
      const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
      return withEngine(dir, blobs, meta, async () => {
        await s3.close();
        await db.drop();
      });
    },
  },
];

/**
 * The backends engine tests run against: both pairs in the whole suite (`npm test`); the
 * embedded pair alone in the quick tier (`npm run test:quick`, which sets
 * `HOLDFAST_TEST_TIER=quick`), so the inner loop needs neither PostgreSQL nor S3.
 */
export const BACKENDS: readonly BackendCase[] = process.env.HOLDFAST_TEST_TIER === 'quick' ? ALL_BACKENDS.slice(0, 1) : ALL_BACKENDS;
