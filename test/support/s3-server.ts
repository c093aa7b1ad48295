import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { createS3BlobStore } from '../../src/blob-store/drivers/s3.js';
import type { S3Credentials } from '../../src/config.js';
import { S3FaultInjector } from './s3-faults.js';
import { makeS3rverFaithful } from './s3rver-fidelity.js';

/** s3rver accepts this key pair (and rejects any other access key id with InvalidAccessKeyId). */
export const S3RVER_CREDENTIALS: S3Credentials = Object.freeze({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
/** s3rver's continuation tokens only work in this region. */
export const S3RVER_REGION = 'us-east-1';

/** Options of {@link startS3Server}. */
export interface S3ServerOptions {
  /** Bucket created before the server starts. Default `holdfast-test`. */
  readonly bucket?: string;
}

/** A running s3rver on loopback, made faithful to S3 where Holdfast relies on it. */
export interface S3TestServer {
  /** `http://127.0.0.1:PORT`. */
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly credentials: S3Credentials;
  /** Records requests and injects failures (error statuses, resets, stalls). */
  readonly faults: S3FaultInjector;
  /** The s3rver instance itself. */
  readonly server: S3rver;
  /** Stops the server and deletes its directory. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts s3rver on 127.0.0.1 on a free port, silent, storing into a fresh temp directory, with
 * one empty bucket. See `s3rver-fidelity.ts` for what is changed from plain s3rver (conditional
 * writes, aws-chunked refusal, Content-MD5, ordered listings, multipart abort).
 */
export async function startS3Server(options: S3ServerOptions = {}): Promise<S3TestServer> {
  const bucket = options.bucket ?? 'holdfast-test';
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'holdfast-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const faults = new S3FaultInjector();
  // Faults first, so an injected failure never reaches (or changes) the store.
  server.middleware.unshift(faults.middleware(), makeS3rverFaithful(server));
  let address: Awaited<ReturnType<S3rver['run']>>;
  try {
    address = await server.run();
  } catch (error) {
    await fs.rm(directory, { recursive: true, force: true });
    throw error;
  }
  let closed = false;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    bucket,
    region: S3RVER_REGION,
    credentials: S3RVER_CREDENTIALS,
    faults,
    server,
    async close() {
      if (closed) return;
      closed = true;
      faults.releaseStalled();
      const stopping = server.close();
      // Keep-alive connections of clients that were not closed would hold the server open.
      server.httpServer?.closeAllConnections();
      await stopping;
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}

/** Where S3 tests run: a local s3rver, or the real endpoint named by `HOLDFAST_TEST_S3_*`. */
export interface S3TestTarget {
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly credentials: S3Credentials;
  readonly forcePathStyle: boolean;
  /** Key prefix unique to this target, so concurrent runs against one bucket never meet. */
  readonly prefix: string;
  /** The local server, or undefined when testing against an external endpoint. */
  readonly local: S3TestServer | undefined;
  /** Stops the local server, or deletes every object under `prefix` on an external endpoint. */
  close(): Promise<void>;
}

/**
 * The S3 target for a test file. With `HOLDFAST_TEST_S3_ENDPOINT` set, tests run against that
 * endpoint and `HOLDFAST_TEST_S3_BUCKET` (which must exist), with `AWS_ACCESS_KEY_ID` /
 * `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`, `AWS_REGION`; path-style unless
 * `HOLDFAST_TEST_S3_FORCE_PATH_STYLE=false`). Otherwise a local s3rver is started. Missing
 * variables throw: an external target is never skipped silently.
 */
export async function startS3Target(env: Readonly<Record<string, string | undefined>> = process.env): Promise<S3TestTarget> {
  const prefix = `holdfast-test-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const endpoint = env.HOLDFAST_TEST_S3_ENDPOINT;
  if (endpoint === undefined || endpoint === '') {
    const local = await startS3Server();
    return { ...pick(local), forcePathStyle: true, prefix, local, close: () => local.close() };
  }
  const bucket = required(env, 'HOLDFAST_TEST_S3_BUCKET');
  const sessionToken = env.AWS_SESSION_TOKEN;
  const credentials: S3Credentials = {
    accessKeyId: required(env, 'AWS_ACCESS_KEY_ID'),
    secretAccessKey: required(env, 'AWS_SECRET_ACCESS_KEY'),
    ...(sessionToken ? { sessionToken } : {}),
  };
  const target = {
    endpoint,
    bucket,
    region: env.AWS_REGION ?? 'us-east-1',
    credentials,
    forcePathStyle: env.HOLDFAST_TEST_S3_FORCE_PATH_STYLE !== 'false',
    prefix,
    local: undefined,
  };
  return { ...target, close: () => deleteAll(target) };
}

/** Removes what a test run left under its prefix in a shared bucket. */
async function deleteAll(target: Omit<S3TestTarget, 'close' | 'local'>): Promise<void> {
  const store = await createS3BlobStore({ kind: 's3', ...target });
  try {
    for await (const { key } of store.list('')) await store.delete(key);
  } finally {
    await store.close();
  }
}

function pick(server: S3TestServer): Pick<S3TestTarget, 'endpoint' | 'bucket' | 'region' | 'credentials'> {
  return { endpoint: server.endpoint, bucket: server.bucket, region: server.region, credentials: server.credentials };
}

function required(env: Readonly<Record<string, string | undefined>>, name: string): string {
  const value = env[name];
  if (value === undefined || value === '') throw new Error(`HOLDFAST_TEST_S3_ENDPOINT is set, so ${name} must be set too`);
  return value;
}
