import { Readable } from 'node:stream';
import type { GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { StoreError } from '../../../errors.js';
import { rangeOutOfBounds } from '../../blob-key.js';
import type { ByteRange } from '../../blob-store.js';
import { s3ErrorStatus } from './s3-errors.js';
import type { S3Requests } from './s3-requests.js';

/**
 * Opens `key` (or `range` of it) and returns a body holding exactly the requested bytes: a range
 * reaching past the end is cut at the end, one starting exactly at the end is empty, one
 * starting past it throws `INVALID_INPUT`. Other failures are raw SDK errors, for
 * {@link S3Requests.run} to retry and map.
 */
export async function openObject(requests: S3Requests, key: string, range: ByteRange | undefined): Promise<Readable> {
  // `bytes=a-(a-1)` is not a valid header, so an empty range is answered from a HEAD.
  if (range?.length === 0) return emptyRange(requests, key, range);
  const input = {
    Bucket: requests.settings.bucket,
    Key: requests.objectKey(key),
    ...(range === undefined ? {} : { Range: rangeHeader(range) }),
  };
  let output: GetObjectCommandOutput;
  try {
    output = await requests.client.send(new requests.sdk.GetObjectCommand(input));
  } catch (error) {
    // 416: the range starts at or past the end; only "past" is an error for the caller.
    if (range !== undefined && s3ErrorStatus(error) === 416) return emptyRange(requests, key, range);
    throw error;
  }
  const body = output.Body;
  if (!(body instanceof Readable)) throw requests.storeError(`GetObject "${key}" returned no body stream`, key);
  if (range === undefined) return body;
  const served = servedRange(output.ContentRange, output.ContentLength);
  if (served !== undefined && range.offset > served.size) {
    body.destroy();
    throw rangeOutOfBounds(key, range, served.size);
  }
  const length = served === undefined ? 0 : Math.min(range.length, served.size - range.offset);
  const skip = served === undefined ? -1 : range.offset - served.start;
  if (served === undefined || skip < 0 || served.length < skip + length) {
    body.destroy();
    const got = served === undefined ? `Content-Range ${output.ContentRange}` : `${served.length} bytes from ${served.start}`;
    throw requests.storeError(`GetObject "${key}" answered ${got} for ${rangeHeader(range)}`, key);
  }
  return sliceBody(body, served.length, skip, length);
}

async function emptyRange(requests: S3Requests, key: string, range: ByteRange): Promise<Readable> {
  const size = await requests.rawHead(key);
  if (size === undefined) throw requests.notFound(key);
  if (range.offset > size) throw rangeOutOfBounds(key, range, size);
  if (range.offset < size && range.length > 0)
    throw requests.storeError(`GetObject "${key}" refused ${rangeHeader(range)} of a ${size}-byte object`, key);
  return Readable.from([], { objectMode: false });
}

function rangeHeader(range: ByteRange): string {
  return `bytes=${range.offset}-${range.offset + range.length - 1}`;
}

/** What a ranged GET answered: first byte's offset, bytes in the body, size of the object. */
interface ServedRange {
  readonly start: number;
  readonly length: number;
  readonly size: number;
}

const CONTENT_RANGE_RE = /^bytes (\d+)-(\d+)\/(\d+)$/;

/**
 * A `206` carries `Content-Range: bytes a-b/size`; a server that ignored the Range header
 * answers `200` with the whole object, read as starting at 0. Undefined when the headers do
 * not describe the body.
 */
function servedRange(contentRange: string | undefined, contentLength: number | undefined): ServedRange | undefined {
  if (contentLength === undefined) return undefined;
  if (contentRange === undefined) return { start: 0, length: contentLength, size: contentLength };
  const match = CONTENT_RANGE_RE.exec(contentRange);
  if (match === null) return undefined;
  return { start: Number(match[1]), length: contentLength, size: Number(match[3]) };
}

/**
 * Exactly `length` bytes of `body` from `skip` bytes in. The body passes through untouched when
 * it already is that slice (the normal case on S3); otherwise it is trimmed on the fly, which
 * covers servers that send more than asked (s3rver answers `bytes=0-0` with the whole object).
 * Stopping early destroys `body`, releasing its connection.
 */
function sliceBody(body: Readable, bodyLength: number, skip: number, length: number): Readable {
  if (skip === 0 && bodyLength === length) return body;
  return Readable.from(trim(body, skip, length), { objectMode: false });
}

async function* trim(body: Readable, skip: number, length: number): AsyncGenerator<Buffer> {
  let toSkip = skip;
  let toSend = length;
  if (toSend === 0) {
    body.destroy();
    return;
  }
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const from = Math.min(toSkip, chunk.length);
    toSkip -= from;
    const piece = chunk.subarray(from, from + toSend);
    toSend -= piece.length;
    if (piece.length > 0) yield piece;
    if (toSend === 0) return;
  }
  throw new StoreError(`[s3] a ranged read ended ${toSend} bytes early`, { transient: true, data: { driver: 's3', missingBytes: toSend } });
}
