/**
 * The environment variables configuration reads (`HOLDFAST_*`), one schema for all of them,
 * and what is read from them alone: the log level and the git settings.
 */
import path from 'node:path';
import { z } from 'zod';
import { configInvalid, firstIssue } from './config-errors.js';
import {
  DEFAULT_GIT_MAX_CHECKOUT_BYTES,
  DEFAULT_GIT_MAX_PACK_BYTES,
  GIT_HOSTS_EXAMPLE,
  type GitConfig,
  GitHostPattern,
  GitProtocolList,
  parseGitConfig,
  readGitCredentials,
} from './config-git.js';

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

function throwInvalid(variable: string, value: string, problem: string, example: string): never {
  throw configInvalid(variable, value, problem, example);
}
