import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { fieldPath, InputError } from './errors.js';

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
  /** A PEM file of certificate authorities trusted for https remotes besides the system's (an internal git server's CA). */
  readonly caFile?: string;
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

const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

const GitHostPattern = z
  .string()
  .transform((host) => host.toLowerCase())
  .pipe(z.string().regex(GIT_HOST_PATTERN_RE, { error: 'not a host name, *.domain pattern or IP address' }));

/** One entry of the git credentials file or `git.credentials` ({@link GitCredential}). */
export const GitCredentialSchema = z
  .object({
    host: GitHostPattern,
    tenant: z.string().optional(),
    username: z
      .string()
      .refine((u) => !u.includes(':'), { error: 'a username holds no colon' })
      .optional(),
    token: z.string().optional(),
    sshKeyFile: z.string().optional(),
  })
  .refine((c) => c.token !== undefined || c.sshKeyFile !== undefined, { error: 'each entry needs a host and a token or sshKeyFile' });

const GitProtocolList = z.array(z.enum(GIT_PROTOCOLS, { error: `unknown protocol (known: ${GIT_PROTOCOLS.join(', ')})` }));

/** {@link GitConfig}, every field but none required: what is left out takes {@link DEFAULT_GIT_CONFIG}'s value. */
export const GitConfigSchema = z.object({
  allowedHosts: z.array(GitHostPattern).default([]),
  protocols: GitProtocolList.default([...DEFAULT_GIT_CONFIG.protocols]).transform((protocols) => [...new Set(protocols)]),
  credentials: z.array(GitCredentialSchema).default([]),
  allowPrivateAddresses: z.boolean().default(false),
  sshKnownHostsFile: z.string().min(1).optional(),
  caFile: z.string().min(1).optional(),
  maxPackBytes: z.number().int().positive().default(DEFAULT_GIT_MAX_PACK_BYTES),
  maxCheckoutBytes: z.number().int().positive().default(DEFAULT_GIT_MAX_CHECKOUT_BYTES),
});

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

/** `HOLDFAST_LOG_LEVEL` values, most verbose first; `silent` writes no line at all. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
/** One of {@link LOG_LEVELS}: the lowest level a logger writes. */
export type LogThreshold = (typeof LOG_LEVELS)[number];
/** The level when `HOLDFAST_LOG_LEVEL` is unset or empty. */
export const DEFAULT_LOG_LEVEL: LogThreshold = 'info';

/** An environment variable: unset and empty are the same (the default applies). */
const variable = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema.optional());
const commaList = z.string().transform((v) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== ''),
);
const byteCount = z
  .string()
  .regex(/^[1-9][0-9]{0,15}$/, { error: 'expected a positive number of bytes' })
  .transform(Number);
/** Highest TCP port. */
const MAX_PORT = 65_535;
/** Values of `HOLDFAST_INSPECTOR`: whether `serve` serves the inspector at `/ui/`. */
const INSPECTOR_SWITCH: Readonly<Record<string, boolean>> = { on: true, true: true, '1': true, off: false, false: false, '0': false };
/** A decimal integer in `[min, max]`, as a variable spells it. */
const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .refine((v) => v.trim() !== '' && Number.isSafeInteger(Number(v)) && Number(v) >= min && Number(v) <= max, {
      error: `expected an integer from ${min} to ${max}`,
    })
    .transform(Number);
const trueOrFalse = z.enum(['true', 'false'], { error: 'expected true or false' }).transform((v) => v === 'true');

/**
 * The environment variables configuration reads, by name, each unset when absent or empty:
 * the stores, the log level, the git settings and what `holdfast serve` takes from them.
 * The store URLs (`HOLDFAST_META`, `HOLDFAST_BLOBS`) are strings here; {@link parseMetaUrl}
 * and {@link parseBlobsUrl} read them, relative to the working directory.
 */
export const ConfigEnvSchema = z.object({
  HOLDFAST_META: variable(z.string()),
  HOLDFAST_BLOBS: variable(z.string()),
  HOLDFAST_LOG_LEVEL: variable(z.enum(LOG_LEVELS, { error: `expected one of ${LOG_LEVELS.join(', ')}` })),
  HOLDFAST_GIT_ALLOWED_HOSTS: variable(commaList.pipe(z.array(GitHostPattern))),
  HOLDFAST_GIT_PROTOCOLS: variable(commaList.pipe(GitProtocolList)),
  HOLDFAST_GIT_CREDENTIALS_FILE: variable(z.string()),
  HOLDFAST_GIT_SSH_KNOWN_HOSTS: variable(z.string()),
  HOLDFAST_GIT_CA_FILE: variable(z.string()),
  HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES: variable(trueOrFalse),
  HOLDFAST_GIT_MAX_PACK_BYTES: variable(byteCount),
  HOLDFAST_GIT_MAX_CHECKOUT_BYTES: variable(byteCount),
  HOLDFAST_HOST: variable(z.string()),
  HOLDFAST_PORT: variable(integer(0, MAX_PORT)),
  HOLDFAST_LEASE_TTL_MS: variable(integer(1)),
  HOLDFAST_CHECKPOINT_INTERVAL_MS: variable(integer(0)),
  HOLDFAST_SHUTDOWN_DEADLINE_MS: variable(integer(1)),
  HOLDFAST_STRAY_SWEEP_INTERVAL_MS: variable(integer(0)),
  HOLDFAST_GC_SWEEP_INTERVAL_MS: variable(integer(0)),
  HOLDFAST_INSPECTOR: variable(
    z
      .string()
      .transform((v) => v.toLowerCase())
      .pipe(
        z.enum(Object.keys(INSPECTOR_SWITCH) as [string, ...string[]], {
          error: `expected one of ${Object.keys(INSPECTOR_SWITCH).join(', ')}`,
        }),
      )
      .transform((v) => INSPECTOR_SWITCH[v] === true),
  ),
});
/** What {@link readConfigEnv} answers. */
export type ConfigEnv = z.output<typeof ConfigEnvSchema>;

/** A valid example of each variable, for the error that refuses it. */
const VARIABLE_EXAMPLES: Readonly<Record<string, string>> = {
  HOLDFAST_LOG_LEVEL: 'debug',
  HOLDFAST_PORT: '7420',
  HOLDFAST_INSPECTOR: 'off',
  HOLDFAST_GIT_ALLOWED_HOSTS: GIT_HOSTS_EXAMPLE,
  HOLDFAST_GIT_PROTOCOLS: 'https,ssh',
  HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES: 'false',
  HOLDFAST_GIT_MAX_PACK_BYTES: '1073741824',
  HOLDFAST_GIT_MAX_CHECKOUT_BYTES: '4294967296',
};

/**
 * `env` read by {@link ConfigEnvSchema}. A bad value is `INVALID_INPUT` whose `data.variable`
 * and `data.field` name the variable, with a valid example in the message.
 */
export function readConfigEnv(env: Readonly<Record<string, string | undefined>>): ConfigEnv {
  const parsed = ConfigEnvSchema.safeParse(env);
  if (parsed.success) return parsed.data;
  const name = String(firstIssue(parsed.error).path[0]);
  return throwInvalid(name, env[name] ?? '', firstIssue(parsed.error).message, VARIABLE_EXAMPLES[name] ?? '…');
}

/** The level `HOLDFAST_LOG_LEVEL` sets ({@link DEFAULT_LOG_LEVEL} when unset); `INVALID_INPUT` naming it otherwise. */
export function logLevelFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): LogThreshold {
  return readConfigEnv(env).HOLDFAST_LOG_LEVEL ?? DEFAULT_LOG_LEVEL;
}

/** The issue an error reports: zod lists them in input order. */
function firstIssue(error: z.ZodError): z.core.$ZodIssue {
  const [issue] = error.issues;
  if (issue === undefined) throw new TypeError('a failed parse without issues');
  return issue;
}

function throwInvalid(variable: string, value: string, problem: string, example: string): never {
  throw invalid(variable, value, problem, example);
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

function invalid(variable: string, value: string, problem: string, example: string): InputError {
  return new InputError('INVALID_INPUT', `${variable}=${redactUrl(value)}: ${problem}. Example: ${variable}=${example}`, {
    data: { variable, field: variable },
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

/**
 * The git settings of `HOLDFAST_GIT_*`, or undefined when none is set (the defaults apply):
 * `HOLDFAST_GIT_ALLOWED_HOSTS` (comma list of host patterns), `HOLDFAST_GIT_PROTOCOLS`
 * (default `https,ssh`), `HOLDFAST_GIT_CREDENTIALS_FILE` (a JSON list of
 * {@link GitCredential}), `HOLDFAST_GIT_SSH_KNOWN_HOSTS`, `HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES`
 * (`true` or `false`), `HOLDFAST_GIT_MAX_PACK_BYTES`, `HOLDFAST_GIT_MAX_CHECKOUT_BYTES`,
 * `HOLDFAST_GIT_CA_FILE` (extra certificate authorities for https remotes). Bad
 * values are `INVALID_INPUT` naming the variable.
 */
export function gitConfigFromEnv(env: Readonly<Record<string, string | undefined>>, cwd: string): GitConfig | undefined {
  if (!Object.keys(env).some((k) => k.startsWith('HOLDFAST_GIT_') && env[k] !== undefined)) return undefined;
  const vars = readConfigEnv(env);
  const credentialsFile = vars.HOLDFAST_GIT_CREDENTIALS_FILE;
  const knownHosts = vars.HOLDFAST_GIT_SSH_KNOWN_HOSTS;
  const caFile = vars.HOLDFAST_GIT_CA_FILE;
  return parseGitConfig(
    {
      allowedHosts: vars.HOLDFAST_GIT_ALLOWED_HOSTS ?? [],
      ...(vars.HOLDFAST_GIT_PROTOCOLS === undefined ? {} : { protocols: vars.HOLDFAST_GIT_PROTOCOLS }),
      credentials: credentialsFile === undefined ? [] : readGitCredentials(path.resolve(cwd, credentialsFile)),
      allowPrivateAddresses: vars.HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES ?? false,
      ...(knownHosts === undefined ? {} : { sshKnownHostsFile: path.resolve(cwd, knownHosts) }),
      ...(caFile === undefined ? {} : { caFile: path.resolve(cwd, caFile) }),
      maxPackBytes: vars.HOLDFAST_GIT_MAX_PACK_BYTES ?? DEFAULT_GIT_MAX_PACK_BYTES,
      maxCheckoutBytes: vars.HOLDFAST_GIT_MAX_CHECKOUT_BYTES ?? DEFAULT_GIT_MAX_CHECKOUT_BYTES,
    },
    { hosts: 'HOLDFAST_GIT_ALLOWED_HOSTS', protocols: 'HOLDFAST_GIT_PROTOCOLS', credentials: 'HOLDFAST_GIT_CREDENTIALS_FILE' },
  );
}

/**
 * A complete, frozen {@link GitConfig} from `input` over {@link DEFAULT_GIT_CONFIG}, by
 * {@link GitConfigSchema}: host patterns lowercased and checked, protocols among
 * {@link GIT_PROTOCOLS}, credentials with a host and a token or key file. `INVALID_INPUT`
 * otherwise, `data.variable` naming `names`' variable (library callers: the option) and
 * `data.field` the exact place (`git.allowedHosts[1]`; for a variable, the variable).
 */
export function parseGitConfig(
  input: Partial<GitConfig>,
  names: { hosts: string; protocols: string; credentials: string } = {
    hosts: 'git.allowedHosts',
    protocols: 'git.protocols',
    credentials: 'git.credentials',
  },
): GitConfig {
  const parsed = GitConfigSchema.safeParse(input, { reportInput: true });
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    const [key] = issue.path;
    const variable =
      key === 'allowedHosts'
        ? names.hosts
        : key === 'protocols'
          ? names.protocols
          : key === 'credentials'
            ? names.credentials
            : `git.${String(key)}`;
    const fromEnv = variable.startsWith('HOLDFAST_');
    const field = fromEnv ? variable : fieldPath(['git', ...issue.path]);
    // A credential is never echoed: the message names where it is, not what it holds.
    const shown = key === 'allowedHosts' || key === 'protocols' ? `=${String(issue.input)}` : '';
    const example = key === 'allowedHosts' ? GIT_HOSTS_EXAMPLE : key === 'protocols' ? 'https,ssh' : GIT_CREDENTIALS_EXAMPLE;
    throw new InputError('INVALID_INPUT', `${field}${shown}: ${issue.message}. Example: ${variable}=${example}`, {
      data: { variable, field },
    });
  }
  // zod's optional fields read `T | undefined`; the schema never sets one to undefined.
  const git = parsed.data as GitConfig;
  return Object.freeze({
    ...git,
    allowedHosts: Object.freeze(git.allowedHosts),
    protocols: Object.freeze(git.protocols),
    credentials: Object.freeze(git.credentials.map((c) => Object.freeze(c))),
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
