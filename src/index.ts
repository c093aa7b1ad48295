import { randomBytes } from 'node:crypto';
import type { BlobStore } from './blob-store/blob-store.js';
import { openBlobStore } from './blob-store/open-blob-store.js';
import { type HoldfastConfig, loadConfig } from './config.js';
import { IntegrityError } from './errors.js';
import { type MetadataStore, openMetadataStore } from './metadata/metadata-store.js';
import { ContentWorkers } from './objects/content-workers.js';
import { Snapshots } from './snapshot/snapshots.js';
import { defaultCacheDir } from './snapshot/stat-cache.js';

export type { BlobBody, BlobStat, BlobStore, ByteRange, PutOptions, PutResult } from './blob-store/blob-store.js';
export { LocalDiskBlobStore } from './blob-store/drivers/local-disk.js';
export { openBlobStore } from './blob-store/open-blob-store.js';
export * from './config.js';
export * from './errors.js';
export type { MetadataStore } from './metadata/metadata-store.js';
export { openMetadataStore } from './metadata/metadata-store.js';
export type { RebuildOptions, RebuildReport } from './objects/index-rebuild.js';
export type { CheckpointProgress, CheckpointResult, CheckpointStats } from './snapshot/checkpoint.js';
export type { DiffEntry } from './snapshot/diff.js';
export type { GcOptions, GcReport } from './snapshot/gc.js';
export type { RestoreProgress, RestoreReceipt } from './snapshot/restore.js';
export type { RetentionPolicy } from './snapshot/retention.js';
export { DEFAULT_TENANT, Snapshots, type WorkspaceSummary } from './snapshot/snapshots.js';
export type { VerifyOptions, VerifyReport } from './snapshot/verify.js';

/** What {@link openHoldfast} takes. Injected instances win over the configuration. */
export interface OpenHoldfastOptions {
  /** Defaults to {@link loadConfig} over `process.env`. */
  readonly config?: HoldfastConfig;
  /** A BlobStore to use instead of the configured one (tests, custom drivers). */
  readonly blobs?: BlobStore;
  /** A MetadataStore to use instead of the configured one. */
  readonly meta?: MetadataStore;
  /** Where stat caches live; default `$HOLDFAST_CACHE_DIR` or `~/.cache/holdfast`. */
  readonly cacheDir?: string;
  /** Tenant the snapshot service works in; default `default`. */
  readonly tenant?: string;
}

/** Result of {@link Holdfast.selfCheck}. */
export interface SelfCheck {
  readonly schemaVersion: number;
  readonly probeBytes: number;
  readonly durationMs: number;
}

/** An open Holdfast: the two storage ports, and the services later built on them. */
export interface Holdfast {
  readonly config: HoldfastConfig;
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
  /** Checkpoints, restores and browsing by workspace name. */
  readonly snapshots: Snapshots;
  /** Writes, reads back and deletes a probe blob and reads the schema version. */
  selfCheck(): Promise<SelfCheck>;
  /** Closes what this instance opened (injected instances are left open). */
  close(): Promise<void>;
}

const PROBE_BYTES = 4096;

/**
 * The composition root: resolves the configuration, opens (and migrates) the metadata store
 * and opens the blob store. Drivers load lazily, so an embedded setup never loads the AWS SDK.
 */
export async function openHoldfast(options: OpenHoldfastOptions = {}): Promise<Holdfast> {
  const config = options.config ?? loadConfig();
  const meta = options.meta ?? (await openMetadataStore(config.meta));
  let blobs: BlobStore;
  try {
    blobs = options.blobs ?? (await openBlobStore(config.blobs));
  } catch (error) {
    if (options.meta === undefined) await meta.close();
    throw error;
  }
  const workers = new ContentWorkers();
  const snapshots = new Snapshots({ blobs, meta, workers, cacheDir: options.cacheDir ?? defaultCacheDir() }, options.tenant);
  return {
    config,
    blobs,
    meta,
    snapshots,
    async selfCheck() {
      const started = performance.now();
      const probe = randomBytes(PROBE_BYTES);
      const key = `probe/${probe.subarray(0, 16).toString('hex')}`;
      await blobs.put(key, probe, { expectedSize: PROBE_BYTES });
      try {
        const back = await blobs.get(key);
        if (!Buffer.from(back).equals(probe)) {
          throw new IntegrityError('INTEGRITY', `[${blobs.name}] the probe blob ${key} came back different from what was written`, {
            data: { key },
          });
        }
      } finally {
        await blobs.delete(key);
      }
      const schemaVersion = await meta.schemaVersion();
      return { schemaVersion, probeBytes: PROBE_BYTES, durationMs: Math.round(performance.now() - started) };
    },
    async close() {
      await workers.close();
      if (options.blobs === undefined) await blobs.close();
      if (options.meta === undefined) await meta.close();
    },
  };
}
