import path from 'node:path';
import { InputError } from './errors.js';

/** Where metadata lives: an embedded SQLite file or a PostgreSQL database. */
export type MetaConfig = { readonly kind: 'sqlite'; readonly path: string } | { readonly kind: 'postgres'; readonly url: string };

/** Static S3 credentials; when absent the AWS SDK's default provider chain is used. */
export interface S3Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Where file bytes live: a local directory or an S3-compatible bucket (with optional key prefix). */
export type BlobsConfig =
  | { readonly kind: 'local-disk'; readonly path: string }
  | {
      readonly kind: 's3';
      readonly bucket: string;
      /** Key prefix without leading or trailing slash; empty for the bucket root. */
      readonly prefix: string;
      /** Custom endpoint (MinIO, R2, s3rver…); undefined means AWS. */
      readonly endpoint?: string;
      readonly region: string;
      readonly forcePathStyle: boolean;
      readonly credentials?: S3Credentials;
    };

/** The resolved, frozen configuration every entry point (library, CLI, server) starts from. */
export interface HoldfastConfig {
  readonly meta: MetaConfig;
  readonly blobs: BlobsConfig;
}

/** Inputs to {@link loadConfig}; every field is optional. */
export interface LoadConfigOptions {
  /** Environment to read (`HOLDFAST_*`, `AWS_*`); defaults to `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** `--store DIR`: SQLite and local-disk blobs under DIR; overrides the environment. */
  readonly store?: string;
  /** Base for relative paths; defaults to `process.cwd()`. */
  readonly cwd?: string;
}

/** Directory used when nothing is configured, relative to the working directory. */
export const DEFAULT_STORE_DIR = '.holdfast';

const META_EXAMPLE = 'sqlite:./.holdfast/meta.db or postgres://user@127.0.0.1:5432/holdfast';
const BLOBS_EXAMPLE =
  'file:./.holdfast/blobs or s3://my-bucket/holdfast?endpoint=http://127.0.0.1:9000&region=us-east-1&forcePathStyle=true';
const S3_PARAMS = new Set(['endpoint', 'region', 'forcePathStyle']);
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

function invalid(variable: string, value: string, problem: string, example: string): InputError {
  return new InputError('INVALID_INPUT', `${variable}=${redactUrl(value)}: ${problem}. Example: ${variable}=${example}`, {
    data: { variable },
  });
}

/** Parses a `HOLDFAST_META` value. */
export function parseMetaUrl(value: string, cwd: string, variable = 'HOLDFAST_META'): MetaConfig {
  if (value.startsWith('sqlite:')) {
    const file = value.slice('sqlite:'.length);
    if (file === '' || file.includes('\0')) throw invalid(variable, value, 'the SQLite path is empty', META_EXAMPLE);
    return { kind: 'sqlite', path: path.resolve(cwd, file) };
  }
  if (value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw invalid(variable, value, 'not a valid PostgreSQL URL', META_EXAMPLE);
    }
    if (url.hostname === '') throw invalid(variable, value, 'the PostgreSQL URL has no host', META_EXAMPLE);
    return { kind: 'postgres', url: value };
  }
  throw invalid(variable, value, 'expected sqlite:PATH or postgres://…', META_EXAMPLE);
}

/** Parses a `HOLDFAST_BLOBS` value; `env` supplies region and credentials for S3. */
export function parseBlobsUrl(
  value: string,
  cwd: string,
  env: Readonly<Record<string, string | undefined>> = {},
  variable = 'HOLDFAST_BLOBS',
): BlobsConfig {
  if (value.startsWith('file:')) {
    let dir = value.slice('file:'.length);
    if (dir.startsWith('//')) {
      try {
        dir = decodeURIComponent(new URL(value).pathname);
      } catch {
        throw invalid(variable, value, 'not a valid file URL', BLOBS_EXAMPLE);
      }
    }
    if (dir === '' || dir.includes('\0')) throw invalid(variable, value, 'the directory is empty', BLOBS_EXAMPLE);
    return { kind: 'local-disk', path: path.resolve(cwd, dir) };
  }
  if (!value.startsWith('s3://')) throw invalid(variable, value, 'expected file:PATH or s3://bucket/prefix', BLOBS_EXAMPLE);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(variable, value, 'not a valid s3:// URL', BLOBS_EXAMPLE);
  }
  // Bucket and prefix come from the raw text: URL parsing lowercases hosts and resolves `a/../b`.
  const rawLocation = value.slice('s3://'.length).split(/[?#]/)[0] ?? '';
  const bucket = rawLocation.split('/')[0] ?? '';
  if (!BUCKET_RE.test(bucket) || bucket.includes('..')) {
    throw invalid(variable, value, `"${bucket}" is not a valid bucket name (3-63 of a-z 0-9 . -)`, BLOBS_EXAMPLE);
  }
  const prefix = decodeURIComponent(rawLocation.slice(bucket.length)).replace(/^\/+|\/+$/g, '');
  if (prefix !== '' && !prefix.split('/').every((s) => PREFIX_SEGMENT_RE.test(s))) {
    throw invalid(variable, value, `key prefix "${prefix}" may use only A-Z a-z 0-9 . _ - between slashes`, BLOBS_EXAMPLE);
  }
  for (const key of url.searchParams.keys()) {
    if (!S3_PARAMS.has(key))
      throw invalid(variable, value, `unknown parameter "${key}" (known: ${[...S3_PARAMS].join(', ')})`, BLOBS_EXAMPLE);
  }
  const endpoint = url.searchParams.get('endpoint') ?? env.HOLDFAST_S3_ENDPOINT ?? undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    throw invalid(variable, value, `endpoint "${endpoint}" must be an http:// or https:// URL`, BLOBS_EXAMPLE);
  }
  const fps = url.searchParams.get('forcePathStyle');
  if (fps !== null && fps !== 'true' && fps !== 'false')
    throw invalid(variable, value, 'forcePathStyle must be true or false', BLOBS_EXAMPLE);
  const region = url.searchParams.get('region') ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const credentials = credentialsFromEnv(env);
  return {
    kind: 's3',
    bucket,
    prefix,
    ...(endpoint === undefined ? {} : { endpoint: endpoint.replace(/\/+$/, '') }),
    region,
    forcePathStyle: fps === null ? endpoint !== undefined : fps === 'true',
    ...(credentials === undefined ? {} : { credentials }),
  };
}

function credentialsFromEnv(env: Readonly<Record<string, string | undefined>>): S3Credentials | undefined {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (accessKeyId === undefined && secretAccessKey === undefined) return undefined;
  if (!accessKeyId || !secretAccessKey) {
    throw new InputError(
      'INVALID_INPUT',
      'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (or neither, to use the AWS default chain)',
      {
        data: { variable: accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID' },
      },
    );
  }
  const sessionToken = env.AWS_SESSION_TOKEN;
  return Object.freeze({ accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) });
}

/**
 * Resolves the configuration: `--store DIR` wins, then `HOLDFAST_META` / `HOLDFAST_BLOBS`,
 * then the embedded defaults under `./.holdfast/`. Bad values throw `INVALID_INPUT` naming
 * the variable and showing a valid example.
 */
export function loadConfig(options: LoadConfigOptions = {}): HoldfastConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  if (options.store !== undefined) {
    if (options.store === '')
      throw new InputError('INVALID_INPUT', '--store needs a directory, e.g. --store ./.holdfast', { data: { variable: '--store' } });
    const dir = path.resolve(cwd, options.store);
    return freeze({ kind: 'sqlite', path: path.join(dir, 'meta.db') }, { kind: 'local-disk', path: path.join(dir, 'blobs') });
  }
  const base = path.resolve(cwd, DEFAULT_STORE_DIR);
  const metaValue = env.HOLDFAST_META;
  const blobsValue = env.HOLDFAST_BLOBS;
  const meta = metaValue ? parseMetaUrl(metaValue, cwd) : ({ kind: 'sqlite', path: path.join(base, 'meta.db') } as const);
  const blobs = blobsValue ? parseBlobsUrl(blobsValue, cwd, env) : ({ kind: 'local-disk', path: path.join(base, 'blobs') } as const);
  return freeze(meta, blobs);
}

function freeze(meta: MetaConfig, blobs: BlobsConfig): HoldfastConfig {
  return Object.freeze({ meta: Object.freeze(meta), blobs: Object.freeze(blobs) });
}

/** Replaces any password in a URL with `***`, for messages and logs. */
export function redactUrl(value: string): string {
  return value.replace(/(\/\/[^:/@]+:)[^@/]*@/, '$1***@');
}

/** A printable, secret-free summary of a configuration (`holdfast init`, logs). */
export function describeConfig(config: HoldfastConfig): { meta: string; blobs: string } {
  const meta = config.meta.kind === 'sqlite' ? `sqlite:${config.meta.path}` : redactUrl(config.meta.url);
  const b = config.blobs;
  const blobs =
    b.kind === 'local-disk'
      ? `file:${b.path}`
      : `s3://${b.bucket}/${b.prefix}${b.endpoint === undefined ? '' : ` at ${b.endpoint}`} (region ${b.region}${b.forcePathStyle ? ', path-style' : ''})`;
  return { meta, blobs };
}
