import type { BlobStore } from '../blob-store/blob-store.js';
import type { CheckpointReason, MetadataStore } from '../metadata/metadata-store.js';
import type { ContentWorkers } from '../objects/content-workers.js';
import type { ScanReport } from './workspace-source.js';

/** The services the engine's checkpoint, restore, inspect and GC algorithms use. */
export interface SnapshotDeps {
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
  /** Worker threads that hash, chunk and compress. */
  readonly workers: ContentWorkers;
  /** Where stat caches live (outside every workspace). */
  readonly cacheDir: string;
  /** Told of every checkpoint and restore this service finishes, for metrics; never throws into the engine. */
  readonly observer?: SnapshotObserver;
}

/**
 * A finished checkpoint: `ready` with what it wrote (`bytesNew`: raw bytes of objects no earlier
 * checkpoint had stored), or `failed` with the error's closed code. Bad input refused before a
 * checkpoint row exists is not one.
 */
export type CheckpointFinished =
  | {
      readonly outcome: 'ready';
      readonly reason: CheckpointReason;
      readonly durationMs: number;
      readonly files: number;
      readonly bytesNew: number;
      /** How its source made the scan, when it says (an agent's watches). */
      readonly scan?: ScanReport;
    }
  | { readonly outcome: 'failed'; readonly reason: CheckpointReason; readonly durationMs: number; readonly code: string };

/** A finished restore (every restore, not only a run's recovery): `ok` with the bytes fetched from the blob store, or `failed` with its code. */
export type RestoreFinished =
  | { readonly outcome: 'ok'; readonly durationMs: number; readonly bytesFetched: number }
  | { readonly outcome: 'failed'; readonly durationMs: number; readonly code: string };

/** Listens to the engine's finished checkpoints and restores (see {@link SnapshotDeps.observer}). */
export interface SnapshotObserver {
  checkpointFinished(event: CheckpointFinished): void;
  restoreFinished(event: RestoreFinished): void;
}

/** A checkpoint running longer than this fails: GC's grace period assumes it. */
export const MAX_CHECKPOINT_MS = 60 * 60 * 1000;
