import { createHash } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { withRetry } from '../../../core/retry.js';
import { NotFoundError, StoreError } from '../../../errors.js';
import { isTransientS3Error, s3ErrorName, toHoldfastError } from './s3-errors.js';
import type { S3Settings } from './s3-settings.js';

/** The AWS SDK module, loaded lazily by `createS3BlobStore`; only its type is known here. */
export type S3Sdk = typeof import('@aws-sdk/client-s3');

/**
 * What every part of the S3 driver shares: the SDK, one client, the settings, and the one
 * wrapper ({@link S3Requests.run}) through which requests are retried and errors mapped.
 * Helpers named `raw…` throw unmapped SDK errors and are meant to be called inside `run`.
 */
export class S3Requests {
  constructor(
    readonly sdk: S3Sdk,
    readonly client: S3Client,
    readonly settings: S3Settings,
  ) {}

  /** The bucket key of a blob key: the configured prefix plus the key. */
  objectKey(key: string): string {
    return this.settings.keyPrefix + key;
  }

  /**
   * Runs `fn` (one S3 request, or a request plus reading its body), retrying transient
   * failures with backoff, then maps the final error: `NOT_FOUND`, `STORE_UNAVAILABLE` with
   * `transient`, or a Holdfast error `fn` threw itself. `fn` gets the 1-based attempt number.
   */
  async run<T>(operation: string, key: string | undefined, fn: (attempt: number) => Promise<T>, signal?: AbortSignal): Promise<T> {
    let attempts = 0;
    const counted = (attempt: number): Promise<T> => {
      attempts = attempt;
      return fn(attempt);
    };
    try {
      return await withRetry(counted, this.settings.retry, isTransientS3Error, signal);
    } catch (error) {
      const { bucket, endpointLabel: endpoint } = this.settings;
      throw toHoldfastError(error, { bucket, endpoint, operation, attempts, ...(key === undefined ? {} : { key }) });
    }
  }

  /** HeadObject: the object's size, or undefined when it does not exist (or, alas, its bucket: a HEAD 404 has no body to tell). */
  async rawHead(key: string): Promise<number | undefined> {
    try {
      const output = await this.client.send(new this.sdk.HeadObjectCommand({ Bucket: this.settings.bucket, Key: this.objectKey(key) }));
      return output.ContentLength ?? 0;
    } catch (error) {
      const name = s3ErrorName(error);
      if (name === 'NotFound' || name === 'NoSuchKey') return undefined;
      throw error;
    }
  }

  /** The `NOT_FOUND` error for `key`. */
  notFound(key: string): NotFoundError {
    return new NotFoundError(`[s3] no object "${key}" in bucket ${this.settings.bucket} at ${this.settings.endpointLabel}`, {
      data: { driver: 's3', bucket: this.settings.bucket, key },
    });
  }

  /** A non-transient `STORE_UNAVAILABLE` for answers the driver cannot use; names bucket and endpoint. */
  storeError(what: string, key: string, cause?: unknown): StoreError {
    const { bucket, endpointLabel: endpoint } = this.settings;
    return new StoreError(`[s3] ${what} (bucket ${bucket} at ${endpoint})`, { data: { driver: 's3', bucket, endpoint, key }, cause });
  }
}

/** Request options carrying `signal`, if there is one. */
export function withSignal(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal === undefined ? {} : { abortSignal: signal };
}

/** The Content-MD5 header value: lets the server reject a body damaged on the way. */
export function md5Base64(bytes: Uint8Array): string {
  return createHash('md5').update(bytes).digest('base64');
}
