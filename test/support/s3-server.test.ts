import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type S3TestServer, startS3Server } from './s3-server.js';

/** The harness must behave like S3 where the S3 driver's guarantees depend on it. */
describe('s3 test server', () => {
  let s3: S3TestServer;
  let client: S3Client;

  beforeAll(async () => {
    s3 = await startS3Server();
    client = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: { ...s3.credentials },
      maxAttempts: 1,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  });
  afterAll(async () => {
    client.destroy();
    await s3.close();
  });

  const status = (error: unknown): number | undefined => (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const exists = (Key: string) =>
    client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key })).then(
      () => true,
      (error: unknown) => (status(error) === 404 ? false : Promise.reject(error)),
    );

  it('answers 412 to If-None-Match: * on PutObject for an existing key', async () => {
    const put = (Body: string) => client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'cond/put', Body, IfNoneMatch: '*' }));
    await put('first');
    await expect(put('second')).rejects.toSatisfy((e) => status(e) === 412);
  });

  it('answers 412 to If-None-Match: * on CompleteMultipartUpload, and aborts uploads', async () => {
    const target = { Bucket: s3.bucket, Key: 'cond/multipart' };
    await client.send(new PutObjectCommand({ ...target, Body: 'already here' }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand(target));
    const { ETag } = await client.send(new UploadPartCommand({ ...target, UploadId, PartNumber: 1, Body: randomBytes(100) }));
    const complete = client.send(
      new CompleteMultipartUploadCommand({ ...target, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] }, IfNoneMatch: '*' }),
    );
    await expect(complete).rejects.toSatisfy((e) => status(e) === 412);
    await client.send(new AbortMultipartUploadCommand({ ...target, UploadId }));
    await expect(client.send(new AbortMultipartUploadCommand({ ...target, UploadId }))).rejects.toMatchObject({ name: 'NoSuchUpload' });
  });

  it('refuses aws-chunked bodies instead of storing the framing', async () => {
    const defaults = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: { ...s3.credentials },
      maxAttempts: 1,
    });
    const body = Readable.from([randomBytes(1000)], { objectMode: false });
    const put = defaults.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'chunked', Body: body, ContentLength: 1000 }));
    await expect(put).rejects.toSatisfy((e) => status(e) === 501);
    defaults.destroy();
    expect(await exists('chunked')).toBe(false);
  });

  it('checks Content-MD5 and keeps nothing on a mismatch', async () => {
    const wrong = createHash('md5').update('other bytes').digest('base64');
    const put = client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'md5/bad', Body: 'these bytes', ContentMD5: wrong }));
    await expect(put).rejects.toMatchObject({ name: 'BadDigest' });
    expect(await exists('md5/bad')).toBe(false);
  });

  it('keeps nothing of a PutObject whose connection breaks mid-body', async () => {
    const request = http.request(`${s3.endpoint}/${s3.bucket}/torn`, { method: 'PUT', headers: { 'content-length': '100000' } });
    request.on('error', () => undefined);
    request.write(randomBytes(50_000));
    await new Promise((resolve) => setTimeout(resolve, 100));
    request.destroy();
    await expect.poll(() => exists('torn')).toBe(false);
    await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'torn', Body: 'whole', IfNoneMatch: '*' }));
  });

  it('lists in ascending byte order across pages', async () => {
    const keys = ['ord/a', 'ord/a.x', 'ord/a/b', 'ord/a-b', 'ord/B', 'ord/ab'];
    await Promise.all(keys.map((Key) => client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: Key }))));
    const seen: string[] = [];
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'ord/', MaxKeys: 2, ContinuationToken }));
      seen.push(...(page.Contents ?? []).map((o) => o.Key ?? ''));
      ContinuationToken = page.NextContinuationToken;
    } while (ContinuationToken !== undefined);
    expect(seen).toEqual([...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
  });
});
