import fs from 'node:fs';
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
  /** What the host may clone for repository bindings; absent: {@link DEFAULT_GIT_CONFIG} (no host allowed). */
  readonly git?: GitConfig;
}

/** Transports a repository binding may use (git's own names, as in `GIT_ALLOW_PROTOCOL`). */
export const GIT_PROTOCOLS = ['https', 'ssh', 'http', 'git'] as const;
/** One of {@link GIT_PROTOCOLS}. */
export type GitProtocol = (typeof GIT_PROTOCOLS)[number];

/**
 * A credential the operator configured for one host (or host pattern), optionally for one
 * tenant only (by tenant name). `token` goes to https hosts as HTTP basic auth
 * (`username`, default `x-access-token`, and the token); `sshKeyFile` is the private key ssh
 * uses for that host. Never read from a binding, never an ambient helper.
 */
export interface GitCredential {
  readonly host: string;
  readonly tenant?: string;
  readonly username?: string;
  readonly token?: string;
  readonly sshKeyFile?: string;
}

/**
 * The operator's rules for host clones of repository bindings (DESIGN section 14): the host
 * clones only from `allowedHosts` (exact names or `*.example.com` for any subdomain; IP
 * literals as written), over `protocols`, with only the `credentials` listed here, never to a
 * loopback, private, link-local, unspecified or multicast address unless
 * `allowPrivateAddresses` (an operator with an internal git server; tests). Fetched packs are
 * capped at `maxPackBytes`, and the checked-out tree at `maxCheckoutBytes` (with the scan
 * limits on entries and file size) before anything is checked out.
 */
export interface GitConfig {
  readonly allowedHosts: readonly string[];
  readonly protocols: readonly GitProtocol[];
  readonly credentials: readonly GitCredential[];
  readonly allowPrivateAddresses: boolean;
  /** `known_hosts` file ssh checks host keys against (without one, no ssh host is trusted). */
  readonly sshKnownHostsFile?: string;
  readonly maxPackBytes: number;
  readonly maxCheckoutBytes: number;
}

/** Largest pack a host clone may fetch (`HOLDFAST_GIT_MAX_PACK_BYTES`). */
export const DEFAULT_GIT_MAX_PACK_BYTES = 1024 * 1024 * 1024;
/** Most bytes of files a host clone may check out (`HOLDFAST_GIT_MAX_CHECKOUT_BYTES`). */
export const DEFAULT_GIT_MAX_CHECKOUT_BYTES = 4 * 1024 * 1024 * 1024;

/**
 * No host allowed: a repository binding is refused until the operator names the hosts it
 * trusts (there is no safe guess: any default host would let tenants make the service
 * connect, with whatever that host grants the service's address).
 */
export const DEFAULT_GIT_CONFIG: GitConfig = Object.freeze({
  allowedHosts: Object.freeze([]),
  protocols: Object.freeze(['https', 'ssh'] as const),
  credentials: Object.freeze([]),
  allowPrivateAddresses: false,
  maxPackBytes: DEFAULT_GIT_MAX_PACK_BYTES,
  maxCheckoutBytes: DEFAULT_GIT_MAX_CHECKOUT_BYTES,
});

const GIT_HOSTS_EXAMPLE = 'github.com,*.example.com';
const GIT_HOST_PATTERN_RE = /^(?:\*\.)?[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9](?:[a-z0-9-]{0,62}))*$|^\[?[0-9a-f:.]+\]?$/;
const GIT_CREDENTIALS_EXAMPLE = '/etc/holdfast/git-credentials.json holding [{"host":"github.com","token":"…"}]';

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
    return freeze(
      { kind: 'sqlite', path: path.join(dir, 'meta.db') },
      { kind: 'local-disk', path: path.join(dir, 'blobs') },
      gitConfigFromEnv(env, cwd),
    );
  }
  const base = path.resolve(cwd, DEFAULT_STORE_DIR);
  const metaValue = env.HOLDFAST_META;
  const blobsValue = env.HOLDFAST_BLOBS;
  const meta = metaValue ? parseMetaUrl(metaValue, cwd) : ({ kind: 'sqlite', path: path.join(base, 'meta.db') } as const);
  const blobs = blobsValue ? parseBlobsUrl(blobsValue, cwd, env) : ({ kind: 'local-disk', path: path.join(base, 'blobs') } as const);
  return freeze(meta, blobs, gitConfigFromEnv(env, cwd));
}

function freeze(meta: MetaConfig, blobs: BlobsConfig, git?: GitConfig): HoldfastConfig {
  return Object.freeze({ meta: Object.freeze(meta), blobs: Object.freeze(blobs), ...(git === undefined ? {} : { git }) });
}

/**
 * The git settings of `HOLDFAST_GIT_*`, or undefined when none is set (the defaults apply):
 * `HOLDFAST_GIT_ALLOWED_HOSTS` (comma list of host patterns), `HOLDFAST_GIT_PROTOCOLS`
 * (default `https,ssh`), `HOLDFAST_GIT_CREDENTIALS_FILE` (a JSON list of
 * {@link GitCredential}), `HOLDFAST_GIT_SSH_KNOWN_HOSTS`, `HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES`
 * (`true` or `false`), `HOLDFAST_GIT_MAX_PACK_BYTES`, `HOLDFAST_GIT_MAX_CHECKOUT_BYTES`. Bad
 * values are `INVALID_INPUT` naming the variable.
 */
export function gitConfigFromEnv(env: Readonly<Record<string, string | undefined>>, cwd: string): GitConfig | undefined {
  if (!Object.keys(env).some((k) => k.startsWith('HOLDFAST_GIT_') && env[k] !== undefined)) return undefined;
  const list = (v: string | undefined) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  const bytes = (variable: string, fallback: number): number => {
    const v = env[variable];
    if (v === undefined || v === '') return fallback;
    if (!/^[1-9][0-9]{0,15}$/.test(v)) throw invalid(variable, v, 'expected a positive number of bytes', '1073741824');
    return Number(v);
  };
  const privateValue = env.HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES;
  if (privateValue !== undefined && privateValue !== '' && privateValue !== 'true' && privateValue !== 'false') {
    throw invalid('HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES', privateValue, 'expected true or false', 'false');
  }
  const credentialsFile = env.HOLDFAST_GIT_CREDENTIALS_FILE;
  const knownHosts = env.HOLDFAST_GIT_SSH_KNOWN_HOSTS;
  return parseGitConfig(
    {
      allowedHosts: list(env.HOLDFAST_GIT_ALLOWED_HOSTS),
      ...(env.HOLDFAST_GIT_PROTOCOLS ? { protocols: list(env.HOLDFAST_GIT_PROTOCOLS) as GitProtocol[] } : {}),
      credentials: credentialsFile ? readGitCredentials(path.resolve(cwd, credentialsFile)) : [],
      allowPrivateAddresses: privateValue === 'true',
      ...(knownHosts ? { sshKnownHostsFile: path.resolve(cwd, knownHosts) } : {}),
      maxPackBytes: bytes('HOLDFAST_GIT_MAX_PACK_BYTES', DEFAULT_GIT_MAX_PACK_BYTES),
      maxCheckoutBytes: bytes('HOLDFAST_GIT_MAX_CHECKOUT_BYTES', DEFAULT_GIT_MAX_CHECKOUT_BYTES),
    },
    { hosts: 'HOLDFAST_GIT_ALLOWED_HOSTS', protocols: 'HOLDFAST_GIT_PROTOCOLS', credentials: 'HOLDFAST_GIT_CREDENTIALS_FILE' },
  );
}

/**
 * A complete, frozen {@link GitConfig} from `input` over {@link DEFAULT_GIT_CONFIG}: host
 * patterns lowercased and checked, protocols among {@link GIT_PROTOCOLS}, credentials with a
 * host and a token or key file. `INVALID_INPUT` naming `names`' variable (library callers: the
 * option) otherwise.
 */
export function parseGitConfig(
  input: Partial<GitConfig>,
  names: { hosts: string; protocols: string; credentials: string } = {
    hosts: 'git.allowedHosts',
    protocols: 'git.protocols',
    credentials: 'git.credentials',
  },
): GitConfig {
  const allowedHosts = (input.allowedHosts ?? []).map((h) => {
    const host = h.toLowerCase();
    if (!GIT_HOST_PATTERN_RE.test(host))
      throw invalid(names.hosts, h, 'not a host name, *.domain pattern or IP address', GIT_HOSTS_EXAMPLE);
    return host;
  });
  const protocols = input.protocols ?? DEFAULT_GIT_CONFIG.protocols;
  for (const p of protocols) {
    if (!(GIT_PROTOCOLS as readonly string[]).includes(p)) {
      throw invalid(names.protocols, String(p), `unknown protocol (known: ${GIT_PROTOCOLS.join(', ')})`, 'https,ssh');
    }
  }
  const credentials = (input.credentials ?? []).map((c) => {
    const ok =
      typeof c === 'object' &&
      c !== null &&
      typeof c.host === 'string' &&
      GIT_HOST_PATTERN_RE.test(c.host.toLowerCase()) &&
      (typeof c.token === 'string' || typeof c.sshKeyFile === 'string') &&
      (c.tenant === undefined || typeof c.tenant === 'string') &&
      (c.username === undefined || (typeof c.username === 'string' && !c.username.includes(':')));
    if (!ok)
      throw invalid(names.credentials, '(a credential)', 'each entry needs a host and a token or sshKeyFile', GIT_CREDENTIALS_EXAMPLE);
    return Object.freeze({ ...c, host: c.host.toLowerCase() });
  });
  return Object.freeze({
    ...DEFAULT_GIT_CONFIG,
    ...input,
    allowedHosts: Object.freeze(allowedHosts),
    protocols: Object.freeze([...new Set(protocols)]),
    credentials: Object.freeze(credentials),
  });
}

function readGitCredentials(file: string): GitCredential[] {
  let value: unknown;
  try {
    value = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    throw invalid('HOLDFAST_GIT_CREDENTIALS_FILE', file, `cannot read it as JSON (${(error as Error).name})`, GIT_CREDENTIALS_EXAMPLE);
  }
  if (!Array.isArray(value)) throw invalid('HOLDFAST_GIT_CREDENTIALS_FILE', file, 'expected a JSON list', GIT_CREDENTIALS_EXAMPLE);
  return value as GitCredential[];
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
