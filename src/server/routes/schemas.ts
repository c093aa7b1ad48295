import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../../core/page-cursor.js';
import { ArgvSchema, BundleRecordSchema, DeploymentSpecInputSchema, EnvSchema } from '../../deployments/deployment-spec.js';
import { CHECKPOINT_REASONS } from '../../metadata/schema.js';
import {
  MAX_CHECKPOINT_LABEL_CHARS,
  MAX_CHECKPOINT_META_BYTES,
  MAX_CHECKPOINT_META_KEY_CHARS,
  MAX_CHECKPOINT_META_KEYS,
} from '../../snapshot/checkpoint-note.js';
import { MAX_CURSOR_CHARS } from './work-folders-schemas.js';

/** Shared request and response schemas of API v1 (they also document it). */

/** The deployment spec's own schemas: one per shape, shared by the HTTP body, the CLI and the library. */
export const Argv = ArgvSchema;
export const Env = EnvSchema;
export { BundleRecordSchema };

/** The body of `POST /v1/deployments`: the deployment spec input schema itself. */
export const DeploymentBody = DeploymentSpecInputSchema;

/** What every stored JSON object may hold (stats, error data, event data): any JSON values by name. */
const JsonRecord = z.record(z.string(), z.unknown());
/** A SHA-256 in lowercase hex: deployment ids, tree ids, file hashes. */
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
/** An instant, in milliseconds since the epoch. */
const EpochMs = z.number().int().describe('Epoch milliseconds');
/** A count of things or bytes. */
const Count = z.number().int().nonnegative();

/**
 * A failure as stored with a turn or a checkpoint (`HoldfastError#toJSON()`). Its code is a
 * string, not the closed enum: a stored row outlives the version that wrote it.
 */
export const StoredError = z
  .looseObject({ code: z.string(), message: z.string(), data: JsonRecord.optional() })
  .meta({ id: 'StoredError', description: 'A recorded failure: its error code, message and data' });

/** A deployment's spec as normalized and stored (`runs/deployment-spec.ts` `DeploymentSpec`). */
export const DeploymentSpecSchema = z
  .object({
    provider: z.string(),
    image: z.string().nullable(),
    setup: z.array(z.array(z.string())),
    env: z.record(z.string(), z.string()),
    workspaceRoot: z.string().nullable(),
    workspaceUpgradePolicy: z.enum(['automatic', 'manual']),
    validate: z.array(z.string()).nullable(),
    limits: z.object({ memoryBytes: Count.optional(), cpus: z.number().positive().optional(), pids: Count.optional() }).nullable(),
    bundle: BundleRecordSchema.nullable(),
    bundlePath: z.string().nullable(),
    cwd: z.enum(['workspace', 'home']).describe("Where a turn's command starts: the workspace root or the sandbox home ($HOME)"),
  })
  .meta({ id: 'DeploymentSpec' });

export const Deployment = z
  .object({
    id: Sha256.describe('SHA-256 of the canonical spec: the same spec is the same deployment'),
    spec: DeploymentSpecSchema,
    createdAt: EpochMs,
  })
  .meta({ id: 'Deployment' });

export const ChannelBody = z.strictObject({ deploymentId: z.string().length(64) });
export const Channel = z
  .object({ tenantId: z.string(), name: z.string(), deploymentId: Sha256, version: z.number().int().positive(), updatedAt: EpochMs })
  .meta({ id: 'Channel' });

/** An owner id of a binding; `parseRunBindings` (auth/folder-access.ts) holds the same rule. */
const OwnerId = z
  .string()
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:@-]*$/);

/** The owners of the collections a run is bound to, by scope. */
export const RunBindings = z.strictObject({
  task: OwnerId.optional(),
  agent: OwnerId.optional(),
  user: OwnerId.optional().describe(
    "A live user's name; needs that user's consent: the request is made with a token of that user (anything else is 403 FORBIDDEN, data.field bindings.user). Stored as the user's immutable id",
  ),
  project: OwnerId.optional(),
  /** Repositories checked out under `$HOME/repos/<name>`; `parseRepoBindings` (repos/repo-bindings.ts) holds the rules. */
  repos: z
    .array(
      z.strictObject({
        name: z.string().max(64).optional(),
        url: z.string().max(2048),
        ref: z.string().max(255).optional(),
        branch: z.string().max(255).optional(),
      }),
    )
    .max(16)
    .optional(),
});

/**
 * One value of a checkpoint's metadata. Each member carries a description so the document keeps
 * them as separate `anyOf` branches (a bare union collapses into a `type` array, which strict
 * JSON Schema validators refuse).
 */
const CheckpointMetaValue = z.union([
  z.string().describe('text'),
  z.number().describe('a finite number'),
  z.boolean().describe('a flag'),
  z.null().describe('no value'),
]);

/** A checkpoint's label as a request gives it; `checkedCheckpointNote` (snapshot/checkpoint-note.ts) holds every rule. */
export const CheckpointLabel = z
  .string()
  .min(1)
  .max(MAX_CHECKPOINT_LABEL_CHARS)
  .describe(
    `1-${MAX_CHECKPOINT_LABEL_CHARS} characters, no control characters; one that looks like a credential is refused (422 SECRET_EXCLUDED)`,
  );
/** A checkpoint's metadata as a request gives it. */
export const CheckpointMetaSchema = z
  .record(z.string().max(MAX_CHECKPOINT_META_KEY_CHARS), CheckpointMetaValue)
  .describe(
    `A flat JSON object: at most ${MAX_CHECKPOINT_META_KEYS} keys of A-Z a-z 0-9 _ . : @ / -, values strings, numbers, booleans or null, at most ${MAX_CHECKPOINT_META_BYTES} bytes as JSON (413 LIMIT_EXCEEDED above); no credentials (422 SECRET_EXCLUDED)`,
  );
/** What a request that makes a checkpoint may attach to it. */
export const CheckpointNoteBody = z.strictObject({ label: CheckpointLabel.optional(), meta: CheckpointMetaSchema.optional() });

export const RunBody = z.union([
  z.strictObject({ channel: z.string().min(1).max(64), bindings: RunBindings.optional() }),
  z.strictObject({ deploymentId: z.string().length(64), bindings: RunBindings.optional() }),
  z
    .strictObject({
      fromCheckpoint: z
        .string()
        .min(1)
        .max(128)
        .describe(
          "A checkpoint of this tenant (id, unique prefix of 8+ characters, or latest): the run's workspace starts from it, no byte copied",
        ),
      channel: z.string().min(1).max(64).optional().describe("Default: the source run's channel (or its pinned deployment)"),
      deploymentId: z.string().length(64).optional(),
      bindings: RunBindings.optional(),
      label: CheckpointLabel.optional().describe("The label of the fork's first checkpoint"),
      meta: CheckpointMetaSchema.optional().describe("The metadata of the fork's first checkpoint"),
    })
    .meta({ id: 'ForkRunBody', description: 'Fork: a new run from any checkpoint of this tenant' }),
]);

/** A run's lease (`metadata/repos/runs-repo.ts` `Lease`). */
const Lease = z.object({
  state: z.enum(['free', 'held', 'release_recovery_required']),
  epoch: Count.describe('Bumped by every claim and every resolution'),
  owner: z.string().nullable(),
  expiresAt: EpochMs.nullable(),
  takenFrom: z.string().nullable().describe('The owner the latest claim took an expired lease from'),
  error: JsonRecord.nullable().describe('Why the lease needs recovery (release_recovery_required)'),
});

export const Run = z
  .object({
    id: z.string(),
    tenantId: z.string(),
    workspaceId: z.string(),
    channel: z.string().nullable().describe('The channel the run follows for upgrades; `null` when pinned'),
    deploymentId: Sha256,
    sandbox: z.object({ provider: z.string(), id: z.string() }).nullable().describe('The current sandbox; `null` before the first turn'),
    lease: Lease,
    turnCount: Count,
    bindings: z
      .object({
        task: z.string().optional(),
        agent: z.string().optional(),
        user: z
          .string()
          .optional()
          .describe("The bound user's name (the binding holds the user's immutable id: a later user of that name is not bound)"),
        project: z.string().optional(),
        repos: z
          .array(z.object({ name: z.string(), url: z.string(), ref: z.string().optional(), branch: z.string().optional() }))
          .optional(),
      })
      .nullable()
      .describe('Owner ids of the collections the run is bound to, by scope, and the repositories it checks out'),
    createdAt: EpochMs,
    updatedAt: EpochMs,
    /** When the run ended; `null` while it is active. */
    endedAt: EpochMs.nullable().describe('When the run ended; `null` while it is active'),
  })
  .meta({ id: 'Run' });

/** A run with the state of each bound repository's checkout (`GET /v1/runs/:id`). */
export const RunWithRepositories = Run.extend({
  repositories: z.array(
    z.object({
      name: z.string(),
      url: z.string(),
      branch: z.string().nullable(),
      state: z.enum(['none', 'saving', 'saved', 'failed']).describe('`none` until the first repository checkpoint'),
      lastCheckpointAt: EpochMs.nullable(),
      checkpointId: z.string().nullable(),
      error: z.object({ code: z.string(), message: z.string() }).nullable(),
    }),
  ),
}).meta({ id: 'RunWithRepositories' });

/** A run just created: `runToken` is its run token's secret (shown once; `null` for an unbound run or in a replay). */
export const CreatedRun = Run.extend({
  runToken: z.string().nullable().describe("The run token's secret, shown once; `null` for an unbound run and in a replay"),
  checkpoint: z
    .lazy(() => Checkpoint)
    .optional()
    .describe("A fork (fromCheckpoint): the run's first checkpoint, sharing the source's tree"),
});

export const TurnBody = z.strictObject({
  argv: Argv,
  stdin: z
    .string()
    .max(1024 * 512)
    .optional(),
  env: Env.optional(),
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
  waitMs: z.number().int().min(0).max(30_000).optional(),
  checkpoint: CheckpointNoteBody.optional().describe("The label and metadata of the turn's checkpoint"),
});

/** One entry a checkpoint left out (`rules/exclusion.ts` `Exclusion`); the reason is a string, as stored. */
const ExclusionSchema = z.object({ path: z.string(), reason: z.string(), rule: z.string() });

/**
 * What a ready checkpoint recorded (`snapshot/checkpoint/checkpoint.ts` `CheckpointStats` with the first
 * exclusions and every allowance). Every field is optional and others may follow: a stored row
 * keeps the figures of the version that wrote it.
 */
export const CheckpointStatsSchema = z
  .looseObject({
    files: Count.optional(),
    dirs: Count.optional(),
    symlinks: Count.optional(),
    bytes: Count.optional(),
    hardlinks: Count.optional(),
    filesHashed: Count.optional(),
    bytesHashed: Count.optional(),
    attempts: Count.optional(),
    durationMs: Count.optional(),
    objectsWritten: Count.optional(),
    rawBytesWritten: Count.optional(),
    storedBytesWritten: Count.optional(),
    packsWritten: Count.optional(),
    blobWrites: Count.optional(),
    excludedCount: Count.optional(),
    excludedByReason: z.record(z.string(), Count).optional(),
    excluded: z.array(ExclusionSchema).optional().describe('The first exclusions (all are counted in excludedCount)'),
    allowed: z.array(ExclusionSchema).optional().describe('Paths a secret rule matched that allowSecretPaths let through'),
    root: z.object({ mode: Count, mtimeMs: z.number() }).optional().describe("The root directory's permission bits and mtime"),
  })
  .meta({ id: 'CheckpointStats' });

export const Checkpoint = z
  .object({
    id: z.string(),
    workspaceId: z.string(),
    parentId: z.string().nullable(),
    rootTree: Sha256.nullable().describe('Set exactly when the checkpoint is ready'),
    status: z.enum(['pending', 'ready', 'failed']),
    reason: z.enum(CHECKPOINT_REASONS),
    stats: CheckpointStatsSchema.nullable(),
    error: StoredError.nullable().describe('Why it failed; set exactly when failed'),
    createdAt: EpochMs,
    finishedAt: EpochMs.nullable(),
    label: z.string().nullable().describe("The caller's label; `null` when none was given"),
    meta: z.record(z.string(), CheckpointMetaValue).nullable().describe("The caller's flat metadata; `null` when none was given"),
    forkedFrom: z.string().nullable().describe("A fork's first checkpoint: the checkpoint whose tree it shares; else `null`"),
  })
  .meta({ id: 'Checkpoint' });

/** What a command turn records of its outcome (`Runs.command`); other turns may record other fields. */
const TurnSummary = z.looseObject({
  exitCode: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
  timedOut: z.boolean().optional(),
  stdoutBytes: Count.optional(),
  stderrBytes: Count.optional(),
});

export const Turn = z
  .object({
    id: z.string(),
    runId: z.string(),
    seq: z.number().int().positive(),
    epoch: Count.describe('The lease epoch the turn ran under'),
    owner: z.string(),
    status: z.enum(['running', 'completed', 'failed']),
    checkpointId: z.string().nullable().describe('The ready checkpoint that completed the turn'),
    error: StoredError.nullable(),
    result: TurnSummary.nullable(),
    startedAt: EpochMs,
    finishedAt: EpochMs.nullable(),
  })
  .meta({ id: 'Turn' });

export const TurnResult = z.object({
  turn: Turn,
  checkpoint: Checkpoint,
  exit: z.object({ code: z.number().int().nullable(), signal: z.string().nullable(), timedOut: z.boolean() }),
  stdout: z.string(),
  stderr: z.string(),
});

/** One recorded step of a run (`metadata/repos/turns-repo.ts` `RunEvent`). */
export const RunEventSchema = z
  .object({
    id: z.number().int(),
    runId: z.string(),
    at: EpochMs,
    kind: z.string().describe('recovery, upgrade, lease, checkpoint, sandbox, restore, …'),
    step: z.string().describe('create_sandbox, restore, setup, validate, commit, …'),
    status: z.enum(['ok', 'failed']),
    durationMs: z.number().nonnegative().nullable(),
    data: JsonRecord.nullable(),
  })
  .meta({ id: 'RunEvent' });
export const RunEventList = z.object({ events: z.array(RunEventSchema) });

/** What `POST /v1/runs/:id/restore` answers: the new sandbox (the caller's to destroy) and what it holds. */
export const RestoredSandbox = z.object({
  sandbox: z.object({ provider: z.string(), id: z.string(), workspaceRoot: z.string() }),
  deploymentId: Sha256,
  checkpointId: z.string(),
});

/** One entry of a checkpoint's directory tree (`core/tree.ts` `TreeEntry`). */
export const TreeEntrySchema = z
  .discriminatedUnion('type', [
    z.object({
      name: z.string(),
      type: z.literal('file'),
      mode: Count,
      size: Count,
      mtimeMs: z.number(),
      sha256: Sha256,
      chunks: z.array(Sha256),
      hardlink: z.string().optional().describe('The path of the hard-link group member this file is a link to'),
    }),
    z.object({ name: z.string(), type: z.literal('dir'), mode: Count, mtimeMs: z.number(), tree: Sha256 }),
    z.object({ name: z.string(), type: z.literal('symlink'), target: z.string(), mtimeMs: z.number() }),
  ])
  .meta({ id: 'TreeEntry' });

/** A directory listing (`kind: dir`) or one entry (`kind: entry`) inside a checkpoint (`snapshot/inspect/browse.ts` `Lookup`). */
export const TreeLookup = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('dir'), tree: Sha256, entries: z.array(TreeEntrySchema) }),
  z.object({ kind: z.literal('entry'), entry: TreeEntrySchema }),
]);

/** `POST /v1/runs/:id/end`: by default the sandbox is saved and destroyed; `keepSandbox` leaves it running. */
export const EndRunBody = z.strictObject({
  keepSandbox: z.boolean().optional().describe('Leave the sandbox running and save nothing (default false: save it, then destroy it)'),
});
export const UpgradeBody = z.strictObject({ deploymentId: z.string().length(64).optional() });
export const RestoreBody = z.strictObject({ checkpointId: z.string().min(1).max(128).optional() });

export const PathQuery = z.object({ path: z.string().max(4096).optional() });
/** A file's path inside a checkpoint: required (a directory listing takes {@link PathQuery}). */
export const FilePathQuery = z.object({ path: z.string().min(1).max(4096) });
export const LimitQuery = z.object({ limit: z.coerce.number().int().min(1).max(1000).optional() });
/** A page of a keyset-paginated listing: its size and where it starts (`core/page-cursor.ts`). */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(MAX_PAGE_SIZE).optional().describe(`Rows per page (default ${DEFAULT_PAGE_SIZE})`),
  cursor: z.string().min(1).max(MAX_CURSOR_CHARS).optional().describe('`nextCursor` of the previous page; opaque'),
});

/** `nextCursor` beside a listing's array: pass it as `cursor` for the next page; `null` on the last page. */
const NextCursor = z.string().nullable().describe('`cursor` of the next page; `null` on the last page');
export const RunPage = z.object({ runs: z.array(Run), nextCursor: NextCursor });
export const TurnPage = z.object({ turns: z.array(Turn), nextCursor: NextCursor });
export const CheckpointPage = z.object({ checkpoints: z.array(Checkpoint), nextCursor: NextCursor });
export const DeploymentPage = z.object({ deployments: z.array(Deployment), nextCursor: NextCursor });
export const ChannelPage = z.object({ channels: z.array(Channel), nextCursor: NextCursor });
/** An API token as listed: never its secret. */
export const TokenRecordSchema = z.object({
  id: z.string(),
  tenantId: z.string(),
  name: z.string(),
  admin: z.boolean(),
  userId: z.string().nullable(),
  runId: z.string().nullable(),
  createdAt: z.number(),
  revokedAt: z.number().nullable(),
});
export const TokenPage = z.object({ tokens: z.array(TokenRecordSchema), nextCursor: NextCursor });
export const TokenBody = z.strictObject({
  tenant: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/),
  name: z.string().min(1).max(128),
  admin: z.boolean().optional(),
});

/** A token just created: its secret is shown once (`null` in a replay of the request). */
export const CreatedTokenSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  name: z.string(),
  admin: z.boolean(),
  user: z.string().nullable().describe('user tokens: the user name'),
  runId: z.string().nullable().describe('run tokens: the run'),
  token: z.string().nullable().describe('The bearer token; only its hash is stored. `null` in a replay'),
});

/** `GET /healthz`. */
export const Health = z.object({ status: z.literal('ok') });
/** `GET /readyz`: both stores answered. */
export const Readiness = z.object({
  status: z.literal('ready'),
  schemaVersion: z.number().int().describe('The metadata schema version'),
  durationMs: Count.describe('How long the two probes took'),
});
