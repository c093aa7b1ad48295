import { Readable } from 'node:stream';
import type { BlobStore } from '../blob-store/blob-store.js';
import { IntegrityError, isHoldfastError, StoreError } from '../errors.js';
import { packKey } from './pack-format.js';
import type { SealedPack } from './pack-writer.js';

/** What one pack upload did. */
export interface UploadResult {
  /** Blob-store writes made: always 1 (retries, where the store makes them, happen inside it). */
  readonly writes: number;
  /** False when the blob already existed (identical bytes under the same content address). */
  readonly created: boolean;
}

/**
 * Makes one sealed pack durable: a create-only put under its content address, then verified
 * by size. The bytes are held in memory and hashed into the key, so what was sent is exactly
 * what the id names; the S3 driver adds Content-MD5 on the wire.
 *
 * No retry here: the blob store is the one retry layer (DESIGN section 4 step 6: up to 3
 * retries with the same key). The S3 driver retries each request (`core/retry.ts`, full
 * jitter) where it knows which S3 failures are transient; it resends the same buffered,
 * MD5-checked bytes under the same key, retries one failed multipart part rather than the
 * whole pack, and meets its own write after a lost answer (`If-None-Match`). Retrying the
 * whole upload on top multiplied that: up to 4 x 4 PUTs of a 16 MiB pack, under two backoff
 * formulas. Local disk has no transient network to ride out: its put is a temp file, fsync
 * and rename, and a failure fails the checkpoint with the head unchanged.
 */
export async function uploadPack(blobs: BlobStore, pack: SealedPack, signal?: AbortSignal): Promise<UploadResult> {
  const key = packKey(pack.id);
  try {
    const put = await blobs.put(key, Readable.from(pack.parts), { expectedSize: pack.size, ...(signal === undefined ? {} : { signal }) });
    const stat = await blobs.stat(key);
    if (stat?.size !== pack.size) {
      throw new IntegrityError(
        'INTEGRITY',
        `[${blobs.name}] pack ${pack.id} reads back as ${stat?.size ?? 'missing'} bytes, expected ${pack.size}`,
        {
          data: { pack: pack.id, expected: pack.size, actual: stat?.size ?? null },
        },
      );
    }
    // After a lost acknowledgement the store's retry finds our own write and reports false;
    // that is fine: "not created" only asks the commit to check that GC is not deleting the blob.
    return { writes: 1, created: put.created };
  } catch (error) {
    throw isHoldfastError(error)
      ? error
      : new StoreError(`[${blobs.name}] upload of pack ${pack.id} failed: ${String(error)}`, { cause: error, data: { pack: pack.id } });
  }
}
