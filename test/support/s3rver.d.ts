/**
 * The slice of s3rver@3.7.1 (which ships no types) that the test harness uses: a Koa app
 * serving S3 over HTTP from a directory, its middleware stack and its filesystem store.
 */
declare module 's3rver' {
  /** Koa's request context, reduced to what the harness middleware reads and writes. */
  export interface S3rverContext {
    readonly method: string;
    /** Raw (still percent-encoded) path, `/bucket/key` for path-style requests. */
    readonly path: string;
    /** Parsed query string; assigning replaces the request's query string. */
    query: Readonly<Record<string, string | string[] | undefined>>;
    readonly req: import('node:http').IncomingMessage;
    readonly res: import('node:http').ServerResponse;
    readonly response: { get(field: string): string };
    status: number;
    body: unknown;
    type: string;
    /** False hands the raw response to the middleware; Koa then writes nothing. */
    respond: boolean;
    get(field: string): string;
  }

  export type S3rverMiddleware = (ctx: S3rverContext, next: () => Promise<void>) => Promise<void>;

  /** One object as s3rver's store lists it. */
  export interface S3rverObject {
    readonly key: string;
  }

  /** Options of s3rver's `listObjects`, as its ListObjects(V2) controller passes them. */
  export interface S3rverListOptions {
    readonly delimiter?: string;
    readonly startAfter?: string;
    readonly prefix?: string;
    readonly maxKeys?: number;
  }

  export interface S3rverListResult {
    objects: S3rverObject[];
    commonPrefixes: string[];
    isTruncated: boolean;
  }

  /** The on-disk store behind the server. */
  export interface S3rverStore {
    existsObject(bucket: string, key: string): Promise<boolean>;
    deleteObject(bucket: string, key: string): Promise<void>;
    putBucket(bucket: string): Promise<unknown>;
    listObjects(bucket: string, options: S3rverListOptions): Promise<S3rverListResult>;
    /** Path of `resource` (`object`, `uploads`, …) of `key` in `bucket`. */
    getResourcePath(bucket: string, key: string | undefined, resource: string): string;
    putObject(object: S3rverObject): Promise<{ size: number; md5: string }>;
    putMetadata(bucket: string, key: string, metadata: unknown, md5: string): Promise<void>;
  }

  /** An object as s3rver's store receives it. */
  export interface S3rverObject {
    bucket: string;
    key: string;
    metadata: unknown;
    content: Buffer | NodeJS.ReadableStream;
  }

  export interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    configureBuckets?: ReadonlyArray<{ name: string }>;
  }

  export default class S3rver {
    constructor(options?: S3rverOptions);
    /** Koa's middleware stack; entries added before `run()` take part in every request. */
    readonly middleware: S3rverMiddleware[];
    readonly store: S3rverStore;
    /** Set by `run()`. */
    readonly httpServer: import('node:http').Server | undefined;
    /** Starts listening; resolves with the bound address. */
    run(): Promise<import('node:net').AddressInfo>;
    close(): Promise<void>;
  }
}
