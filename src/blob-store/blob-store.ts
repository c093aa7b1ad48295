/**
 * `blob-store/`: the `BlobStore` port (file bytes), its drivers (`drivers/local-disk.ts`,
 * `drivers/s3.ts`) and the contract suite every driver passes.
 */
import type { Readable } from 'node:stream';

/**
 * The port for file bytes. A BlobStore is a flat namespace of immutable objects addressed by
 * keys such as `packs/ab/abcdef…`. It never knows what the bytes mean; the metadata store
 * never holds them.
 *
 * Keys are validated by {@link assertBlobKey} in every driver: relative, `/`-separated
 * segments of `A-Z a-z 0-9 . _ -`, no segment starting with `.`, at most 1024 bytes.
 */
export interface BlobStore {
  /** Driver name used in messages and metrics, e.g. `local-disk` or `s3`. */
  readonly name: string;
  /**
   * The directory on this machine that holds the store's bytes, absolute, when it has one
   * (local disk); undefined for remote stores. Restore refuses a target overlapping it.
   */
  readonly localPath?: string;

  /**
   * Stores `body` under `key` if the key does not exist yet.
   *
   * - Idempotent and create-only: an existing key is never rewritten; the call then resolves
   *   with `created: false` and the stored bytes stay as they were (content addressing makes
   *   them equal by construction; the store does not compare them).
   * - Resolves only once the bytes are durable (fsync + rename on disk; a completed PUT or
   *   multipart completion on S3). A rejected put leaves no object and no partial object.
   * - `body` is a buffer (small objects) or a stream / async iterable of chunks (large ones,
   *   never held in memory whole). A stream can be consumed once: retries of a streamed put
   *   are the caller's job, with a fresh stream.
   * - If `expectedSize` is given and the body's length differs, rejects with `INTEGRITY`.
   */
  put(key: string, body: BlobBody, options?: PutOptions): Promise<PutResult>;

  /**
   * Reads a whole object, or `range` of it, into memory. Use {@link BlobStore.getStream} for
   * anything large. A missing key rejects with `NOT_FOUND`. A range reaching past the end is
   * cut at the end; a range starting past the end rejects with `INVALID_INPUT`.
   */
  get(key: string, range?: ByteRange): Promise<Uint8Array>;

  /** Like {@link BlobStore.get} but streamed. `NOT_FOUND` is raised before the stream is returned. */
  getStream(key: string, range?: ByteRange): Promise<Readable>;

  /** Size of an object, or `undefined` when the key does not exist. Never throws `NOT_FOUND`. */
  stat(key: string): Promise<BlobStat | undefined>;

  /**
   * Every object whose key starts with `prefix` (a plain string prefix, not a directory), in
   * ascending byte order of key. Paginated underneath; safe to stop early with `break`.
   */
  list(prefix: string): AsyncIterable<BlobStat>;

  /** Removes an object. Idempotent: deleting a missing key succeeds. */
  delete(key: string): Promise<void>;

  /** Releases connections and handles. The store must not be used afterwards. */
  close(): Promise<void>;
}

/** What {@link BlobStore.put} accepts. */
export type BlobBody = Uint8Array | Readable | AsyncIterable<Uint8Array>;

/** Options for {@link BlobStore.put}. */
export interface PutOptions {
  /** Length the body must have; a mismatch rejects with `INTEGRITY` and stores nothing. */
  readonly expectedSize?: number;
  /** Cancels an in-flight put; nothing is stored. */
  readonly signal?: AbortSignal;
}

/** Result of {@link BlobStore.put}. */
export interface PutResult {
  /** False when the key already existed and nothing was written. */
  readonly created: boolean;
  /** Bytes written by this call (0 when `created` is false). */
  readonly size: number;
}

/** A byte range: `length` bytes starting at `offset`. */
export interface ByteRange {
  readonly offset: number;
  readonly length: number;
}

/** One stored object as seen by `stat` and `list`. */
export interface BlobStat {
  readonly key: string;
  readonly size: number;
}
