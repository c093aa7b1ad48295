import type { BlobStore } from '../blob-store/blob-store.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { ContentWorkers } from '../objects/content-workers.js';

/** The services the engine's checkpoint, restore, inspect and GC algorithms use. */
export interface SnapshotDeps {
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
  /** Worker threads that hash, chunk and compress. */
  readonly workers: ContentWorkers;
  /** Where stat caches live (outside every workspace). */
  readonly cacheDir: string;
}

/** A checkpoint running longer than this fails: GC's grace period assumes it. */
export const MAX_CHECKPOINT_MS = 60 * 60 * 1000;
