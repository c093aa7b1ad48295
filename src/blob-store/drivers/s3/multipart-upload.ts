import { InputError, IntegrityError } from '../../../errors.js';
import type { PutResult } from '../../blob-store.js';

/** S3 allows at most this many parts in one multipart upload. */
export const MAX_PARTS = 10_000;

/** One uploaded part, as CompleteMultipartUpload wants it. */
export interface CompletedPart {
  readonly PartNumber: number;
  readonly ETag: string;
}

/**
 * The S3 requests a multipart upload is made of. Each already retries transient failures and
 * maps errors; the orchestration below only sequences them.
 */
export interface MultipartOperations {
  /** CreateMultipartUpload; resolves with the upload id. */
  create(): Promise<string>;
  /** UploadPart of a buffered part (so it can be resent); resolves with the part's ETag. */
  uploadPart(uploadId: string, partNumber: number, body: Uint8Array, signal: AbortSignal): Promise<string>;
  /** CompleteMultipartUpload with `If-None-Match: *`; false when the key already existed. */
  complete(uploadId: string, parts: readonly CompletedPart[]): Promise<boolean>;
  /** AbortMultipartUpload; must tolerate an upload that is already gone. */
  abort(uploadId: string): Promise<void>;
}

/** Limits and checks for {@link uploadInParts}. */
export interface MultipartOptions {
  /** Blob key, for messages. */
  readonly key: string;
  /** Parts in flight at once; together with the part size this bounds memory. */
  readonly maxConcurrency: number;
  /** The body must have exactly this many bytes, checked before completing. */
  readonly expectedSize?: number | undefined;
  /** Cancels the upload; in-flight parts are cancelled and the upload is aborted. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Uploads `parts` (already cut to the part size) as one multipart upload: at most
 * `maxConcurrency` parts in flight, the next part read only when a slot frees, so memory stays
 * near `maxConcurrency + 1` parts whatever the body's length.
 *
 * The object appears only on completion, which happens only after every part succeeded and
 * the total length matched `expectedSize`. On any failure or cancellation the in-flight parts
 * are cancelled, the upload is aborted (best effort: if that fails too, the original error is
 * what the caller needs, and a bucket lifecycle rule reclaims the parts), and the error is
 * rethrown. A key that already existed at completion yields `{created: false, size: 0}`.
 */
export async function uploadInParts(
  ops: MultipartOperations,
  parts: AsyncIterator<Uint8Array>,
  options: MultipartOptions,
): Promise<PutResult> {
  const uploadId = await ops.create();
  const cancelParts = new AbortController();
  const partSignal = options.signal === undefined ? cancelParts.signal : AbortSignal.any([cancelParts.signal, options.signal]);
  const inFlight = new Set<Promise<void>>();
  const completed: CompletedPart[] = [];
  // The first part failure; later ones are mostly the cancellations it caused.
  const failure: { failed: boolean; error: unknown } = { failed: false, error: undefined };
  let total = 0;
  try {
    for (let partNumber = 1; ; partNumber += 1) {
      options.signal?.throwIfAborted();
      if (failure.failed) throw failure.error;
      const next = await parts.next();
      if (next.done === true) break;
      total += next.value.length;
      checkGrowth(options, partNumber, total);
      const upload: Promise<void> = ops.uploadPart(uploadId, partNumber, next.value, partSignal).then(
        (etag) => {
          completed.push({ PartNumber: partNumber, ETag: etag });
        },
        (error: unknown) => {
          if (!failure.failed) {
            failure.failed = true;
            failure.error = error;
          }
          cancelParts.abort();
        },
      );
      inFlight.add(upload);
      void upload.finally(() => inFlight.delete(upload));
      if (inFlight.size >= options.maxConcurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    options.signal?.throwIfAborted();
    if (failure.failed) throw failure.error;
    if (options.expectedSize !== undefined && total !== options.expectedSize) throw sizeMismatch(options.key, total, options.expectedSize);
    completed.sort((a, b) => a.PartNumber - b.PartNumber);
    if (await ops.complete(uploadId, completed)) return { created: true, size: total };
    // S3 keeps an upload whose completion failed its precondition; drop its parts.
    await ops.abort(uploadId).catch(() => undefined);
    return { created: false, size: 0 };
  } catch (error) {
    cancelParts.abort();
    await Promise.allSettled(inFlight);
    await ops.abort(uploadId).catch(() => undefined);
    throw error;
  }
}

function checkGrowth(options: MultipartOptions, partNumber: number, total: number): void {
  if (partNumber > MAX_PARTS) {
    throw new InputError('LIMIT_EXCEEDED', `[s3] "${options.key}" needs more than ${MAX_PARTS} parts: raise partSizeBytes`, {
      data: { key: options.key, maxParts: MAX_PARTS },
    });
  }
  // Stop reading as soon as the body is too long instead of uploading the rest for nothing.
  if (options.expectedSize !== undefined && total > options.expectedSize)
    throw sizeMismatch(options.key, total, options.expectedSize, 'at least ');
}

/** The `INTEGRITY` error for a body whose length is not the announced one. */
export function sizeMismatch(key: string, size: number, expectedSize: number, qualifier = ''): IntegrityError {
  return new IntegrityError(
    'INTEGRITY',
    `[s3] "${key}": body has ${qualifier}${size} bytes, expected ${expectedSize}; nothing was stored`,
    {
      data: { key, size, expectedSize },
    },
  );
}
