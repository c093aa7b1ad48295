/**
 * An s3rver on loopback (made faithful as the tests' one is) with a counting middleware in
 * front: every HTTP request is classified the way S3 bills it and its body bytes are summed,
 * both ways. The scale measurements read these counters before and after a step; nothing is
 * estimated from the driver's calls, so multipart parts, listing pages and retries count as S3
 * would count them.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { S3rverContext, S3rverMiddleware } from 's3rver';
import S3rver from 's3rver';
import { S3RVER_CREDENTIALS, S3RVER_REGION } from '../test/support/s3-server.js';
import { makeS3rverFaithful } from '../test/support/s3rver-fidelity.js';

/** S3 request classes as they are billed: PUT/COPY/POST/LIST in one tier, GET/HEAD in the other. */
export const S3_REQUEST_KINDS = ['put', 'post', 'list', 'get', 'head', 'delete'] as const;
export type S3RequestKind = (typeof S3_REQUEST_KINDS)[number];

/** Requests and body bytes seen so far, per kind. */
export interface S3Counts {
  readonly requests: Record<S3RequestKind, number>;
  /** Request body bytes received (PUT bodies, parts), by their Content-Length. */
  readonly bytesIn: number;
  /** Response body bytes sent (GET bodies, listings). */
  readonly bytesOut: number;
}

/** A running counting s3rver. */
export interface CountingS3 {
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** A copy of the counters now. */
  counts(): S3Counts;
  close(): Promise<void>;
}

/** Which billing class a request falls in. */
export function classifyS3Request(method: string, query: Readonly<Record<string, unknown>>, key: string | undefined): S3RequestKind {
  if (method === 'DELETE') return 'delete';
  if (method === 'HEAD') return 'head';
  if (method === 'POST') return 'post';
  if (method === 'PUT') return 'put';
  // A GET on the bucket itself (no key) is a listing.
  return key === undefined || key === '' || 'list-type' in query ? 'list' : 'get';
}

/** Counters plus the middleware that feeds them. */
export function s3Counter(): { middleware: S3rverMiddleware; counts(): S3Counts } {
  const requests = Object.fromEntries(S3_REQUEST_KINDS.map((k) => [k, 0])) as Record<S3RequestKind, number>;
  let bytesIn = 0;
  let bytesOut = 0;
  const middleware: S3rverMiddleware = async (ctx: S3rverContext, next) => {
    const [, , ...rest] = ctx.path.split('/');
    const key = rest.length === 0 ? undefined : rest.join('/');
    requests[classifyS3Request(ctx.method, ctx.query, key)] += 1;
    // The declared length, not a 'data' listener: listening would drain the body before s3rver reads it.
    bytesIn += Number(ctx.get('content-length')) || 0;
    const res = ctx.res;
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => typeof res;
    const counted = (chunk: unknown): void => {
      if (typeof chunk === 'string') bytesOut += Buffer.byteLength(chunk);
      else if (chunk instanceof Uint8Array) bytesOut += chunk.length;
    };
    res.write = ((...args: unknown[]) => {
      counted(args[0]);
      return write(...args);
    }) as typeof res.write;
    res.end = ((...args: unknown[]) => {
      if (typeof args[0] !== 'function') counted(args[0]);
      return end(...args);
    }) as typeof res.end;
    await next();
  };
  return { middleware, counts: () => ({ requests: { ...requests }, bytesIn, bytesOut }) };
}

/** Starts a counting s3rver on 127.0.0.1 (free port) with one bucket, in a fresh temp directory. */
export async function startCountingS3(bucket = 'scale'): Promise<CountingS3> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'holdfast-scale-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const counter = s3Counter();
  server.middleware.unshift(counter.middleware, makeS3rverFaithful(server));
  const address = await server.run();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    bucket,
    region: S3RVER_REGION,
    credentials: S3RVER_CREDENTIALS,
    counts: counter.counts,
    async close() {
      const stopping = server.close();
      server.httpServer?.closeAllConnections();
      await stopping;
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}

/** `after - before`, per kind and for bytes. */
export function diffCounts(after: S3Counts, before: S3Counts): S3Counts {
  const requests = Object.fromEntries(S3_REQUEST_KINDS.map((k) => [k, after.requests[k] - before.requests[k]])) as Record<
    S3RequestKind,
    number
  >;
  return { requests, bytesIn: after.bytesIn - before.bytesIn, bytesOut: after.bytesOut - before.bytesOut };
}
