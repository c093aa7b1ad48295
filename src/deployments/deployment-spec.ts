import { z } from 'zod';
import { sha256Hex } from '../core/hash.js';
import { fieldPath, InputError } from '../errors.js';
import { findSecret } from '../rules/secrets.js';
import type { SandboxLimits } from '../sandbox/sandbox-provider.js';
import { checkedEnv, ENV_NAME_PATTERN, MAX_ENV_VALUE_CHARS, MAX_ENV_VARS } from '../sandbox/sandbox-spec.js';
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

/** A bound whose breach is `LIMIT_EXCEEDED` rather than `INVALID_INPUT` (a custom issue's params). */
const LIMIT = { params: { limit: true } } as const;
const noNul = (value: string): boolean => !value.includes('\0');

/** An argv list: 1 to {@link MAX_ARGV_ITEMS} strings without NUL of at most {@link MAX_ARG_CHARS} characters. */
export const ArgvSchema = z
  .array(z.string().max(MAX_ARG_CHARS).refine(noNul, { error: 'an argument holds no NUL' }))
  .min(1)
  .max(MAX_ARGV_ITEMS);

/** Variables of every sandbox command: POSIX names, string values without NUL, at most `MAX_ENV_VARS`. */
export const EnvSchema = z
  .record(z.string().regex(ENV_NAME_PATTERN), z.string().max(MAX_ENV_VALUE_CHARS).refine(noNul, { error: 'a value holds no NUL' }))
  .refine((env) => Object.keys(env).length <= MAX_ENV_VARS, { error: `at most ${MAX_ENV_VARS} environment variables`, ...LIMIT });

/** A captured bundle as a deployment names it ({@link BundleRecord}). */
export const BundleRecordSchema = z.object({
  rootTree: z.string().regex(/^[0-9a-f]{64}$/),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
});

const isCleanRoot = (root: string): boolean =>
  root.startsWith('/') && root.split('/').every((part) => part !== '..' && part !== '.') && noNul(root);

/**
 * The one schema of a deployment spec as every entry passes it (the HTTP body of
 * `POST /v1/deployments`, `holdfast deployment create`, `Deployments.create`): every field but
 * `provider` optional. `bundle` is a captured bundle's record or its `rootTree` alone (a
 * tenant's own capture, resolved by `Deployments.create`). What needs more than the spec's own
 * fields (a bundle this tenant captured, a credential in a string) is checked after it.
 */
export const DeploymentSpecInputSchema = z.strictObject({
  provider: z.string().regex(PROVIDER_PATTERN),
  image: z.string().min(1).max(MAX_IMAGE_CHARS).nullish(),
  setup: z
    .array(ArgvSchema)
    .max(MAX_SETUP_COMMANDS, { error: `at most ${MAX_SETUP_COMMANDS} setup commands` })
    .optional(),
  env: EnvSchema.optional(),
  workspaceRoot: z
    .string()
    .max(MAX_ROOT_CHARS)
    .refine(isCleanRoot, { error: 'workspaceRoot must be an absolute path without . or .. components' })
    .nullish(),
  workspaceUpgradePolicy: z.enum(['automatic', 'manual']).optional(),
  validate: ArgvSchema.nullish(),
  limits: z
    .strictObject({
      memoryBytes: z.number().int().positive().optional(),
      cpus: z.number().positive().optional(),
      pids: z.number().int().positive().optional(),
    })
    .nullish(),
  /** A bundle this tenant captured: its record, or its rootTree alone. */
  bundle: z.union([BundleRecordSchema, z.string().regex(/^[0-9a-f]{64}$/)]).nullish(),
  bundlePath: z.string().max(1024).nullish(),
  /** Where a turn's command starts: the workspace root (default) or the sandbox home. */
  cwd: z.enum(['workspace', 'home']).optional(),
});

/** What {@link DeploymentSpecInputSchema} makes of a valid input. */
export type CheckedDeploymentSpecInput = z.output<typeof DeploymentSpecInputSchema>;

/**
 * `input` checked by {@link DeploymentSpecInputSchema}; otherwise `INVALID_INPUT` (or
 * `LIMIT_EXCEEDED` for a bound on a count: setup commands, argv items, variables) with
 * `data.field` naming the first bad field's path (`setup[2]`, `limits.cpus`, `env.BAD-NAME`).
 */
export function parseDeploymentSpecInput(input: unknown): CheckedDeploymentSpecInput {
  const parsed = DeploymentSpecInputSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  if (issue === undefined) throw invalid('a deployment spec must be an object', 'spec');
  // An unknown key names itself: `limits.disk`, not `limits`.
  const keys = issue.code === 'unrecognized_keys' ? issue.keys.slice(0, 1) : [];
  const field = fieldPath([...issue.path, ...keys]) || 'spec';
  const limit =
    (issue.code === 'too_big' && issue.origin === 'array') ||
    (issue.code === 'custom' && (issue.params as { limit?: boolean } | undefined)?.limit === true);
  const message = issue.code === 'unrecognized_keys' ? `${field} is not a field of a deployment spec` : `${field}: ${issue.message}`;
  throw new InputError(limit ? 'LIMIT_EXCEEDED' : 'INVALID_INPUT', message, { data: { field } });
}

/** Checks and completes a spec; throws `INVALID_INPUT`, `LIMIT_EXCEEDED` or `SECRET_EXCLUDED` naming the field. */
export function normalizeDeploymentSpec(input: DeploymentSpecInput): DeploymentSpec {
  const checked = parseDeploymentSpecInput(input);
  const env = checkedEnv(checked.env);
  const workspaceRoot = checked.workspaceRoot ?? null;
  const root = workspaceRoot === null ? null : workspaceRoot.replace(/\/+$/, '') || '/';
  const spec: DeploymentSpec = {
    provider: checked.provider,
    image: checked.image ?? null,
    setup: (checked.setup ?? []).map((argv) => [...argv]),
    env: Object.fromEntries(Object.entries(env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    workspaceRoot: root,
    workspaceUpgradePolicy: checked.workspaceUpgradePolicy ?? 'automatic',
    validate: checked.validate === undefined || checked.validate === null ? null : [...checked.validate],
    limits: checkedLimits(checked.limits),
    bundle: checked.bundle === undefined || checked.bundle === null ? null : checkedBundleRecord(checked.bundle),
    bundlePath: checkedBundlePath(checked.bundlePath, root),
    cwd: checked.cwd ?? 'workspace',
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

/** The set bounds of `limits` in their fixed order, or `null` when none is set. */
function checkedLimits(limits: CheckedDeploymentSpecInput['limits']): SandboxLimits | null {
  if (limits === undefined || limits === null) return null;
  return Object.fromEntries(LIMIT_FIELDS.filter((f) => limits[f] !== undefined).map((f) => [f, limits[f]])) as SandboxLimits;
}

/** The deployment id: SHA-256 (hex) of the canonical JSON. */
export function deploymentId(spec: DeploymentSpec): string {
  return sha256Hex(canonicalSpecJson(spec));
}

/** Checks an argv list by {@link ArgvSchema} (`INVALID_INPUT`; `LIMIT_EXCEEDED` past its item bound) naming `field`; returns a plain copy. */
export function checkedArgv(argv: unknown, field: string): string[] {
  const parsed = ArgvSchema.safeParse(argv);
  if (parsed.success) return [...parsed.data];
  const limit = parsed.error.issues.some((issue) => issue.code === 'too_big' && issue.origin === 'array');
  if (limit) throw new InputError('LIMIT_EXCEEDED', `${field} has more than ${MAX_ARGV_ITEMS} items`, { data: { field } });
  throw invalid(`${field} must be a non-empty list of strings without NUL of at most ${MAX_ARG_CHARS} characters`, field);
}

function invalid(message: string, field: string): InputError {
  return new InputError('INVALID_INPUT', message, { data: { field } });
}
