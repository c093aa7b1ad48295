import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type S3rver from 's3rver';
import type { S3rverContext, S3rverMiddleware, S3rverStore } from 's3rver';

/**
 * Makes s3rver behave like S3 where the BlobStore contract depends on it and s3rver does not:
 *
 * - `If-None-Match: *` on PutObject and CompleteMultipartUpload answers 412 when the key
 *   exists, atomically per key (conditional writes to one key are serialized);
 * - aws-chunked request bodies are refused with 501 instead of being stored with their framing;
 * - Content-MD5 is checked (400 BadDigest, nothing kept);
 * - a PutObject whose connection drops mid-body leaves no object;
 * - AbortMultipartUpload works, and completing an unknown upload answers 404 NoSuchUpload;
 * - listings come in ascending byte order of key, so pagination neither skips nor repeats;
 * - ListObjectsV2 continuation tokens work (s3rver makes them with DES, which OpenSSL 3 lacks);
 * - a PutObject is answered only once its bytes are on disk, and replaces the key atomically:
 *   s3rver truncates the file in place and answers before a buffered body is written, so a
 *   HEAD right after a PUT (or during a second PUT of the same key) could see 0 bytes.
 *
 * Call before `run()`.
 */
export function makeS3rverFaithful(server: S3rver): S3rverMiddleware {
  sortListings(server.store);
  atomicPuts(server.store);
  return fidelityMiddleware(server.store);
}

/** Query parameters that make a PUT something other than PutObject (s3rver's subresources). */
const PUT_SUBRESOURCES = ['uploadId', 'partNumber', 'uploads', 'acl', 'tagging', 'retention', 'legal-hold'];

/** Set while s3rver serves a ListObjectsV2 page: where a truncated page ended. */
interface ListingPage {
  lastKey?: string;
}
const listingPage = new AsyncLocalStorage<ListingPage>();

function fidelityMiddleware(store: S3rverStore): S3rverMiddleware {
  const locks = new KeyLocks();
  return async (ctx, next) => {
    const target = objectTarget(ctx.path);
    const isUpload = 'uploadId' in ctx.query;
    if (ctx.method === 'PUT' && isAwsChunked(ctx))
      return answer(ctx, 501, 'NotImplemented', 'aws-chunked bodies are not supported: set requestChecksumCalculation=WHEN_REQUIRED');
    if (target === undefined) return ctx.method === 'GET' && ctx.query['list-type'] === '2' ? listWithOwnTokens(ctx, next) : next();
    const { bucket, key } = target;
    const uploadDir = isUpload ? path.join(store.getResourcePath(bucket, undefined, 'uploads'), String(ctx.query.uploadId)) : '';
    if ((ctx.method === 'DELETE' || ctx.method === 'POST') && isUpload && !(await exists(uploadDir))) {
      return answer(ctx, 404, 'NoSuchUpload', 'The specified upload does not exist.');
    }
    if (ctx.method === 'DELETE' && isUpload) {
      await fs.rm(uploadDir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    const isObjectPut = ctx.method === 'PUT' && ctx.get('x-amz-copy-source') === '' && !PUT_SUBRESOURCES.some((q) => q in ctx.query);
    const isConditional = ctx.get('if-none-match') === '*' && (isObjectPut || (ctx.method === 'POST' && isUpload));
    const handle = async (): Promise<void> => {
      if (isConditional && (await store.existsObject(bucket, key))) {
        return answer(ctx, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
      }
      if (isObjectPut && (await nextUnlessAborted(ctx, next)) === 'aborted') {
        await store.deleteObject(bucket, key);
        return;
      }
      if (!isObjectPut) await next();
      if (ctx.method === 'PUT' && ctx.status === 200 && !digestMatches(ctx)) {
        if (isObjectPut) await store.deleteObject(bucket, key);
        answer(ctx, 400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
      }
    };
    return isConditional ? locks.run(`${bucket}/${key}`, handle) : handle();
  };
}

/**
 * Serves ListObjectsV2 through s3rver's controller (authentication, NoSuchBucket, XML) with
 * tokens of our own: an incoming token becomes `start-after`, and a truncated page gets a
 * token naming its last key.
 */
async function listWithOwnTokens(ctx: S3rverContext, next: () => Promise<void>): Promise<void> {
  const token = ctx.query['continuation-token'];
  if (typeof token === 'string') {
    const startAfter = Buffer.from(token, 'base64url').toString('utf8');
    const { 'continuation-token': _, ...rest } = ctx.query;
    ctx.query = { ...rest, 'start-after': startAfter };
  }
  const page: ListingPage = {};
  await listingPage.run(page, next);
  if (page.lastKey !== undefined && typeof ctx.body === 'string') {
    const next = Buffer.from(page.lastKey, 'utf8').toString('base64url');
    ctx.body = ctx.body.replace(
      '<IsTruncated>false</IsTruncated>',
      `<IsTruncated>true</IsTruncated><NextContinuationToken>${next}</NextContinuationToken>`,
    );
  }
}

/** PutObject through a temp file renamed into place once written (what S3's atomic PUT gives). */
function atomicPuts(store: S3rverStore): void {
  store.putObject = async (object) => {
    const objectPath = store.getResourcePath(object.bucket, object.key, 'object');
    await fs.mkdir(path.dirname(objectPath), { recursive: true });
    const temp = `${objectPath}.${randomBytes(6).toString('hex')}.partial`;
    const md5 = createHash('md5');
    let size = 0;
    const count = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        md5.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    const source = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : (object.content as NodeJS.ReadableStream);
    try {
      await pipeline(source, count, createWriteStream(temp));
      await fs.rename(temp, objectPath);
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
    const digest = md5.digest('hex');
    await store.putMetadata(object.bucket, object.key, object.metadata, digest);
    return { size, md5: digest };
  };
}

/** s3rver walks directories, which is not key order (`a/b` before `a.x`); sort what it finds. */
function sortListings(store: S3rverStore): void {
  const original = store.listObjects.bind(store);
  store.listObjects = async (bucket, options) => {
    const { startAfter, maxKeys, ...rest } = options;
    const all = await original(bucket, rest);
    const after = startAfter ?? '';
    const objects = all.objects.filter((o) => after === '' || compareKeys(o.key, after) > 0).sort((a, b) => compareKeys(a.key, b.key));
    const limit = maxKeys ?? Number.POSITIVE_INFINITY;
    const page = objects.slice(0, limit);
    const truncated = objects.length > limit;
    const listing = listingPage.getStore();
    // Reported through listWithOwnTokens; s3rver's own V2 token would need DES.
    const lastKey = page.at(-1)?.key;
    if (listing !== undefined && truncated && lastKey !== undefined) listing.lastKey = lastKey;
    return { objects: page, commonPrefixes: all.commonPrefixes, isTruncated: truncated && listing === undefined };
  };
}

function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function objectTarget(requestPath: string): { bucket: string; key: string } | undefined {
  const match = /^\/([^/]+)\/(.+)$/.exec(requestPath);
  if (match?.[1] === undefined || match[2] === undefined) return undefined;
  return { bucket: match[1], key: decodeURIComponent(match[2]) };
}

function isAwsChunked(ctx: S3rverContext): boolean {
  return ctx.get('content-encoding').includes('aws-chunked') || ctx.get('x-amz-content-sha256').startsWith('STREAMING-');
}

/** s3rver's ETag for a PUT is the MD5 of what it stored; compare with what the client sent. */
function digestMatches(ctx: S3rverContext): boolean {
  const sent = ctx.get('content-md5');
  if (sent === '') return true;
  return Buffer.from(sent, 'base64').toString('hex') === ctx.response.get('ETag').replaceAll('"', '');
}

/** s3rver never finishes a PutObject whose client went away, and keeps the partial file. */
async function nextUnlessAborted(ctx: S3rverContext, next: () => Promise<void>): Promise<'done' | 'aborted'> {
  const aborted = new Promise<'aborted'>((resolve) => {
    ctx.req.once('close', () => {
      if (!ctx.req.complete) resolve('aborted');
    });
  });
  const outcome = await Promise.race([next().then(() => 'done' as const), aborted]);
  if (outcome === 'aborted') ctx.respond = false;
  return outcome;
}

function answer(ctx: S3rverContext, status: number, code: string, message: string): void {
  ctx.status = status;
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}

/** Runs tasks for the same key one after another; different keys do not wait for each other. */
class KeyLocks {
  private readonly tails = new Map<string, Promise<void>>();

  async run(key: string, task: () => Promise<void>): Promise<void> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const mine = previous.then(task);
    const tail = mine.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    try {
      await mine;
    } finally {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
