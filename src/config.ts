import path from 'node:path';
import { z } from 'zod';
import { gitConfigFromEnv, readConfigEnv } from './config-env.js';
import { configInvalid, firstIssue, redactUrl } from './config-errors.js';
import { type GitConfig, GitConfigSchema, parseGitConfig } from './config-git.js';
import { fieldPath, InputError } from './errors.js';

// The face of configuration: the environment's variables and the git settings live in files of their own.
export * from './config-env.js';
export { redactUrl } from './config-errors.js';
export * from './config-git.js';

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
  /** What the host may clone for repository bindings; absent: {@link DEFAULT_GIT_CONFIG} (no host allowed). */
  readonly git?: GitConfig;
}

const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

const AbsolutePath = z.string().refine((p) => path.isAbsolute(p) && !p.includes('\0'), { error: 'expected an absolute path' });

/** {@link MetaConfig}. */
export const MetaConfigSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('sqlite'), path: AbsolutePath }),
  z.object({ kind: z.literal('postgres'), url: z.string().regex(/^postgres(?:ql)?:\/\/[^/]/, { error: 'expected postgres://host/…' }) }),
]);

/** {@link BlobsConfig}. */
export const BlobsConfigSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('local-disk'), path: AbsolutePath }),
  z.object({
    kind: z.literal('s3'),
    bucket: z.string().regex(BUCKET_RE, { error: 'not a valid bucket name (3-63 of a-z 0-9 . -)' }),
    prefix: z.string().refine((p) => p === '' || p.split('/').every((s) => PREFIX_SEGMENT_RE.test(s)), {
      error: 'a key prefix may use only A-Z a-z 0-9 . _ - between slashes, without a leading or trailing slash',
    }),
    endpoint: z
      .string()
      .regex(/^https?:\/\/[^/]+/, { error: 'expected an http:// or https:// URL' })
      .optional(),
    region: z.string().min(1),
    forcePathStyle: z.boolean(),
    credentials: z
      .object({ accessKeyId: z.string().min(1), secretAccessKey: z.string().min(1), sessionToken: z.string().optional() })
      .optional(),
  }),
]);

/** {@link HoldfastConfig}: what a library caller may pass as `openHoldfast({ config })`. */
export const HoldfastConfigSchema = z.object({ meta: MetaConfigSchema, blobs: BlobsConfigSchema, git: GitConfigSchema.optional() });

/**
 * `config` checked by {@link HoldfastConfigSchema} and frozen; `INVALID_INPUT` whose
 * `data.field` names the place (`blobs.bucket`, `git.allowedHosts[0]`) and `data.variable`
 * its top-level option. A credential is never echoed in the message.
 */
export function parseHoldfastConfig(config: HoldfastConfig): HoldfastConfig {
  const parsed = HoldfastConfigSchema.safeParse(config);
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    const field = fieldPath(issue.path);
    throw new InputError('INVALID_INPUT', `config.${field}: ${issue.message}`, { data: { variable: String(issue.path[0]), field } });
  }
  const { meta, blobs, git } = parsed.data as HoldfastConfig;
  return freeze(meta, blobs, git === undefined ? undefined : parseGitConfig(git));
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

/** Parses a `HOLDFAST_META` value. */
export function parseMetaUrl(value: string, cwd: string, variable = 'HOLDFAST_META'): MetaConfig {
  if (value.startsWith('sqlite:')) {
    const file = value.slice('sqlite:'.length);
    if (file === '' || file.includes('\0')) throw configInvalid(variable, value, 'the SQLite path is empty', META_EXAMPLE);
    return { kind: 'sqlite', path: path.resolve(cwd, file) };
  }
  if (value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw configInvalid(variable, value, 'not a valid PostgreSQL URL', META_EXAMPLE);
    }
    if (url.hostname === '') throw configInvalid(variable, value, 'the PostgreSQL URL has no host', META_EXAMPLE);
    return { kind: 'postgres', url: value };
  }
  throw configInvalid(variable, value, 'expected sqlite:PATH or postgres://…', META_EXAMPLE);
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
        throw configInvalid(variable, value, 'not a valid file URL', BLOBS_EXAMPLE);
      }
    }
    if (dir === '' || dir.includes('\0')) throw configInvalid(variable, value, 'the directory is empty', BLOBS_EXAMPLE);
    return { kind: 'local-disk', path: path.resolve(cwd, dir) };
  }
  if (!value.startsWith('s3://')) throw configInvalid(variable, value, 'expected file:PATH or s3://bucket/prefix', BLOBS_EXAMPLE);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw configInvalid(variable, value, 'not a valid s3:// URL', BLOBS_EXAMPLE);
  }
  // Bucket and prefix come from the raw text: URL parsing lowercases hosts and resolves `a/../b`.
  const rawLocation = value.slice('s3://'.length).split(/[?#]/)[0] ?? '';
  const bucket = rawLocation.split('/')[0] ?? '';
  if (!BUCKET_RE.test(bucket) || bucket.includes('..')) {
    throw configInvalid(variable, value, `"${bucket}" is not a valid bucket name (3-63 of a-z 0-9 . -)`, BLOBS_EXAMPLE);
  }
  const prefix = decodeURIComponent(rawLocation.slice(bucket.length)).replace(/^\/+|\/+$/g, '');
  if (prefix !== '' && !prefix.split('/').every((s) => PREFIX_SEGMENT_RE.test(s))) {
    throw configInvalid(variable, value, `key prefix "${prefix}" may use only A-Z a-z 0-9 . _ - between slashes`, BLOBS_EXAMPLE);
  }
  for (const key of url.searchParams.keys()) {
    if (!S3_PARAMS.has(key))
      throw configInvalid(variable, value, `unknown parameter "${key}" (known: ${[...S3_PARAMS].join(', ')})`, BLOBS_EXAMPLE);
  }
  const endpoint = url.searchParams.get('endpoint') ?? env.HOLDFAST_S3_ENDPOINT ?? undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/]+/.test(endpoint)) {
    throw configInvalid(variable, value, `endpoint "${endpoint}" must be an http:// or https:// URL`, BLOBS_EXAMPLE);
  }
  const fps = url.searchParams.get('forcePathStyle');
  if (fps !== null && fps !== 'true' && fps !== 'false')
    throw configInvalid(variable, value, 'forcePathStyle must be true or false', BLOBS_EXAMPLE);
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
        data: {
          variable: accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID',
          field: accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID',
        },
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
  readConfigEnv(env);
  if (options.store !== undefined) {
    if (options.store === '')
      throw new InputError('INVALID_INPUT', '--store needs a directory, e.g. --store ./.holdfast', {
        data: { variable: '--store', field: '--store' },
      });
    const dir = path.resolve(cwd, options.store);
    return freeze(
      { kind: 'sqlite', path: path.join(dir, 'meta.db') },
      { kind: 'local-disk', path: path.join(dir, 'blobs') },
      gitConfigFromEnv(env, cwd),
    );
  }
  const vars = readConfigEnv(env);
  const base = path.resolve(cwd, DEFAULT_STORE_DIR);
  const meta = vars.HOLDFAST_META ? parseMetaUrl(vars.HOLDFAST_META, cwd) : ({ kind: 'sqlite', path: path.join(base, 'meta.db') } as const);
  const blobs = vars.HOLDFAST_BLOBS
    ? parseBlobsUrl(vars.HOLDFAST_BLOBS, cwd, env)
    : ({ kind: 'local-disk', path: path.join(base, 'blobs') } as const);
  return freeze(meta, blobs, gitConfigFromEnv(env, cwd));
}

function freeze(meta: MetaConfig, blobs: BlobsConfig, git?: GitConfig): HoldfastConfig {
  return Object.freeze({ meta: Object.freeze(meta), blobs: Object.freeze(blobs), ...(git === undefined ? {} : { git }) });
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
