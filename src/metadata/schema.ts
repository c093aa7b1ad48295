import type { ColumnType, Generated } from 'kysely';

/**
 * The Kysely view of Holdfast's metadata tables. Column names are the SQL names
 * (snake_case); repositories map rows to camelCase values. Every timestamp is an integer
 * count of milliseconds since the Unix epoch on both dialects, and every integer column
 * reads back as a JS `number` (the PostgreSQL dialect parses int8 itself).
 */

/** What a pack or object holds: file chunks or directory trees (kept in separate packs). */
export type ObjectKind = 'data' | 'tree';
/** How an object's bytes are stored inside its pack. */
export type ObjectCodec = 'none' | 'zstd';
/** Lifecycle of a checkpoint: it starts pending and ends ready or failed, exactly once. */
export type CheckpointStatus = 'pending' | 'ready' | 'failed';
/** Why a checkpoint was taken. */
export type CheckpointReason = 'turn' | 'periodic' | 'final' | 'manual' | 'upgrade' | 'shutdown';

/** Allowed values of {@link ObjectKind}, mirrored by a CHECK constraint. */
export const OBJECT_KINDS: readonly ObjectKind[] = Object.freeze(['data', 'tree']);
/** Allowed values of {@link ObjectCodec}, mirrored by a CHECK constraint. */
export const OBJECT_CODECS: readonly ObjectCodec[] = Object.freeze(['none', 'zstd']);
/** Allowed values of {@link CheckpointStatus}, mirrored by a CHECK constraint. */
export const CHECKPOINT_STATUSES: readonly CheckpointStatus[] = Object.freeze(['pending', 'ready', 'failed']);
/** Allowed values of {@link CheckpointReason}, mirrored by a CHECK constraint. */
export const CHECKPOINT_REASONS: readonly CheckpointReason[] = Object.freeze([
  'turn',
  'periodic',
  'final',
  'manual',
  'upgrade',
  'shutdown',
]);

/** `tenants`: the owner of workspaces; `name` is globally unique. */
export interface TenantsTable {
  id: string;
  name: string;
  created_at: number;
}

/** `packs`: one row per pack blob; `id` is the pack's SHA-256 (lowercase hex). */
export interface PacksTable {
  /** Small integer the object rows name the pack by; assigned by the database on insert. */
  seq: Generated<number>;
  id: string;
  kind: ObjectKind;
  /** Bytes of the whole pack blob, trailer included. */
  size: number;
  object_count: number;
  created_at: number;
  /** Set when GC condemns the pack; its objects then count as missing. */
  condemned_at: number | null;
  /** When the pack was found missing from the blob store (migration 12); its objects then count as missing. */
  missing_at: Generated<number | null>;
  /** When the checkpoints referencing this missing pack were last assessed (migration 12). */
  damage_checked_at: Generated<number | null>;
}

/** `objects`: the object index, object id (SHA-256 of the raw bytes) -> place in a pack. */
export interface ObjectsTable {
  id: string;
  /** `packs.seq` of the pack holding the stored bytes. */
  pack_seq: number;
  kind: ObjectKind;
  /** Byte offset of the stored bytes inside the pack. */
  offset: number;
  /** Stored (possibly compressed) length in bytes. */
  length: number;
  /** Length of the raw bytes the id hashes. */
  raw_length: number;
  codec: ObjectCodec;
  /** Offset inside the decompressed solid block (`offset`/`length` are the block's); `NULL` outside blocks. */
  block_offset: number | null;
}

/** `workspaces`: a durable workspace; `head_version` is the compare-and-swap counter of its head. */
export interface WorkspacesTable {
  id: string;
  tenant_id: string;
  name: string;
  head_checkpoint_id: string | null;
  head_version: ColumnType<number, number | undefined, number>;
  created_at: number;
  updated_at: number;
}

/** `checkpoints`: one capture of a workspace; `stats` and `error` hold JSON text. */
export interface CheckpointsTable {
  id: string;
  workspace_id: string;
  parent_id: string | null;
  root_tree: string | null;
  status: CheckpointStatus;
  reason: CheckpointReason;
  stats: string | null;
  error: string | null;
  created_at: number;
  finished_at: number | null;
  /** JSON of what a ready checkpoint lost to missing packs (migration 12); `NULL` while whole. */
  damage: Generated<string | null>;
  /** A caller's label (migration 14). */
  label: string | null;
  /** A caller's flat JSON object, as text (migration 14). */
  meta: string | null;
  /** The checkpoint a fork's first checkpoint shares its tree with (migration 14). */
  forked_from: string | null;
  /** While pending: when its writer last said it is alive, epoch ms (migration 15); null before that version. */
  writer_heartbeat_at: number | null;
}

/** `gc_queue`: a pack blob no index row names, and when GC first saw it so (migration 2). */
export interface GcQueueTable {
  pack_id: string;
  first_seen_at: number;
}

/** `deletion_journal`: one row per pack deletion, written before the blob is removed (migration 2). */
export interface DeletionJournalTable {
  pack_id: string;
  /** Blob-store key being deleted. */
  key: string;
  started_at: number;
  /** Set once the blob and its index rows are gone; `null` while the deletion is unfinished. */
  finished_at: number | null;
}

/** `deployments` (migration 3): an immutable deployment; `id` is the SHA-256 of its canonical `spec` JSON. */
export interface DeploymentsTable {
  tenant_id: string;
  id: string;
  spec: string;
  created_at: number;
}

/** `channels` (migration 3): a name pointing at the active deployment; `version` counts publishes. */
export interface ChannelsTable {
  tenant_id: string;
  name: string;
  deployment_id: string;
  version: number;
  updated_at: number;
}

/** Who may act for a run: nobody, one owner until `lease_expires_at`, or nobody until a person resolves an uncertain stop. */
export type LeaseState = 'free' | 'held' | 'release_recovery_required';

/** `runs` (migration 3): one durable run, its workspace, its current sandbox and its lease. */
export interface RunsTable {
  id: string;
  tenant_id: string;
  workspace_id: string;
  channel: string | null;
  deployment_id: string;
  sandbox_provider: string | null;
  sandbox_id: string | null;
  lease_state: ColumnType<LeaseState, LeaseState | undefined, LeaseState>;
  lease_epoch: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  /** Set by a claim that took over an expired lease: the owner it was taken from. */
  lease_taken_from: string | null;
  /** JSON: why the lease needs recovery. */
  lease_error: string | null;
  turn_count: ColumnType<number, number | undefined, number>;
  created_at: number;
  updated_at: number;
  /** JSON object of owner ids by scope (migration 8); `null` for a run bound to no collection. */
  bindings: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the run ended (migration 8); `null` while it is active. */
  ended_at: ColumnType<number | null, number | null | undefined, number | null>;
}

/** Lifecycle of a turn. */
export type TurnStatus = 'running' | 'completed' | 'failed';

/** `turns` (migration 3): one turn of a run; completed exactly when its checkpoint is the head. */
export interface TurnsTable {
  id: string;
  run_id: string;
  seq: number;
  epoch: number;
  owner: string;
  status: TurnStatus;
  checkpoint_id: string | null;
  /** JSON. */
  error: string | null;
  /** JSON: what the turn's body returned (exit code, output sizes). */
  result: string | null;
  started_at: number;
  finished_at: number | null;
}

/** `run_events` (migration 3): the recorded steps of recoveries, upgrades and lease changes, with timings. */
export interface RunEventsTable {
  id: Generated<number>;
  run_id: string;
  at: number;
  kind: string;
  step: string;
  status: 'ok' | 'failed';
  duration_ms: number | null;
  /** JSON. */
  data: string | null;
}

/** `tokens` (migration 3): API bearer tokens, by SHA-256 hash only. */
export interface TokensTable {
  id: string;
  tenant_id: string;
  hash: string;
  name: string;
  /** 1 for admin tokens (may create tenants and tokens), else 0. */
  admin: number;
  created_at: number;
  revoked_at: number | null;
  /** The user a user token acts for (migration 8); `null` for service and run tokens. */
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The run a run token acts for (migration 8); `null` for service and user tokens. */
  run_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A user's role: members read and write shared collections, viewers only read them. */
export type UserRoleColumn = 'member' | 'viewer';

/** `users` (migration 8): the people of a tenant; a revoked row stays, and its tokens stop. */
export interface UsersTable {
  id: string;
  tenant_id: string;
  /** Unique among the tenant's live users; the owner id of the user's collection. */
  name: string;
  role: UserRoleColumn;
  created_at: number;
  revoked_at: number | null;
}

/**
 * `idempotency_receipts` (migration 5): one receipt per calling principal (its token id) and
 * `Idempotency-Key`. Never holds a credential: answers that carry one are stored redacted.
 */
export interface IdempotencyReceiptsTable {
  principal_id: string;
  key: string;
  /** SHA-256 of method, path and body: a key reused for another request is refused. */
  request_hash: string;
  /** Set with `response` once the first request finished; `null` while it runs. */
  status_code: number | null;
  response: string | null;
  created_at: number;
  finished_at: number | null;
}

/** `upload_intents` (migration 5): a pack about to be uploaded by a writer that has not committed yet. */
export interface UploadIntentsTable {
  pack_id: string;
  /** One id per ObjectWriter user: the checkpoint id, or a repack's own id. */
  writer_id: string;
  /** The pending checkpoint the pack is written for; `null` for a repack. */
  checkpoint_id: string | null;
  created_at: number;
}

/** `folder_collections` (migration 8): one per `(tenant, scope, owner)`, created on first use. */
export interface FolderCollectionsTable {
  id: string;
  tenant_id: string;
  scope: 'task' | 'agent' | 'user' | 'project';
  owner_id: string;
  created_at: number;
  /** Epoch ms of the latest applied mutation; `null` before the first. */
  last_operation_at: number | null;
}

/** `folder_files` (migration 8): one file or directory of a collection, live or trashed. */
export interface FolderFilesTable {
  id: string;
  collection_id: string;
  path: string;
  kind: 'file' | 'directory';
  size: number;
  sha256: string | null;
  /** JSON `[[objectId, rawLength], …]`; `null` for a directory. */
  chunks: string | null;
  /** 0/1 on SQLite, boolean on PostgreSQL. */
  executable: ColumnType<boolean | number, boolean | number, boolean | number>;
  content_type: string | null;
  updated_at: number;
  deleted_at: number | null;
  /** The id shared by the rows one delete trashed together; set exactly when `deleted_at` is. */
  trash_unit: string | null;
}

/** `folder_operations` (migration 8): content-free receipts of applied folder operations. */
export interface FolderOperationsTable {
  collection_id: string;
  operation_id: string;
  fingerprint: string;
  /** The row the operation produced (write, mkdir), when there is one. */
  result_id: string | null;
  created_at: number;
}

/** `service_claims` (migration 8): named, expiring claims, e.g. the periodic GC sweep's. */
export interface ServiceClaimsTable {
  name: string;
  holder: string;
  expires_at: number;
}

/** `folder_sync_states` (migration 10): what one sandbox's sync of one collection last agreed with the store. */
export interface FolderSyncStatesTable {
  provider: string;
  sandbox_id: string;
  scope: 'task' | 'agent' | 'user' | 'project';
  run_id: string;
  tenant_id: string;
  collection_id: string;
  /** JSON of the run's owners by scope the row was made for. */
  bindings: string;
  /** JSON map path -> signature. */
  baseline: string;
  /** JSON map path -> `{operationId, signature}`. */
  pending: string;
  /** JSON `{imports, removals}` of an incoming sync not yet reconciled, or `null`. */
  intents: string | null;
  last_root_tree: string | null;
  state: 'never_saved' | 'saving' | 'saved' | 'failed';
  last_saved_at: number | null;
  final_checkpoint_at: number | null;
  /** JSON `{code, message}` of the last failed save. */
  error: string | null;
  refresh_state: 'none' | 'queued' | 'running' | 'failed';
  refresh_at: number | null;
  /** JSON `{code, message}` of the last failed refresh. */
  refresh_error: string | null;
  created_at: number;
  updated_at: number;
}

/** `sandbox_instances` (migration 13): the provider sandbox an agent framework resumes for a key of a tenant. */
export interface SandboxInstancesTable {
  tenant_id: string;
  key: string;
  provider: string;
  provider_sandbox_id: string;
  latest_snapshot_id: string | null;
  thread_id: string;
  latest_run_id: string | null;
  /** The caller's own timestamp of the record (epoch ms), kept as given. */
  updated_at: number;
  /** 1 on insert, +1 on every write: what compare-and-set compares. */
  version: number;
  /** The store's clock at the last write. */
  written_at: number;
}

/** `sandbox_snapshot_labels` (migration 13): what a framework said about a checkpoint it asked for. */
export interface SandboxSnapshotLabelsTable {
  tenant_id: string;
  checkpoint_id: string;
  workspace_id: string;
  label: string | null;
  thread_id: string | null;
  run_id: string | null;
  sandbox_key: string | null;
  created_at: number;
}

/** `fenced_locks` (migration 13): named locks of a tenant with a fencing token that only grows. */
export interface FencedLocksTable {
  tenant_id: string;
  name: string;
  /** `null` once released. */
  holder: string | null;
  token: number;
  expires_at: number;
}

/** `holdfast_schema_migrations`: one row per applied migration, written by the migrator only. */
export interface SchemaMigrationsTable {
  version: number;
  name: string;
  applied_at: number;
}

/** Every table the metadata store owns, keyed by SQL table name. */
export interface Database {
  tenants: TenantsTable;
  packs: PacksTable;
  objects: ObjectsTable;
  workspaces: WorkspacesTable;
  checkpoints: CheckpointsTable;
  gc_queue: GcQueueTable;
  deletion_journal: DeletionJournalTable;
  deployments: DeploymentsTable;
  channels: ChannelsTable;
  runs: RunsTable;
  turns: TurnsTable;
  run_events: RunEventsTable;
  tokens: TokensTable;
  users: UsersTable;
  idempotency_receipts: IdempotencyReceiptsTable;
  upload_intents: UploadIntentsTable;
  folder_collections: FolderCollectionsTable;
  folder_files: FolderFilesTable;
  folder_operations: FolderOperationsTable;
  service_claims: ServiceClaimsTable;
  folder_sync_states: FolderSyncStatesTable;
  sandbox_instances: SandboxInstancesTable;
  sandbox_snapshot_labels: SandboxSnapshotLabelsTable;
  fenced_locks: FencedLocksTable;
  holdfast_schema_migrations: SchemaMigrationsTable;
}
