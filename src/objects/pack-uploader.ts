import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BlobStore } from '../blob-store/blob-store.js';
import { IntegrityError, isHoldfastError, StoreError } from '../errors.js';
import { packKey } from './pack-format.js';
import type { SealedPack } from './pack-writer.js';

/** Attempts per pack upload: the first plus up to 3 retries of transient failures. */
export const UPLOAD_ATTEMPTS = 4;
const RETRY_BASE_DELAY_MS = 200;

/** What one pack upload did. */
export interface UploadResult {
  /** Blob-store writes made, retries included. */
  readonly writes: number;
  /** False when the blob already existed (identical bytes under the same content address). */
  readonly created: boolean;
}

/**
 * Makes one sealed pack durable: a create-only put under its content address, retried with
 * backoff on transient failures (same key, same bytes), then verified by size. Returns the
 * number of blob-store writes it made and whether the blob was new. The bytes are held in memory and hashed into the key,
 * so what was sent is exactly what the id names; the S3 driver adds Content-MD5 on the wire.
 */
export async function uploadPack(blobs: BlobStore, pack: SealedPack, signal?: AbortSignal): Promise<UploadResult> {
  const key = packKey(pack.id);
  let writes = 0;
  for (let attempt = 1; ; attempt += 1) {
    try {
      writes += 1;
      // A fresh stream over the same in-memory parts for every attempt.
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
      // After a lost acknowledgement the retry finds our own write and reports false; that is
      // fine: "not created" only asks the commit to check that GC is not deleting the blob.
      return { writes, created: put.created };
    } catch (error) {
      const transient = error instanceof StoreError && error.transient;
      if (!transient || attempt >= UPLOAD_ATTEMPTS || signal?.aborted) {
        throw isHoldfastError(error)
          ? error
          : new StoreError(`[${blobs.name}] upload of pack ${pack.id} failed: ${String(error)}`, { cause: error, data: { pack: pack.id } });
      }
      await sleep(RETRY_BASE_DELAY_MS * 2 ** (attempt - 1) * (0.5 + Math.random()));
    }
  }
}
