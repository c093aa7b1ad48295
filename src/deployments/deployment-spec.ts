import { sha256Hex } from '../core/hash.js';
import { InputError } from '../errors.js';
import { findSecret } from '../rules/secrets.js';
import type { SandboxLimits } from '../sandbox/sandbox-provider.js';
import { checkedEnv } from '../sandbox/sandbox-spec.js';
import { type BundleRecord, checkedBundlePath, checkedBundleRecord } from './bundle-record.js';

/** How a run on an older deployment reaches a newly published one. */
export type WorkspaceUpgradePolicy = 'automatic' | 'manual';

/**
 * Where a turn's command starts: `workspace`, the deployment's workspace root (Holdfast's
 * default); `home`, the sandbox home (`$HOME`, beside the task, agent, user and project
 * folders), where the agent specification starts it.
 */
export type TurnCwd = 'workspace' | 'home';

/**
 * An immutable deployment: what a run's sandbox is made from. Its id is the SHA-256 of the
 * canonical JSON of these fields, so the same spec always has the same id.
 */
export interface DeploymentSpec {
  /** Sandbox provider name (`bwrap`, `local`, or one registered by the embedding platform). */
  readonly provider: string;
  /** Provider-specific base image; `null` for providers without images. */
  readonly image: string | null;
  /** Commands (argv, no shell) run in order in the workspace of every new sandbox, after the restore. */
  readonly setup: readonly (readonly string[])[];
  /** Variables of every command in the sandbox. Never credentials: values that look like secrets are refused. */
  readonly env: Readonly<Record<string, string>>;
  /** Workspace directory inside the sandbox; `null` means the provider's own workspace root. */
  readonly workspaceRoot: string | null;
  /** `automatic`: runs on the channel move to this deployment before their next turn; `manual`: only when asked. */
  readonly workspaceUpgradePolicy: WorkspaceUpgradePolicy;
  /** Runtime check (argv) run after setup; it must exit 0. `null`: the workspace root must exist and be writable. */
  readonly validate: readonly string[] | null;
  /**
   * Memory, CPU and process bounds of the sandbox (see `SandboxLimits`); `null`: the provider's
   * defaults. Part of the id only when set, so deployments made before limits existed keep theirs.
   */
  readonly limits: SandboxLimits | null;
  /**
   * Files the deployment brings (the agent's source, skills, prompts): a directory captured
   * into the store (`Bundles.capture`), restored read-only into every new sandbox and never
   * checkpointed; `null`: none. Part of the id only when set, so older deployments keep theirs.
   */
  readonly bundle: BundleRecord | null;
  /**
   * Where the bundle lands: `null` is `.deployment` under the sandbox home; a relative path is
   * under the home; an absolute one must lie outside the workspace root. Part of the id only when set.
   */
  readonly bundlePath: string | null;
  /** Where a turn's command starts (see {@link TurnCwd}). Part of the id only when not the default `workspace`. */
  readonly cwd: TurnCwd;
}

/** What callers pass: every field but `provider` has a default. */
export type DeploymentSpecInput = { readonly provider: string } & {
  readonly [K in Exclude<keyof DeploymentSpec, 'provider'>]?: DeploymentSpec[K] | undefined;
};

/** Bounds that keep a deployment record small. */
export const MAX_SETUP_COMMANDS = 32;
export const MAX_ARGV_ITEMS = 256;
export const MAX_ARG_CHARS = 8192;
const MAX_IMAGE_CHARS = 512;
const MAX_ROOT_CHARS = 1024;
const PROVIDER_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;
const LIMIT_FIELDS = ['memoryBytes', 'cpus', 'pids'] as const;

/** Checks and completes a spec; throws `INVALID_INPUT`, `LIMIT_EXCEEDED` or `SECRET_EXCLUDED`. */
export function normalizeDeploymentSpec(input: DeploymentSpecInput): DeploymentSpec {
  if (typeof input !== 'object' || input === null) throw invalid('a deployment spec must be an object', 'spec');
  if (typeof input.provider !== 'string' || !PROVIDER_PATTERN.test(input.provider)) {
    throw invalid(`provider must match ${PROVIDER_PATTERN}`, 'provider');
  }
  const image = input.image ?? null;
  if (image !== null && (typeof image !== 'string' || image === '' || image.length > MAX_IMAGE_CHARS)) {
    throw invalid(`image must be a non-empty string of at most ${MAX_IMAGE_CHARS} characters`, 'image');
  }
  const setup = input.setup ?? [];
  if (!Array.isArray(setup)) throw invalid('setup must be a list of argv lists', 'setup');
  if (setup.length > MAX_SETUP_COMMANDS) {
    throw new InputError('LIMIT_EXCEEDED', `at most ${MAX_SETUP_COMMANDS} setup commands`, { data: { field: 'setup' } });
  }
  const env = checkedEnv(input.env);
  const workspaceRoot = input.workspaceRoot ?? null;
  if (
    workspaceRoot !== null &&
    (typeof workspaceRoot !== 'string' ||
      !workspaceRoot.startsWith('/') ||
      workspaceRoot.length > MAX_ROOT_CHARS ||
      workspaceRoot.split('/').some((part) => part === '..' || part === '.') ||
      workspaceRoot.includes('\0'))
  ) {
    throw invalid('workspaceRoot must be an absolute path without . or .. components', 'workspaceRoot');
  }
  const policy = input.workspaceUpgradePolicy ?? 'automatic';
  if (policy !== 'automatic' && policy !== 'manual')
    throw invalid('workspaceUpgradePolicy must be automatic or manual', 'workspaceUpgradePolicy');
  const spec: DeploymentSpec = {
    provider: input.provider,
    image,
    setup: setup.map((argv, i) => checkedArgv(argv, `setup[${i}]`)),
    env: Object.fromEntries(Object.entries(env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    workspaceRoot: workspaceRoot === null ? null : workspaceRoot.replace(/\/+$/, '') || '/',
    workspaceUpgradePolicy: policy,
    validate: input.validate === undefined || input.validate === null ? null : checkedArgv(input.validate, 'validate'),
    limits: checkedLimits(input.limits),
    bundle: input.bundle === undefined || input.bundle === null ? null : checkedBundleRecord(input.bundle),
    bundlePath: checkedBundlePath(input.bundlePath, workspaceRoot === null ? null : workspaceRoot.replace(/\/+$/, '') || '/'),
    cwd: checkedCwd(input.cwd),
  };
  if (spec.bundlePath !== null && spec.bundle === null) throw invalid('bundlePath needs a bundle', 'bundlePath');
  refuseCredentials(spec);
  return spec;
}

/**
 * A deployment is stored and shown as it is: none of its strings (image, env values, setup and
 * validate arguments) may hold a credential (`SECRET_EXCLUDED`, naming the field). Credentials
 * reach a sandbox at run time, never through Holdfast.
 */
function refuseCredentials(spec: DeploymentSpec): void {
  const fields: Array<[string, string, string | undefined]> = [
    ...(spec.image === null ? [] : [['image', spec.image, undefined] as [string, string, undefined]]),
    ...Object.entries(spec.env).map(([name, value]): [string, string, string] => ['env', value, name]),
    ...spec.setup.flatMap((argv, i) => argv.map((arg): [string, string, undefined] => [`setup[${i}]`, arg, undefined])),
    ...(spec.validate ?? []).map((arg): [string, string, undefined] => ['validate', arg, undefined]),
    ...(spec.bundlePath === null ? [] : [['bundlePath', spec.bundlePath, undefined] as [string, string, undefined]]),
  ];
  for (const [field, value, name] of fields) {
    const finding = findSecret(Buffer.from(value));
    if (finding === undefined) continue;
    const what = name === undefined ? field : `variable ${name}`;
    throw new InputError(
      'SECRET_EXCLUDED',
      `deployment ${what} looks like a credential (${finding.rule}); Holdfast never stores credentials: inject them into the sandbox at run time instead`,
      { data: { field, ...(name === undefined ? {} : { name }), rule: finding.rule } },
    );
  }
}

/**
 * Canonical JSON of a normalized spec: fixed key order, sorted env; `limits`, `bundle` and
 * `bundlePath` only when set, `cwd` only when `home` (so a spec from before they existed keeps its id).
 */
export function canonicalSpecJson(spec: DeploymentSpec): string {
  const { provider, image, setup, env, workspaceRoot, workspaceUpgradePolicy, validate, limits, bundle, bundlePath, cwd } = spec;
  const bounds =
    limits === null || limits === undefined
      ? {}
      : { limits: Object.fromEntries(LIMIT_FIELDS.filter((f) => limits[f] !== undefined).map((f) => [f, limits[f]])) };
  const bundled =
    bundle === null || bundle === undefined ? {} : { bundle: { rootTree: bundle.rootTree, files: bundle.files, bytes: bundle.bytes } };
  const placed = bundlePath === null || bundlePath === undefined ? {} : { bundlePath };
  const started = cwd === 'home' ? { cwd } : {};
  return JSON.stringify({
    provider,
    image,
    setup,
    env,
    workspaceRoot,
    workspaceUpgradePolicy,
    validate,
    ...bounds,
    ...bundled,
    ...placed,
    ...started,
  });
}

/**
 * A stored spec (canonical JSON) as a complete {@link DeploymentSpec}: fields a spec from
 * before they existed lacks (`limits`, `bundle`, `bundlePath`) read as `null`, `cwd` as `workspace`.
 */
export function parseStoredSpec(json: string): DeploymentSpec {
  const stored = JSON.parse(json) as Partial<DeploymentSpec> & Pick<DeploymentSpec, 'provider'>;
  return {
    ...stored,
    limits: stored.limits ?? null,
    bundle: stored.bundle ?? null,
    bundlePath: stored.bundlePath ?? null,
    cwd: stored.cwd ?? 'workspace',
  } as DeploymentSpec;
}

/** Checks `cwd`: `workspace` (the default) or `home`. */
function checkedCwd(input: unknown): TurnCwd {
  if (input === undefined || input === null) return 'workspace';
  if (input !== 'workspace' && input !== 'home') throw invalid('cwd must be workspace or home', 'cwd');
  return input;
}

/** Checks limits: an object of positive numbers (memoryBytes and pids integers), or null. */
function checkedLimits(input: unknown): SandboxLimits | null {
  if (input === undefined || input === null) return null;
  if (typeof input !== 'object' || Array.isArray(input)) throw invalid('limits must be an object', 'limits');
  const limits: Record<string, number> = {};
  for (const [key, value] of Object.entries(input)) {
    if (value === undefined) continue;
    const field = LIMIT_FIELDS.find((f) => f === key);
    const integer = key !== 'cpus';
    if (
      field === undefined ||
      typeof value !== 'number' ||
      !Number.isFinite(value) ||
      value <= 0 ||
      (integer && !Number.isSafeInteger(value))
    ) {
      throw invalid(
        `limits may hold memoryBytes and pids (positive integers) and cpus (a positive number); ${key} is not that`,
        `limits.${key}`,
      );
    }
    limits[field] = value;
  }
  return limits;
}

/** The deployment id: SHA-256 (hex) of the canonical JSON. */
export function deploymentId(spec: DeploymentSpec): string {
  return sha256Hex(canonicalSpecJson(spec));
}

/** Checks an argv list; returns a plain copy. */
export function checkedArgv(argv: unknown, field: string): string[] {
  if (!Array.isArray(argv) || argv.length === 0) throw invalid(`${field} must be a non-empty list of strings`, field);
  if (argv.length > MAX_ARGV_ITEMS)
    throw new InputError('LIMIT_EXCEEDED', `${field} has more than ${MAX_ARGV_ITEMS} items`, { data: { field } });
  for (const arg of argv) {
    if (typeof arg !== 'string' || arg.length > MAX_ARG_CHARS || arg.includes('\0')) {
      throw invalid(`${field} items must be strings without NUL of at most ${MAX_ARG_CHARS} characters`, field);
    }
  }
  return [...(argv as string[])];
}

function invalid(message: string, field: string): InputError {
  return new InputError('INVALID_INPUT', message, { data: { field } });
}
