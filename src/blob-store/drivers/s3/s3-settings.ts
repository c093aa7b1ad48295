import type { BlobsConfig } from '../../../config.js';
import type { RetryPolicy } from '../../../core/retry.js';
import { InputError } from '../../../errors.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Bodies up to this size go up in one PutObject (a ~16 MiB pack is one request). */
export const DEFAULT_MULTIPART_THRESHOLD_BYTES = 32 * MiB;
/** Size of each multipart part; memory per upload is about `(maxConcurrency + 1)` parts. */
export const DEFAULT_PART_SIZE_BYTES = 8 * MiB;
/** Parts in flight per multipart upload. */
export const DEFAULT_MAX_CONCURRENCY = 4;
/** Tries per request, including the first. */
export const DEFAULT_MAX_ATTEMPTS = 4;
/** Backoff bound before the first retry. */
export const DEFAULT_RETRY_BASE_DELAY_MS = 100;
/** Cap on one backoff. */
export const DEFAULT_RETRY_MAX_DELAY_MS = 5_000;
/** Limit until a response starts, and on silence on a connection. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;
/** Limit on opening a connection. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** S3's own limits: parts are 5 MiB-5 GiB (except the last), a single PUT at most 5 GiB. */
const MIN_PART_SIZE_BYTES = 5 * MiB;
const MAX_PART_SIZE_BYTES = 5 * GiB;
const MAX_SINGLE_PUT_BYTES = 5 * GiB;

/** The `s3` variant of {@link BlobsConfig}: bucket, key prefix, endpoint, region, credentials. */
export type S3BlobsConfig = Extract<BlobsConfig, { kind: 's3' }>;

/** Optional knobs of the S3 driver; each has a default suited to packs of about 16 MiB. */
export interface S3BlobStoreTunables {
  /** Bodies of at most this many bytes are sent in one PutObject, larger ones as multipart. Default 16 MiB. */
  readonly multipartThresholdBytes?: number;
  /** Multipart part size, 5 MiB-5 GiB (S3's limits). Default 8 MiB. */
  readonly partSizeBytes?: number;
  /** Parts uploaded at once per put. Default 4. */
  readonly maxConcurrency?: number;
  /** Tries per request including the first; only transient failures are retried. Default 4. */
  readonly maxAttempts?: number;
  /** Backoff bound before the first retry; it doubles per retry, with full jitter. Default 100. */
  readonly retryBaseDelayMs?: number;
  /** Cap on one backoff. Default 5000. */
  readonly retryMaxDelayMs?: number;
  /**
   * Limit on one request until its response starts (sending the body included), and on
   * silence on a connection; a `getStream` body left unread for longer is cut. Default 120 000.
   */
  readonly requestTimeoutMs?: number;
  /** Limit on opening a connection. Default 10 000. */
  readonly connectTimeoutMs?: number;
}

/** What {@link createS3BlobStore} accepts: the parsed `s3://` configuration plus tunables. */
export type S3BlobStoreConfig = S3BlobsConfig & S3BlobStoreTunables;

/** Validated, defaulted settings the driver runs on. */
export interface S3Settings {
  readonly bucket: string;
  /** `prefix/` or empty: prepended to every key, stripped from listed keys. */
  readonly keyPrefix: string;
  /** The endpoint for messages: the configured one, or AWS's regional endpoint. */
  readonly endpointLabel: string;
  readonly multipartThresholdBytes: number;
  readonly partSizeBytes: number;
  readonly maxConcurrency: number;
  readonly retry: RetryPolicy;
  readonly requestTimeoutMs: number;
  readonly connectTimeoutMs: number;
}

function integer(name: keyof S3BlobStoreTunables, value: number | undefined, fallback: number, min: number, max: number): number {
  const resolved = value ?? fallback;
  if (!Number.isSafeInteger(resolved) || resolved < min || resolved > max) {
    throw new InputError('INVALID_INPUT', `[s3] ${name} must be an integer from ${min} to ${max}, got ${value}`, {
      data: { setting: name, value },
    });
  }
  return resolved;
}

/** Applies defaults and checks ranges; throws `INVALID_INPUT` naming the bad setting. */
export function resolveS3Settings(config: S3BlobStoreConfig): S3Settings {
  if (config.bucket === '')
    throw new InputError('INVALID_INPUT', '[s3] the bucket name is empty: set HOLDFAST_BLOBS=s3://BUCKET/prefix', {
      data: { setting: 'bucket' },
    });
  const prefix = config.prefix.replace(/^\/+|\/+$/g, '');
  const baseDelayMs = integer('retryBaseDelayMs', config.retryBaseDelayMs, DEFAULT_RETRY_BASE_DELAY_MS, 0, 60_000);
  return {
    bucket: config.bucket,
    keyPrefix: prefix === '' ? '' : `${prefix}/`,
    endpointLabel: config.endpoint ?? `https://s3.${config.region}.amazonaws.com`,
    multipartThresholdBytes: integer(
      'multipartThresholdBytes',
      config.multipartThresholdBytes,
      DEFAULT_MULTIPART_THRESHOLD_BYTES,
      0,
      MAX_SINGLE_PUT_BYTES,
    ),
    partSizeBytes: integer('partSizeBytes', config.partSizeBytes, DEFAULT_PART_SIZE_BYTES, MIN_PART_SIZE_BYTES, MAX_PART_SIZE_BYTES),
    maxConcurrency: integer('maxConcurrency', config.maxConcurrency, DEFAULT_MAX_CONCURRENCY, 1, 64),
    retry: {
      maxAttempts: integer('maxAttempts', config.maxAttempts, DEFAULT_MAX_ATTEMPTS, 1, 20),
      baseDelayMs,
      maxDelayMs: integer(
        'retryMaxDelayMs',
        config.retryMaxDelayMs,
        Math.max(DEFAULT_RETRY_MAX_DELAY_MS, baseDelayMs),
        baseDelayMs,
        600_000,
      ),
    },
    requestTimeoutMs: integer('requestTimeoutMs', config.requestTimeoutMs, DEFAULT_REQUEST_TIMEOUT_MS, 1, 24 * 3_600_000),
    connectTimeoutMs: integer('connectTimeoutMs', config.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS, 1, 600_000),
  };
}
