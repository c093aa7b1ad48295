import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../../core/page-cursor.js';
import { MAX_CURSOR_CHARS } from './work-folders-schemas.js';

/** Shared request and response schemas of API v1 (they also document it). */

export const Argv = z.array(z.string().max(8192)).min(1).max(256);
export const Env = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(131072));

/** A captured deployment bundle (what `POST /v1/bundles` answers). */
export const BundleRecordSchema = z.object({
  rootTree: z.string().regex(/^[0-9a-f]{64}$/),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
});

export const DeploymentBody = z.strictObject({
  provider: z.string().regex(/^[a-z][a-z0-9-]{0,63}$/),
  image: z.string().min(1).max(512).nullish(),
  setup: z.array(Argv).max(32).optional(),
  env: Env.optional(),
  workspaceRoot: z.string().max(1024).nullish(),
  workspaceUpgradePolicy: z.enum(['automatic', 'manual']).optional(),
  validate: Argv.nullish(),
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
});

export const Deployment = z.object({
  id: z.string(),
  spec: z.object({}).passthrough(),
  createdAt: z.number(),
});

export const ChannelBody = z.strictObject({ deploymentId: z.string().length(64) });
export const Channel = z.object({ name: z.string(), deploymentId: z.string(), version: z.number(), updatedAt: z.number() });

/** An owner id of a binding; `parseRunBindings` (auth/folder-access.ts) holds the same rule. */
const OwnerId = z
  .string()
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:@-]*$/);

/** The owners of the collections a run is bound to, by scope. */
export const RunBindings = z.strictObject({
  task: OwnerId.optional(),
  agent: OwnerId.optional(),
  user: OwnerId.optional(),
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

export const RunBody = z.union([
  z.strictObject({ channel: z.string().min(1).max(64), bindings: RunBindings.optional() }),
  z.strictObject({ deploymentId: z.string().length(64), bindings: RunBindings.optional() }),
]);

export const Run = z.object({
  id: z.string(),
  workspaceId: z.string(),
  channel: z.string().nullable(),
  deploymentId: z.string(),
  sandbox: z.object({ provider: z.string(), id: z.string() }).nullable(),
  lease: z
    .object({ state: z.enum(['free', 'held', 'release_recovery_required']), epoch: z.number(), owner: z.string().nullable() })
    .passthrough(),
  turnCount: z.number(),
  bindings: RunBindings.nullable(),
  createdAt: z.number(),
  updatedAt: z.number(),
  /** When the run ended; `null` while it is active. */
  endedAt: z.number().nullable(),
});

/** A run with the state of each bound repository's checkout (`GET /v1/runs/:id`). */
export const RunWithRepositories = Run.extend({
  repositories: z.array(
    z.object({
      name: z.string(),
      url: z.string(),
      branch: z.string().nullable(),
      state: z.enum(['none', 'saving', 'saved', 'failed']),
      lastCheckpointAt: z.number().nullable(),
      checkpointId: z.string().nullable(),
      error: z.object({ code: z.string(), message: z.string() }).nullable(),
    }),
  ),
});

/** A run just created: `runToken` is its run token's secret (shown once; `null` for an unbound run or in a replay). */
export const CreatedRun = Run.extend({ runToken: z.string().nullable() });

export const TurnBody = z.strictObject({
  argv: Argv,
  stdin: z
    .string()
    .max(1024 * 512)
    .optional(),
  env: Env.optional(),
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
  waitMs: z.number().int().min(0).max(30_000).optional(),
});

export const Checkpoint = z.object({
  id: z.string(),
  workspaceId: z.string(),
  parentId: z.string().nullable(),
  rootTree: z.string().nullable(),
  status: z.enum(['pending', 'ready', 'failed']),
  reason: z.string(),
  createdAt: z.number(),
  finishedAt: z.number().nullable(),
});

export const Turn = z.object({
  id: z.string(),
  seq: z.number(),
  epoch: z.number(),
  owner: z.string(),
  status: z.enum(['running', 'completed', 'failed']),
  checkpointId: z.string().nullable(),
  startedAt: z.number(),
  finishedAt: z.number().nullable(),
});

export const TurnResult = z.object({
  turn: Turn,
  checkpoint: Checkpoint,
  exit: z.object({ code: z.number().nullable(), signal: z.string().nullable(), timedOut: z.boolean() }),
  stdout: z.string(),
  stderr: z.string(),
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
