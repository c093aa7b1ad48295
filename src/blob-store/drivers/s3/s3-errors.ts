import { HoldfastError, NotFoundError, StoreError } from '../../../errors.js';

/** What a failed request was about; every message built from it names driver, bucket and endpoint. */
export interface S3ErrorContext {
  readonly bucket: string;
  /** Printable endpoint, never containing credentials. */
  readonly endpoint: string;
  /** S3 operation name, e.g. `PutObject`. */
  readonly operation: string;
  /** Blob key (without the configured prefix), when the request was about one object. */
  readonly key?: string;
  /** How many tries were made before giving up. */
  readonly attempts: number;
}

/** The fields the AWS SDK puts on service and network errors; all optional because any value can be thrown. */
interface SdkErrorShape {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly message?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
}

/** Errors that say the request itself is wrong or the answer is final: retrying repeats them. */
const PERMANENT_NAMES = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'NoSuchKey',
  'NotFound',
  'NoSuchBucket',
  'NoSuchUpload',
  'PreconditionFailed',
  'InvalidRange',
  'AbortError',
]);
const AUTH_NAMES = new Set(['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken']);
/**
 * Service errors worth retrying. `BadDigest` means the bytes were damaged in transit (the MD5
 * we sent did not match what arrived); the driver resends from a buffer, so a retry is sound.
 * `ConditionalRequestConflict`/`OperationAborted` are 409s for a concurrent conditional write.
 */
const TRANSIENT_NAMES = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'RequestTimeout',
  'TimeoutError',
  'Throttling',
  'ThrottlingException',
  'RequestThrottled',
  'ConditionalRequestConflict',
  'OperationAborted',
  'BadDigest',
]);
/** Socket-level failures: the request may not have reached the server, or its answer was lost. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
]);
const MAX_DETAIL_CHARS = 300;

function shape(error: unknown): SdkErrorShape {
  return typeof error === 'object' && error !== null ? (error as SdkErrorShape) : {};
}

/** The S3 error code (SDK `name`, e.g. `NoSuchKey`), if the thrown value has one. */
export function s3ErrorName(error: unknown): string | undefined {
  const name = shape(error).name;
  return typeof name === 'string' ? name : undefined;
}

/** The HTTP status of the failed response, if there was a response. */
export function s3ErrorStatus(error: unknown): number | undefined {
  const status = shape(error).$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

function networkCode(error: unknown): string | undefined {
  const code = shape(error).code;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return code;
  const message = shape(error).message;
  return typeof message === 'string' && /socket hang up/i.test(message) ? 'ECONNRESET' : undefined;
}

/** True for a `412 PreconditionFailed`: an `If-None-Match: *` write found the key already there. */
export function isPreconditionFailed(error: unknown): boolean {
  return s3ErrorName(error) === 'PreconditionFailed' || s3ErrorStatus(error) === 412;
}

/**
 * Whether sending the same request again may succeed: 5xx, 429/throttling, timeouts, 409
 * conditional conflicts and connection resets/refusals. Never for authentication failures, a
 * missing bucket/key/upload, a failed precondition, or a cancelled request.
 */
export function isTransientS3Error(error: unknown): boolean {
  if (error instanceof HoldfastError) return error instanceof StoreError && error.transient;
  const name = s3ErrorName(error);
  const status = s3ErrorStatus(error);
  if (name !== undefined && PERMANENT_NAMES.has(name)) return false;
  if (status === 401 || status === 403 || status === 404 || status === 412) return false;
  if (name !== undefined && TRANSIENT_NAMES.has(name)) return true;
  if (networkCode(error) !== undefined) return true;
  return status !== undefined && (status >= 500 || status === 429);
}

function detail(error: unknown): string {
  const { message } = shape(error);
  const name = s3ErrorName(error) ?? 'Error';
  const status = s3ErrorStatus(error);
  const text = `${status === undefined ? '' : `${status} `}${name}: ${typeof message === 'string' ? message : String(error)}`;
  return text.length > MAX_DETAIL_CHARS ? `${text.slice(0, MAX_DETAIL_CHARS)}…` : text;
}

/**
 * Turns whatever an S3 call threw (after retries) into a {@link HoldfastError}: `NOT_FOUND` for a
 * missing key, otherwise `STORE_UNAVAILABLE` whose `transient` flag says whether a later retry
 * may help. Holdfast errors pass through unchanged. Messages say what to do next and never
 * contain credentials.
 */
export function toHoldfastError(error: unknown, context: S3ErrorContext): HoldfastError {
  if (error instanceof HoldfastError) return error;
  const { bucket, endpoint, operation, key, attempts } = context;
  const name = s3ErrorName(error);
  const status = s3ErrorStatus(error);
  const data = {
    driver: 's3',
    bucket,
    endpoint,
    operation,
    ...(key === undefined ? {} : { key }),
    ...(name === undefined ? {} : { s3Code: name }),
    ...(status === undefined ? {} : { status }),
    attempts,
  };
  const what = key === undefined ? operation : `${operation} "${key}"`;
  if (name === 'NoSuchBucket') {
    return new StoreError(`[s3] bucket ${bucket} not found at ${endpoint}: create it or set HOLDFAST_BLOBS`, { data, cause: error });
  }
  if ((name !== undefined && AUTH_NAMES.has(name)) || status === 401 || status === 403) {
    return new StoreError(
      `[s3] ${what} was refused by bucket ${bucket} at ${endpoint} (${name ?? status}): check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the bucket policy`,
      { data, cause: error },
    );
  }
  if ((name === 'NoSuchKey' || name === 'NotFound') && key !== undefined) {
    return new NotFoundError(`[s3] no object "${key}" in bucket ${bucket} at ${endpoint}`, { data, cause: error });
  }
  const transient = isTransientS3Error(error);
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  const network = networkCode(error);
  if (network !== undefined) {
    return new StoreError(
      `[s3] cannot reach ${endpoint} for ${what} in bucket ${bucket}${tries} (${network}): check that the endpoint is up and reachable`,
      {
        data,
        cause: error,
        transient,
      },
    );
  }
  const hint = transient ? ': the store is overloaded or failing, try again later' : '';
  return new StoreError(`[s3] ${what} failed in bucket ${bucket} at ${endpoint}${tries}: ${detail(error)}${hint}`, {
    data,
    cause: error,
    transient,
  });
}
