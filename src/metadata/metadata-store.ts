/**
 * `metadata/`: the `MetadataStore` port (everything but file bytes): the schema, one migration
 * file per version (`migrations/`), the SQLite and PostgreSQL dialects, one module per table
 * group (`tables/`) and the contract suites.
 */
import path from 'node:path';
import type { Kysely, Transaction } from 'kysely';
import type { MetaConfig } from '../config.js';
import type { MigratedDatabase } from './migrator.js';
import type { Database } from './schema.js';
import { type CheckpointsRepo, createCheckpointsRepo } from './tables/checkpoints-repo.js';
import { type ClaimsRepo, createClaimsRepo } from './tables/claims-repo.js';
import { createDeploymentsRepo, type DeploymentsRepo } from './tables/deployments-repo.js';
import { createFencedLocksRepo, type FencedLocksRepo } from './tables/fenced-locks-repo.js';
import { createFolderSyncRepo, type FolderSyncRepo } from './tables/folder-sync-repo.js';
import { createFoldersRepo, type FoldersRepo } from './tables/folders-repo.js';
import { createGcRepo, type GcRepo } from './tables/gc-repo.js';
import { createIdempotencyRepo, type IdempotencyRepo } from './tables/idempotency-repo.js';
import { createObjectIndexRepo, type ObjectIndexRepo } from './tables/objects-repo.js';
import type { RepoContext } from './tables/repo-context.js';
import { createRunsRepo, type RunsRepo } from './tables/runs-repo.js';
import { createSandboxInstancesRepo, type SandboxInstancesRepo } from './tables/sandbox-instances-repo.js';
import { createTenantsRepo, type TenantsRepo } from './tables/tenants-repo.js';
import { createTokensRepo, type TokensRepo } from './tables/tokens-repo.js';
import { createTurnsRepo, type TurnsRepo } from './tables/turns-repo.js';
import { createUsersRepo, type UsersRepo } from './tables/users-repo.js';
import { createWorkspacesRepo, type WorkspacesRepo } from './tables/workspaces-repo.js';

export type {
  CheckpointReason,
  CheckpointStatus,
  Database,
  LeaseState,
  ObjectCodec,
  ObjectKind,
  TurnStatus,
  UserRoleColumn,
} from './schema.js';
export type {
  Checkpoint,
  CheckpointDamage,
  CreateCheckpointInput,
  JsonObject,
  ListCheckpointsOptions,
  ReadyCheckpointInput,
} from './tables/checkpoints-repo.js';
export type { Channel, DeploymentRecord } from './tables/deployments-repo.js';
export type { LockFence, LockGrant, LockState } from './tables/fenced-locks-repo.js';
export { MAX_LOCK_NAME_LENGTH, MAX_LOCK_TTL_MS } from './tables/fenced-locks-repo.js';
export type {
  FolderSyncKey,
  FolderSyncPatch,
  FolderSyncState,
  NewFolderSyncState,
  PendingSyncOperation,
  SyncErrorRecord,
  SyncIntents,
} from './tables/folder-sync-repo.js';
export type {
  FolderChunk,
  FolderCollection,
  FolderFileContent,
  FolderFileRecord,
  FolderReceipt,
  NewFolderFile,
} from './tables/folders-repo.js';
export type { DeletionRecord, QueuedOrphan, UploadIntent } from './tables/gc-repo.js';
export type { IdempotencyBegin } from './tables/idempotency-repo.js';
export type { ObjectLocation, ObjectRecord, PackInfo, PackRecord } from './tables/objects-repo.js';
export type { CreateRunInput, Lease, Run, StoredRunBindings } from './tables/runs-repo.js';
export type {
  SandboxInstance,
  SandboxInstanceInput,
  SandboxInstanceWriteOptions,
  SnapshotLabel,
} from './tables/sandbox-instances-repo.js';
export { MAX_SANDBOX_FIELD_LENGTH, MAX_SANDBOX_KEY_LENGTH, MAX_SNAPSHOT_LABEL_LENGTH } from './tables/sandbox-instances-repo.js';
export type { CreateTenantInput, Tenant } from './tables/tenants-repo.js';
export type { CreateTokenInput, TokenGrant, TokenRecord } from './tables/tokens-repo.js';
export type { RunEvent, RunEventInput, Turn } from './tables/turns-repo.js';
export type { UserRecord } from './tables/users-repo.js';
export type { CreateWorkspaceInput, Workspace } from './tables/workspaces-repo.js';
export type {
  CheckpointsRepo,
  ClaimsRepo,
  DeploymentsRepo,
  FencedLocksRepo,
  FolderSyncRepo,
  FoldersRepo,
  GcRepo,
  IdempotencyRepo,
  ObjectIndexRepo,
  RunsRepo,
  SandboxInstancesRepo,
  TenantsRepo,
  TokensRepo,
  TurnsRepo,
  UsersRepo,
  WorkspacesRepo,
};

/** Which SQL engine a store runs on. */
export type MetadataDialect = 'sqlite' | 'postgres';

/**
 * The repositories, one per table group. Every method is a single statement or its own
 * transaction unless the repositories come from {@link MetadataStore.transaction}. All errors
 * are HoldfastErrors with stable codes (see `db-errors.ts`); all numbers are JS numbers.
 */
export interface MetadataRepositories {
  readonly tenants: TenantsRepo;
  /** The object index: packs and objects. */
  readonly objects: ObjectIndexRepo;
  readonly workspaces: WorkspacesRepo;
  readonly checkpoints: CheckpointsRepo;
  /** GC bookkeeping: the orphan-pack queue, the deletion journal and upload intents. */
  readonly gc: GcRepo;
  /** Deployments and channels. */
  readonly deployments: DeploymentsRepo;
  /** Runs and their leases. */
  readonly runs: RunsRepo;
  /** Turns and run events. */
  readonly turns: TurnsRepo;
  /** API tokens (hashed). */
  readonly tokens: TokensRepo;
  /** Users of tenants (member or viewer, revocable). */
  readonly users: UsersRepo;
  /** HTTP idempotency receipts. */
  readonly idempotency: IdempotencyRepo;
  /** Work folders: collections, their files and operation receipts. */
  readonly folders: FoldersRepo;
  /** Named, expiring claims of service jobs (one replica at a time). */
  readonly claims: ClaimsRepo;
  /** Work-folder sync state per sandbox and scope. */
  readonly folderSync: FolderSyncRepo;
  /**
   * Agent frameworks' sandbox records per tenant and key (versioned, compare-and-set, fenced
   * writes) and the labels of the checkpoints they took, keyed by checkpoint id.
   */
  readonly sandboxInstances: SandboxInstancesRepo;
  /** Named, expiring locks per tenant with a fencing token that only grows. */
  readonly locks: FencedLocksRepo;
}

/** The repositories bound to one open transaction, plus its raw Kysely handle. */
export interface MetadataTransaction extends MetadataRepositories {
  readonly db: Transaction<Database>;
}

/**
 * The metadata port: everything Holdfast knows about tenants, workspaces, checkpoints and
 * where each object lives, on SQLite or PostgreSQL behind the same API. It never holds file
 * bytes. Opened, migrated and ready to use when {@link openMetadataStore} resolves.
 */
export interface MetadataStore extends MetadataRepositories {
  readonly dialect: MetadataDialect;
  /**
   * The database file on this machine, absolute, when there is one (SQLite on disk);
   * undefined for PostgreSQL and in-memory SQLite. Restore refuses a target overlapping
   * its directory, where the WAL and journal files live too.
   */
  readonly localPath?: string;
  /** The query layer, for queries no repository offers yet. Errors are translated the same way. */
  readonly db: Kysely<Database>;
  /**
   * The schema version the database is at, read from the database on every call, so it also
   * serves as a liveness probe (rejects with `STORE_UNAVAILABLE` when the store is down).
   */
  schemaVersion(): Promise<number>;
  /**
   * Runs `fn` with repositories bound to one transaction: it commits when `fn` resolves and
   * rolls back (nothing persisted) when it rejects, rethrowing the rejection. Inside `fn`
   * use only `tx`; calling the store itself from there waits for the transaction on SQLite
   * (one connection) and runs outside it on PostgreSQL.
   */
  transaction<T>(fn: (tx: MetadataTransaction) => Promise<T>): Promise<T>;
  /** Closes the connection or pool. Idempotent; the store must not be used afterwards. */
  close(): Promise<void>;
}

/** Options of {@link openMetadataStore}. */
export interface MetadataStoreOptions {
  /** Clock for every stored timestamp, epoch ms. Defaults to `Date.now`. */
  readonly now?: () => number;
}

/**
 * Opens the store `config` names, creating the SQLite file or the PostgreSQL tables as
 * needed, and applies any missing migrations (safe when several processes start at once).
 * Rejects with `STORE_UNAVAILABLE` when the database cannot be reached or opened, or when
 * its schema is newer than this build.
 */
export async function openMetadataStore(config: MetaConfig, options: MetadataStoreOptions = {}): Promise<MetadataStore> {
  const now = options.now ?? Date.now;
  // Each dialect (and its driver package) loads only when used: pg alone costs ~40 ms of start-up.
  const opened: MigratedDatabase =
    config.kind === 'sqlite'
      ? await (await import('./dialects/sqlite.js')).openSqlite(config.path, now)
      : await (await import('./dialects/postgres.js')).openPostgres(config.url, now);
  const localPath = config.kind === 'sqlite' && config.path !== ':memory:' ? path.resolve(config.path) : undefined;
  return createMetadataStore(config.kind, opened, now, localPath);
}

function repositories(context: RepoContext): MetadataRepositories {
  return {
    tenants: createTenantsRepo(context),
    objects: createObjectIndexRepo(context),
    workspaces: createWorkspacesRepo(context),
    checkpoints: createCheckpointsRepo(context),
    gc: createGcRepo(context),
    deployments: createDeploymentsRepo(context),
    runs: createRunsRepo(context),
    turns: createTurnsRepo(context),
    tokens: createTokensRepo(context),
    users: createUsersRepo(context),
    idempotency: createIdempotencyRepo(context),
    folders: createFoldersRepo(context),
    claims: createClaimsRepo(context),
    folderSync: createFolderSyncRepo(context),
    sandboxInstances: createSandboxInstancesRepo(context),
    locks: createFencedLocksRepo(context),
  };
}

function createMetadataStore(
  dialect: MetadataDialect,
  { db }: MigratedDatabase,
  now: () => number,
  localPath: string | undefined,
): MetadataStore {
  let closing: Promise<void> | undefined;
  return {
    dialect,
    ...(localPath === undefined ? {} : { localPath }),
    db,
    async schemaVersion() {
      const row = await db
        .selectFrom('holdfast_schema_migrations')
        .select((eb) => eb.fn.max('version').as('version'))
        .executeTakeFirst();
      return row?.version ?? 0;
    },
    ...repositories({ db, dialect, now }),
    transaction(fn) {
      return db.transaction().execute((trx) => fn({ db: trx, ...repositories({ db: trx, dialect, now }) }));
    },
    close() {
      closing ??= db.destroy();
      return closing;
    },
  };
}
