import type { Readable } from 'node:stream';
import { HoldfastError, InputError } from '../../errors.js';
import { assertBlobKey, assertBlobPrefix, assertByteRange } from '../blob-key.js';
import type { BlobBody, BlobStat, BlobStore, ByteRange, PutOptions, PutResult } from '../blob-store.js';
import { prepend, readParts, sliceParts } from './s3/body-parts.js';
import { s3MultipartOperations } from './s3/multipart-operations.js';
import { sizeMismatch, uploadInParts } from './s3/multipart-upload.js';
import { openObject } from './s3/object-reader.js';
import { isPreconditionFailed, s3ErrorName } from './s3/s3-errors.js';
import { md5Base64, S3Requests, withSignal } from './s3/s3-requests.js';
import { resolveS3Settings, type S3BlobStoreConfig } from './s3/s3-settings.js';

export type { S3BlobStoreConfig, S3BlobStoreTunables, S3BlobsConfig } from './s3/s3-settings.js';

/**
 * Opens an S3 (or S3-compatible) {@link BlobStore}. Settings are checked first (`INVALID_INPUT`);
 * no request is sent, so a missing bucket or bad credentials surface on first use. The AWS SDK
 * is imported here, not at module load, so commands that never touch S3 start fast.
 */
export async function createS3BlobStore(config: S3BlobStoreConfig): Promise<S3BlobStore> {
  const settings = resolveS3Settings(config);
  const sdk = await import('@aws-sdk/client-s3');
  const client = new sdk.S3Client({
    region: config.region,
    forcePathStyle: config.forcePathStyle,
    ...(config.endpoint === undefined ? {} : { endpoint: config.endpoint }),
    // A copy: the SDK writes bookkeeping onto the credentials object, and config objects are frozen.
    ...(config.credentials === undefined ? {} : { credentials: { ...config.credentials } }),
    // Retries happen in one place, withRetry, which knows which failures are worth it.
    maxAttempts: 1,
    // With the defaults the SDK frames streamed bodies as aws-chunked with trailing checksums,
    // which some S3-compatible servers store verbatim. Content-MD5 covers integrity instead.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      connectionTimeout: settings.connectTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      socketTimeout: settings.requestTimeoutMs,
      throwOnRequestTimeout: true,
    },
  });
  return new S3BlobStore(new S3Requests(sdk, client, settings));
}

/**
 * BlobStore on an S3 bucket, every key under the configured prefix. Create-only puts use
 * `If-None-Match: *` (on PutObject and CompleteMultipartUpload), so an existing object is never
 * overwritten, even by a concurrent writer. Every body goes with Content-Length and
 * Content-MD5, so the server rejects bytes damaged on the way. Transient failures are retried
 * with backoff; a streamed body is never resent whole, only its buffered parts are.
 */
export class S3BlobStore implements BlobStore {
  readonly name = 's3';

  /** Use {@link createS3BlobStore}. */
  constructor(private readonly requests: S3Requests) {}

  async put(key: string, body: BlobBody, options: PutOptions = {}): Promise<PutResult> {
    assertBlobKey(key);
    const { expectedSize, signal } = options;
    if (expectedSize !== undefined && !(Number.isSafeInteger(expectedSize) && expectedSize >= 0)) {
      throw new InputError('INVALID_INPUT', `expectedSize must be a non-negative integer, got ${expectedSize}`, {
        data: { key, expectedSize },
      });
    }
    const { multipartThresholdBytes, partSizeBytes } = this.requests.settings;
    try {
      signal?.throwIfAborted();
      if (!(body instanceof Uint8Array)) return await this.putStream(key, body, options);
      if (expectedSize !== undefined && body.length !== expectedSize) throw sizeMismatch(key, body.length, expectedSize);
      if (body.length <= multipartThresholdBytes) return await this.putObject(key, body, signal);
      return await this.putMultipart(key, sliceParts(body, partSizeBytes), options);
    } catch (error) {
      if (signal?.aborted) throw new HoldfastError('CANCELLED', `[s3] put "${key}" cancelled`, { data: { key }, cause: signal.reason });
      if (error instanceof HoldfastError) throw error;
      // Not an S3 failure (those are mapped already): the caller's body stream broke.
      throw this.requests.storeError(`put "${key}": reading the body failed: ${String(error)}`, key, error);
    }
  }

  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    assertBlobKey(key);
    assertByteRange(range);
    // Retrying around the whole read also recovers from a connection lost mid-body.
    return this.requests.run('GetObject', key, async () => readAll(await openObject(this.requests, key, range)));
  }

  async getStream(key: string, range?: ByteRange): Promise<Readable> {
    assertBlobKey(key);
    assertByteRange(range);
    return this.requests.run('GetObject', key, () => openObject(this.requests, key, range));
  }

  async stat(key: string): Promise<BlobStat | undefined> {
    assertBlobKey(key);
    const size = await this.requests.run('HeadObject', key, () => this.requests.rawHead(key));
    return size === undefined ? undefined : { key, size };
  }

  async *list(prefix: string): AsyncIterable<BlobStat> {
    assertBlobPrefix(prefix);
    const { sdk, client, settings } = this.requests;
    const fullPrefix = settings.keyPrefix + prefix;
    let token: string | undefined;
    do {
      const input = {
        Bucket: settings.bucket,
        MaxKeys: 1000,
        ...(fullPrefix === '' ? {} : { Prefix: fullPrefix }),
        ...(token === undefined ? {} : { ContinuationToken: token }),
      };
      const page = await this.requests.run('ListObjectsV2', undefined, () => client.send(new sdk.ListObjectsV2Command(input)));
      for (const object of page.Contents ?? []) {
        if (object.Key !== undefined) yield { key: object.Key.slice(settings.keyPrefix.length), size: object.Size ?? 0 };
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    const { sdk, client, settings } = this.requests;
    await this.requests.run('DeleteObject', key, async () => {
      try {
        await client.send(new sdk.DeleteObjectCommand({ Bucket: settings.bucket, Key: this.requests.objectKey(key) }));
      } catch (error) {
        // S3 answers 204 for a missing key; some compatible servers say NoSuchKey instead.
        if (s3ErrorName(error) !== 'NoSuchKey') throw error;
      }
    });
  }

  async close(): Promise<void> {
    this.requests.client.destroy();
  }

  /** A stream that ends by the multipart threshold is buffered and sent in one PutObject. */
  private async putStream(key: string, body: Exclude<BlobBody, Uint8Array>, options: PutOptions): Promise<PutResult> {
    const { expectedSize, signal } = options;
    const { multipartThresholdBytes, partSizeBytes } = this.requests.settings;
    const parts = readParts(body, partSizeBytes);
    try {
      const head: Buffer[] = [];
      let size = 0;
      while (size <= multipartThresholdBytes) {
        const next = await parts.next();
        signal?.throwIfAborted();
        if (next.done === true) {
          if (expectedSize !== undefined && size !== expectedSize) throw sizeMismatch(key, size, expectedSize);
          return await this.putObject(key, Buffer.concat(head, size), signal);
        }
        head.push(next.value);
        size += next.value.length;
        if (expectedSize !== undefined && size > expectedSize) throw sizeMismatch(key, size, expectedSize, 'at least ');
      }
      return await this.putMultipart(key, prepend(head, parts), options);
    } finally {
      // Ends the body's iteration (destroying a stream) when it was not read to the end.
      await parts.return();
    }
  }

  private putObject(key: string, bytes: Uint8Array, signal: AbortSignal | undefined): Promise<PutResult> {
    const { sdk, client, settings } = this.requests;
    const input = {
      Bucket: settings.bucket,
      Key: this.requests.objectKey(key),
      Body: bytes,
      ContentLength: bytes.length,
      ContentMD5: md5Base64(bytes),
      IfNoneMatch: '*',
    };
    const send = async (): Promise<PutResult> => {
      try {
        await client.send(new sdk.PutObjectCommand(input), withSignal(signal));
        return { created: true, size: bytes.length };
      } catch (error) {
        if (isPreconditionFailed(error)) return { created: false, size: 0 };
        throw error;
      }
    };
    return this.requests.run('PutObject', key, send, signal);
  }

  private async putMultipart(key: string, parts: AsyncIterator<Uint8Array>, options: PutOptions): Promise<PutResult> {
    const { signal, expectedSize } = options;
    // One HEAD spares uploading a whole large body for a key that is already there.
    if ((await this.requests.run('HeadObject', key, () => this.requests.rawHead(key), signal)) !== undefined)
      return { created: false, size: 0 };
    const { maxConcurrency } = this.requests.settings;
    return uploadInParts(s3MultipartOperations(this.requests, key, signal), parts, { key, maxConcurrency, expectedSize, signal });
  }
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}
