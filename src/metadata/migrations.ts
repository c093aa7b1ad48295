/**
 * The schema history, one entry per version, each with the raw SQL for both dialects.
 *
 * Rules: versions are consecutive from 1 and never reused; a released migration is never
 * edited (add a new one instead); statements run in order inside one transaction together
 * with the version-table insert, so a migration applies completely or not at all.
 */

/** One schema change, written out for each dialect. */
export interface Migration {
  /** Consecutive from 1; recorded in `holdfast_schema_migrations.version`. */
  readonly version: number;
  /** Short snake_case description, recorded alongside the version. */
  readonly name: string;
  /** Statements for SQLite, run in order. */
  readonly sqlite: readonly string[];
  /** Statements for PostgreSQL, run in order. */
  readonly postgres: readonly string[];
}

/**
 * Content ids are 64 hex characters. Only the length is checked: a per-row regex (or GLOB)
 * made bulk inserts of the object index 2x slower on PostgreSQL, and ids are produced by
 * Holdfast's own hashing, never typed in.
 */
const ID64 = (column: string) => `length(${column}) = 64`;
const KIND = `kind IN ('data', 'tree')`;
const CODEC = `codec IN ('none', 'zstd')`;
const STATUS = `status IN ('pending', 'ready', 'failed')`;
const REASON = `reason IN ('turn', 'periodic', 'final', 'manual', 'upgrade', 'shutdown')`;
/** A checkpoint is finished exactly when it left `pending`; ready has a tree, failed has an error. */
const CHECKPOINT_STATE_CHECKS = [
  `CONSTRAINT checkpoints_finished_check CHECK ((status = 'pending') = (finished_at IS NULL))`,
  `CONSTRAINT checkpoints_ready_tree_check CHECK (status <> 'ready' OR root_tree IS NOT NULL)`,
  `CONSTRAINT checkpoints_failed_error_check CHECK (status <> 'failed' OR error IS NOT NULL)`,
].join(',\n  ');

const initialSqlite: readonly string[] = [
  `CREATE TABLE tenants (
  id TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL CONSTRAINT tenants_name_key UNIQUE,
  created_at INTEGER NOT NULL
) STRICT`,
  `CREATE TABLE packs (
  id TEXT PRIMARY KEY NOT NULL CONSTRAINT packs_id_check CHECK (${ID64('id')}),
  kind TEXT NOT NULL CONSTRAINT packs_kind_check CHECK (${KIND}),
  size INTEGER NOT NULL CONSTRAINT packs_size_check CHECK (size >= 0),
  object_count INTEGER NOT NULL CONSTRAINT packs_object_count_check CHECK (object_count >= 0),
  created_at INTEGER NOT NULL,
  condemned_at INTEGER
) STRICT, WITHOUT ROWID`,
  `CREATE TABLE objects (
  id TEXT PRIMARY KEY NOT NULL CONSTRAINT objects_id_check CHECK (${ID64('id')}),
  pack_id TEXT NOT NULL REFERENCES packs (id),
  kind TEXT NOT NULL CONSTRAINT objects_kind_check CHECK (${KIND}),
  "offset" INTEGER NOT NULL CONSTRAINT objects_offset_check CHECK ("offset" >= 0),
  length INTEGER NOT NULL CONSTRAINT objects_length_check CHECK (length >= 0),
  raw_length INTEGER NOT NULL CONSTRAINT objects_raw_length_check CHECK (raw_length >= 0),
  codec TEXT NOT NULL CONSTRAINT objects_codec_check CHECK (${CODEC})
) STRICT, WITHOUT ROWID`,
  'CREATE INDEX objects_pack_id_idx ON objects (pack_id)',
  `CREATE TABLE workspaces (
  id TEXT PRIMARY KEY NOT NULL,
  tenant_id TEXT NOT NULL REFERENCES tenants (id),
  name TEXT NOT NULL,
  head_checkpoint_id TEXT,
  head_version INTEGER NOT NULL DEFAULT 0 CONSTRAINT workspaces_head_version_check CHECK (head_version >= 0),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  CONSTRAINT workspaces_tenant_name_key UNIQUE (tenant_id, name)
) STRICT`,
  `CREATE TABLE checkpoints (
  id TEXT PRIMARY KEY NOT NULL,
  workspace_id TEXT NOT NULL REFERENCES workspaces (id),
  parent_id TEXT,
  root_tree TEXT,
  status TEXT NOT NULL CONSTRAINT checkpoints_status_check CHECK (${STATUS}),
  reason TEXT NOT NULL CONSTRAINT checkpoints_reason_check CHECK (${REASON}),
  stats TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  finished_at INTEGER,
  ${CHECKPOINT_STATE_CHECKS}
) STRICT`,
  'CREATE INDEX checkpoints_workspace_created_idx ON checkpoints (workspace_id, created_at)',
];

/**
 * Content-addressed ids use `COLLATE "C"`: bytewise comparison is what hex needs, matches
 * SQLite's BINARY ordering, and made 100k-row index inserts about 40% faster than the
 * database's default (ICU/libc) collation.
 */
const initialPostgres: readonly string[] = [
  `CREATE TABLE tenants (
  id text PRIMARY KEY,
  name text NOT NULL CONSTRAINT tenants_name_key UNIQUE,
  created_at bigint NOT NULL
)`,
  `CREATE TABLE packs (
  id text COLLATE "C" PRIMARY KEY CONSTRAINT packs_id_check CHECK (${ID64('id')}),
  kind text NOT NULL CONSTRAINT packs_kind_check CHECK (${KIND}),
  size bigint NOT NULL CONSTRAINT packs_size_check CHECK (size >= 0),
  object_count integer NOT NULL CONSTRAINT packs_object_count_check CHECK (object_count >= 0),
  created_at bigint NOT NULL,
  condemned_at bigint
)`,
  `CREATE TABLE objects (
  id text COLLATE "C" PRIMARY KEY CONSTRAINT objects_id_check CHECK (${ID64('id')}),
  pack_id text COLLATE "C" NOT NULL REFERENCES packs (id),
  kind text NOT NULL CONSTRAINT objects_kind_check CHECK (${KIND}),
  "offset" bigint NOT NULL CONSTRAINT objects_offset_check CHECK ("offset" >= 0),
  length bigint NOT NULL CONSTRAINT objects_length_check CHECK (length >= 0),
  raw_length bigint NOT NULL CONSTRAINT objects_raw_length_check CHECK (raw_length >= 0),
  codec text NOT NULL CONSTRAINT objects_codec_check CHECK (${CODEC})
)`,
  'CREATE INDEX objects_pack_id_idx ON objects (pack_id)',
  `CREATE TABLE workspaces (
  id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants (id),
  name text NOT NULL,
  head_checkpoint_id text,
  head_version bigint NOT NULL DEFAULT 0 CONSTRAINT workspaces_head_version_check CHECK (head_version >= 0),
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  CONSTRAINT workspaces_tenant_name_key UNIQUE (tenant_id, name)
)`,
  `CREATE TABLE checkpoints (
  id text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id),
  parent_id text,
  root_tree text,
  status text NOT NULL CONSTRAINT checkpoints_status_check CHECK (${STATUS}),
  reason text NOT NULL CONSTRAINT checkpoints_reason_check CHECK (${REASON}),
  stats text,
  error text,
  created_at bigint NOT NULL,
  finished_at bigint,
  ${CHECKPOINT_STATE_CHECKS}
)`,
  'CREATE INDEX checkpoints_workspace_created_idx ON checkpoints (workspace_id, created_at)',
];

/**
 * GC bookkeeping (DESIGN section 7). `gc_queue` remembers when GC first saw a pack blob that
 * no index row names (left by a failed or abandoned checkpoint), so it is deleted only after
 * the grace period. `deletion_journal` records every pack deletion before the blob is
 * removed, so a GC killed mid-deletion is finished by the next run.
 */
const gcSqlite: readonly string[] = [
  `CREATE TABLE gc_queue (
  pack_id TEXT PRIMARY KEY NOT NULL CONSTRAINT gc_queue_pack_id_check CHECK (${ID64('pack_id')}),
  first_seen_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID`,
  `CREATE TABLE deletion_journal (
  pack_id TEXT PRIMARY KEY NOT NULL CONSTRAINT deletion_journal_pack_id_check CHECK (${ID64('pack_id')}),
  key TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER
) STRICT, WITHOUT ROWID`,
];

const gcPostgres: readonly string[] = [
  `CREATE TABLE gc_queue (
  pack_id text COLLATE "C" PRIMARY KEY CONSTRAINT gc_queue_pack_id_check CHECK (${ID64('pack_id')}),
  first_seen_at bigint NOT NULL
)`,
  `CREATE TABLE deletion_journal (
  pack_id text COLLATE "C" PRIMARY KEY CONSTRAINT deletion_journal_pack_id_check CHECK (${ID64('pack_id')}),
  key text NOT NULL,
  started_at bigint NOT NULL,
  finished_at bigint
)`,
];

/**
 * Runs (DESIGN section 9) and auth. Deployments are immutable and content-addressed per
 * tenant; a channel names the active one. A run owns one workspace and at most one sandbox;
 * its lease columns fence every write: claiming bumps `lease_epoch` in one UPDATE, and every
 * head move re-checks it under the row lock. Tokens are stored as SHA-256 hashes only.
 */
const LEASE_STATE = `lease_state IN ('free', 'held', 'release_recovery_required')`;
const TURN_STATUS = `status IN ('running', 'completed', 'failed')`;
const EVENT_STATUS = `status IN ('ok', 'failed')`;

function runsTables(t: { text: string; int: string; serial: string; strict: string }): string[] {
  return [
    `CREATE TABLE deployments (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  id ${t.text} NOT NULL CONSTRAINT deployments_id_check CHECK (${ID64('id')}),
  spec ${t.text} NOT NULL,
  created_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, id)
)${t.strict}`,
    `CREATE TABLE channels (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  name ${t.text} NOT NULL,
  deployment_id ${t.text} NOT NULL,
  version ${t.int} NOT NULL CONSTRAINT channels_version_check CHECK (version >= 1),
  updated_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, name),
  FOREIGN KEY (tenant_id, deployment_id) REFERENCES deployments (tenant_id, id)
)${t.strict}`,
    `CREATE TABLE runs (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  workspace_id ${t.text} NOT NULL CONSTRAINT runs_workspace_key UNIQUE REFERENCES workspaces (id),
  channel ${t.text},
  deployment_id ${t.text} NOT NULL,
  sandbox_provider ${t.text},
  sandbox_id ${t.text},
  lease_state ${t.text} NOT NULL DEFAULT 'free' CONSTRAINT runs_lease_state_check CHECK (${LEASE_STATE}),
  lease_epoch ${t.int} NOT NULL DEFAULT 0 CONSTRAINT runs_lease_epoch_check CHECK (lease_epoch >= 0),
  lease_owner ${t.text},
  lease_expires_at ${t.int},
  lease_taken_from ${t.text},
  lease_error ${t.text},
  turn_count ${t.int} NOT NULL DEFAULT 0,
  created_at ${t.int} NOT NULL,
  updated_at ${t.int} NOT NULL,
  FOREIGN KEY (tenant_id, deployment_id) REFERENCES deployments (tenant_id, id),
  CONSTRAINT runs_held_owner_check CHECK ((lease_state = 'held') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
)${t.strict}`,
    'CREATE INDEX runs_tenant_created_idx ON runs (tenant_id, created_at)',
    `CREATE TABLE turns (
  id ${t.text} PRIMARY KEY NOT NULL,
  run_id ${t.text} NOT NULL REFERENCES runs (id),
  seq ${t.int} NOT NULL,
  epoch ${t.int} NOT NULL,
  owner ${t.text} NOT NULL,
  status ${t.text} NOT NULL CONSTRAINT turns_status_check CHECK (${TURN_STATUS}),
  checkpoint_id ${t.text},
  error ${t.text},
  result ${t.text},
  started_at ${t.int} NOT NULL,
  finished_at ${t.int},
  CONSTRAINT turns_run_seq_key UNIQUE (run_id, seq),
  CONSTRAINT turns_finished_check CHECK ((status = 'running') = (finished_at IS NULL)),
  CONSTRAINT turns_completed_checkpoint_check CHECK (status <> 'completed' OR checkpoint_id IS NOT NULL)
)${t.strict}`,
    `CREATE TABLE run_events (
  id ${t.serial},
  run_id ${t.text} NOT NULL REFERENCES runs (id),
  at ${t.int} NOT NULL,
  kind ${t.text} NOT NULL,
  step ${t.text} NOT NULL,
  status ${t.text} NOT NULL CONSTRAINT run_events_status_check CHECK (${EVENT_STATUS}),
  duration_ms ${t.int},
  data ${t.text}
)${t.strict}`,
    'CREATE INDEX run_events_run_idx ON run_events (run_id, id)',
    `CREATE TABLE tokens (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  hash ${t.text} NOT NULL CONSTRAINT tokens_hash_key UNIQUE CONSTRAINT tokens_hash_check CHECK (${ID64('hash')}),
  name ${t.text} NOT NULL,
  admin ${t.int} NOT NULL CONSTRAINT tokens_admin_check CHECK (admin IN (0, 1)),
  created_at ${t.int} NOT NULL,
  revoked_at ${t.int}
)${t.strict}`,
  ];
}

const runsSqlite = runsTables({ text: 'TEXT', int: 'INTEGER', serial: 'INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL', strict: ' STRICT' });
const runsPostgres = runsTables({ text: 'text', int: 'bigint', serial: 'bigserial PRIMARY KEY', strict: '' });

/**
 * HTTP idempotency receipts (DESIGN section 12): the first write carrying an `Idempotency-Key`
 * records its request hash, and its response once it finishes; a retry with the same key gets
 * that response again instead of running the write twice.
 */
function idempotencyTables(t: { text: string; int: string; strict: string }): string[] {
  return [
    `CREATE TABLE idempotency_keys (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  key ${t.text} NOT NULL,
  request_hash ${t.text} NOT NULL CONSTRAINT idempotency_keys_hash_check CHECK (${ID64('request_hash')}),
  status_code ${t.int},
  response ${t.text},
  created_at ${t.int} NOT NULL,
  finished_at ${t.int},
  PRIMARY KEY (tenant_id, key),
  CONSTRAINT idempotency_keys_finished_check CHECK ((finished_at IS NULL) = (status_code IS NULL))
)${t.strict}`,
    'CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at)',
  ];
}

const idempotencySqlite = idempotencyTables({ text: 'TEXT', int: 'INTEGER', strict: ' STRICT' });
const idempotencyPostgres = idempotencyTables({ text: 'text', int: 'bigint', strict: '' });

/**
 * Receipts belong to the calling principal (its token id), not to its tenant: one principal's
 * key never answers another's request. The old table is dropped, not copied: its rows are
 * tenant-scoped and could hold the plain-text answers of token creation.
 *
 * Upload intents: a pack is registered here before its blob is uploaded, so GC never deletes
 * the pack of a checkpoint (or repack) still running, whatever its grace. `writer_id` names
 * the writer (one per checkpoint or repack group), `checkpoint_id` the pending checkpoint it
 * writes for (`NULL` for a repack); the commit that registers the pack, or the failure of its
 * writer, removes the row.
 */
function receiptsAndIntentsTables(t: { text: string; int: string; strict: string; id: string; withoutRowid: string }): string[] {
  return [
    'DROP TABLE idempotency_keys',
    `CREATE TABLE idempotency_receipts (
  principal_id ${t.text} NOT NULL,
  key ${t.text} NOT NULL,
  request_hash ${t.text} NOT NULL CONSTRAINT idempotency_receipts_hash_check CHECK (${ID64('request_hash')}),
  status_code ${t.int},
  response ${t.text},
  created_at ${t.int} NOT NULL,
  finished_at ${t.int},
  PRIMARY KEY (principal_id, key),
  CONSTRAINT idempotency_receipts_finished_check CHECK ((finished_at IS NULL) = (status_code IS NULL))
)${t.strict}`,
    'CREATE INDEX idempotency_receipts_created_idx ON idempotency_receipts (created_at)',
    `CREATE TABLE upload_intents (
  pack_id ${t.id} NOT NULL CONSTRAINT upload_intents_pack_id_check CHECK (${ID64('pack_id')}),
  writer_id ${t.text} NOT NULL,
  checkpoint_id ${t.text},
  created_at ${t.int} NOT NULL,
  PRIMARY KEY (pack_id, writer_id)
)${t.strict}${t.withoutRowid}`,
    'CREATE INDEX upload_intents_writer_idx ON upload_intents (writer_id)',
  ];
}

const receiptsAndIntentsSqlite = receiptsAndIntentsTables({
  text: 'TEXT',
  int: 'INTEGER',
  strict: ' STRICT',
  id: 'TEXT',
  withoutRowid: ', WITHOUT ROWID',
});
const receiptsAndIntentsPostgres = receiptsAndIntentsTables({
  text: 'text',
  int: 'bigint',
  strict: '',
  id: 'text COLLATE "C"',
  withoutRowid: '',
});

/**
 * Solid blocks: small objects compressed together as one zstd frame in a pack. A member's
 * row names the block's stored range (`offset`, `length`, codec `zstd`) and its own offset
 * inside the decompressed block; `NULL` for objects stored on their own. Adding a nullable
 * column rewrites no rows on either dialect.
 */
const BLOCK_OFFSET_CHECK = `CONSTRAINT objects_block_offset_check CHECK (block_offset IS NULL OR (block_offset >= 0 AND codec = 'zstd'))`;
const blockOffsetSqlite: readonly string[] = [`ALTER TABLE objects ADD COLUMN block_offset INTEGER ${BLOCK_OFFSET_CHECK}`];
const blockOffsetPostgres: readonly string[] = [`ALTER TABLE objects ADD COLUMN block_offset bigint ${BLOCK_OFFSET_CHECK}`];

/**
 * Objects name their pack by a small integer (`packs.seq`) instead of its 64-character id:
 * the id was stored in every object row and again in every entry of the by-pack index, the
 * largest part of the index (about 125 of 340 bytes per object on SQLite). SQLite rebuilds
 * both tables (`seq` is the rowid of `packs`, so it is assigned on insert); PostgreSQL adds an
 * identity column and swaps the objects column in place. (SQLite's rename of `packs_new`
 * re-points the objects foreign key at `packs`.)
 */
const packSeqSqlite: readonly string[] = [
  `CREATE TABLE packs_new (
  seq INTEGER PRIMARY KEY NOT NULL,
  id TEXT NOT NULL CONSTRAINT packs_id_key UNIQUE CONSTRAINT packs_id_check CHECK (${ID64('id')}),
  kind TEXT NOT NULL CONSTRAINT packs_kind_check CHECK (${KIND}),
  size INTEGER NOT NULL CONSTRAINT packs_size_check CHECK (size >= 0),
  object_count INTEGER NOT NULL CONSTRAINT packs_object_count_check CHECK (object_count >= 0),
  created_at INTEGER NOT NULL,
  condemned_at INTEGER
) STRICT`,
  'INSERT INTO packs_new (id, kind, size, object_count, created_at, condemned_at) SELECT id, kind, size, object_count, created_at, condemned_at FROM packs ORDER BY id',
  `CREATE TABLE objects_new (
  id TEXT PRIMARY KEY NOT NULL CONSTRAINT objects_id_check CHECK (${ID64('id')}),
  pack_seq INTEGER NOT NULL REFERENCES packs_new (seq),
  kind TEXT NOT NULL CONSTRAINT objects_kind_check CHECK (${KIND}),
  "offset" INTEGER NOT NULL CONSTRAINT objects_offset_check CHECK ("offset" >= 0),
  length INTEGER NOT NULL CONSTRAINT objects_length_check CHECK (length >= 0),
  raw_length INTEGER NOT NULL CONSTRAINT objects_raw_length_check CHECK (raw_length >= 0),
  codec TEXT NOT NULL CONSTRAINT objects_codec_check CHECK (${CODEC}),
  block_offset INTEGER ${BLOCK_OFFSET_CHECK}
) STRICT, WITHOUT ROWID`,
  `INSERT INTO objects_new (id, pack_seq, kind, "offset", length, raw_length, codec, block_offset)
  SELECT o.id, p.seq, o.kind, o."offset", o.length, o.raw_length, o.codec, o.block_offset FROM objects o JOIN packs_new p ON p.id = o.pack_id ORDER BY o.id`,
  'DROP TABLE objects',
  'DROP TABLE packs',
  'ALTER TABLE packs_new RENAME TO packs',
  'ALTER TABLE objects_new RENAME TO objects',
  'CREATE INDEX objects_pack_seq_idx ON objects (pack_seq)',
];
const packSeqPostgres: readonly string[] = [
  'ALTER TABLE packs ADD COLUMN seq bigint GENERATED BY DEFAULT AS IDENTITY CONSTRAINT packs_seq_key UNIQUE',
  'ALTER TABLE objects ADD COLUMN pack_seq bigint',
  'UPDATE objects SET pack_seq = packs.seq FROM packs WHERE packs.id = objects.pack_id',
  'ALTER TABLE objects ALTER COLUMN pack_seq SET NOT NULL',
  'ALTER TABLE objects ADD CONSTRAINT objects_pack_seq_fkey FOREIGN KEY (pack_seq) REFERENCES packs (seq)',
  'ALTER TABLE objects DROP COLUMN pack_id',
  'CREATE INDEX objects_pack_seq_idx ON objects (pack_seq)',
];

/**
 * Principals beyond service tokens (issue 12): `users` of a tenant (member or viewer,
 * revocable; a name is unique among the tenant's live users, so a revoked name may be added
 * again as a new row that old tokens do not reach), tokens bound to a user or to a run (never
 * both, never admin), and a run's collection bindings (JSON, `NULL` when unbound) and the
 * moment it ended (`NULL` while active). Nullable columns: no existing row is rewritten.
 */
function principalsTables(t: { text: string; int: string; strict: string }): string[] {
  return [
    `CREATE TABLE users (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  name ${t.text} NOT NULL,
  role ${t.text} NOT NULL CONSTRAINT users_role_check CHECK (role IN ('member', 'viewer')),
  created_at ${t.int} NOT NULL,
  revoked_at ${t.int}
)${t.strict}`,
    'CREATE UNIQUE INDEX users_tenant_live_name_key ON users (tenant_id, name) WHERE revoked_at IS NULL',
    'CREATE INDEX users_tenant_name_idx ON users (tenant_id, name)',
    `ALTER TABLE tokens ADD COLUMN user_id ${t.text} REFERENCES users (id)`,
    `ALTER TABLE tokens ADD COLUMN run_id ${t.text} REFERENCES runs (id)
  CONSTRAINT tokens_owner_check CHECK ((user_id IS NULL OR run_id IS NULL) AND (admin = 0 OR (user_id IS NULL AND run_id IS NULL)))`,
    'CREATE INDEX tokens_user_idx ON tokens (user_id)',
    'CREATE INDEX tokens_run_idx ON tokens (run_id)',
    `ALTER TABLE runs ADD COLUMN bindings ${t.text}`,
    `ALTER TABLE runs ADD COLUMN ended_at ${t.int}`,
  ];
}

const principalsSqlite = principalsTables({ text: 'TEXT', int: 'INTEGER', strict: ' STRICT' });
const principalsPostgres = principalsTables({ text: 'text', int: 'bigint', strict: '' });

/**
 * Work folders (DESIGN section 10). A collection is `(tenant, scope, owner)`, created on
 * first use (insert-or-nothing, then select: race-safe). `last_operation_at` is stamped by
 * every applied mutation; the row is also what a mutation locks (`FOR UPDATE`).
 *
 * `folder_files` holds one row per file or directory, live or trashed. At most one live row
 * per path (a partial unique index); any number of trashed ones. `trash_unit` groups the rows
 * one delete moved together, so a restore brings back exactly them; it is set exactly when
 * `deleted_at` is. `chunks` is the JSON list of `[objectId, rawLength]` pairs of a file
 * (NULL for a directory): GC treats every row's chunks as roots. Paths sort bytewise on both
 * engines (`COLLATE "C"` on PostgreSQL) so keyset pages and prefix tests agree.
 *
 * `folder_operations` are the content-free receipts of applied operations, unique per
 * collection: an old retry is recognised, never re-applied. `service_claims` are named,
 * expiring claims (the periodic GC sweep runs on one replica at a time).
 */
function foldersTables(t: { text: string; path: string; int: string; bool: string; strict: string }): string[] {
  return [
    `CREATE TABLE folder_collections (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  scope ${t.text} NOT NULL CONSTRAINT folder_collections_scope_check CHECK (scope IN ('task', 'agent', 'user', 'project')),
  owner_id ${t.text} NOT NULL,
  created_at ${t.int} NOT NULL,
  last_operation_at ${t.int},
  CONSTRAINT folder_collections_owner_key UNIQUE (tenant_id, scope, owner_id)
)${t.strict}`,
    `CREATE TABLE folder_files (
  id ${t.text} PRIMARY KEY NOT NULL,
  collection_id ${t.text} NOT NULL REFERENCES folder_collections (id),
  path ${t.path} NOT NULL,
  kind ${t.text} NOT NULL CONSTRAINT folder_files_kind_check CHECK (kind IN ('file', 'directory')),
  size ${t.int} NOT NULL CONSTRAINT folder_files_size_check CHECK (size >= 0),
  sha256 ${t.text},
  chunks ${t.text},
  executable ${t.bool} NOT NULL,
  content_type ${t.text},
  updated_at ${t.int} NOT NULL,
  deleted_at ${t.int},
  trash_unit ${t.text},
  CONSTRAINT folder_files_trash_check CHECK ((deleted_at IS NULL) = (trash_unit IS NULL)),
  CONSTRAINT folder_files_content_check CHECK ((kind = 'file') = (sha256 IS NOT NULL AND chunks IS NOT NULL))
)${t.strict}`,
    'CREATE UNIQUE INDEX folder_files_live_path_key ON folder_files (collection_id, path) WHERE deleted_at IS NULL',
    'CREATE INDEX folder_files_path_idx ON folder_files (collection_id, path, id)',
    'CREATE INDEX folder_files_trash_unit_idx ON folder_files (collection_id, trash_unit) WHERE trash_unit IS NOT NULL',
    `CREATE TABLE folder_operations (
  collection_id ${t.text} NOT NULL REFERENCES folder_collections (id),
  operation_id ${t.text} NOT NULL,
  fingerprint ${t.text} NOT NULL,
  result_id ${t.text},
  created_at ${t.int} NOT NULL,
  PRIMARY KEY (collection_id, operation_id)
)${t.strict}`,
    `CREATE TABLE service_claims (
  name ${t.text} PRIMARY KEY NOT NULL,
  holder ${t.text} NOT NULL,
  expires_at ${t.int} NOT NULL
)${t.strict}`,
  ];
}

const foldersSqlite = foldersTables({ text: 'TEXT', path: 'TEXT', int: 'INTEGER', bool: 'INTEGER', strict: ' STRICT' });
const foldersPostgres = foldersTables({ text: 'text', path: 'text COLLATE "C"', int: 'bigint', bool: 'boolean', strict: '' });

/**
 * Work-folder sync state (issue 13): one row per sandbox (provider + sandbox id) and scope,
 * what the sync of that collection in that sandbox last agreed with the store. `bindings` is
 * the JSON of the run's owners the row was made for (a sandbox is never reused for others);
 * `baseline` the JSON map path -> signature last agreed; `pending` the operation ids stored
 * before their transfer (path -> `{operationId, signature}`); `intents` what an incoming
 * sync meant to write or remove, kept until the next outgoing reconciles it; `last_root_tree`
 * the tree of the last outgoing scan. `state` and the refresh request are what the status
 * route shows; `last_saved_at` survives a failed save, `final_checkpoint_at` is set only by a
 * completed final save.
 */
function folderSyncTables(t: { text: string; int: string; strict: string }): string[] {
  return [
    `CREATE TABLE folder_sync_states (
  provider ${t.text} NOT NULL,
  sandbox_id ${t.text} NOT NULL,
  scope ${t.text} NOT NULL CONSTRAINT folder_sync_states_scope_check CHECK (scope IN ('task', 'agent', 'user', 'project')),
  run_id ${t.text} NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  collection_id ${t.text} NOT NULL REFERENCES folder_collections (id),
  bindings ${t.text} NOT NULL,
  baseline ${t.text} NOT NULL,
  pending ${t.text} NOT NULL,
  intents ${t.text},
  last_root_tree ${t.text},
  state ${t.text} NOT NULL CONSTRAINT folder_sync_states_state_check CHECK (state IN ('never_saved', 'saving', 'saved', 'failed')),
  last_saved_at ${t.int},
  final_checkpoint_at ${t.int},
  error ${t.text},
  refresh_state ${t.text} NOT NULL CONSTRAINT folder_sync_states_refresh_check CHECK (refresh_state IN ('none', 'queued', 'running', 'failed')),
  refresh_at ${t.int},
  refresh_error ${t.text},
  created_at ${t.int} NOT NULL,
  updated_at ${t.int} NOT NULL,
  PRIMARY KEY (provider, sandbox_id, scope)
)${t.strict}`,
    'CREATE INDEX folder_sync_states_collection_idx ON folder_sync_states (collection_id)',
    'CREATE INDEX folder_sync_states_run_idx ON folder_sync_states (tenant_id, run_id)',
  ];
}

const folderSyncSqlite = folderSyncTables({ text: 'TEXT', int: 'INTEGER', strict: ' STRICT' });
const folderSyncPostgres = folderSyncTables({ text: 'text', int: 'bigint', strict: '' });

/**
 * Every migration this build knows, ascending by version. The migrator refuses a database
 * whose highest applied version is above the last entry here.
 */
export const MIGRATIONS: readonly Migration[] = Object.freeze([
  { version: 1, name: 'initial_objects_and_snapshots', sqlite: initialSqlite, postgres: initialPostgres },
  { version: 2, name: 'gc_queue_and_deletion_journal', sqlite: gcSqlite, postgres: gcPostgres },
  { version: 3, name: 'runs_deployments_leases_tokens', sqlite: runsSqlite, postgres: runsPostgres },
  { version: 4, name: 'idempotency_keys', sqlite: idempotencySqlite, postgres: idempotencyPostgres },
  { version: 5, name: 'principal_receipts_and_upload_intents', sqlite: receiptsAndIntentsSqlite, postgres: receiptsAndIntentsPostgres },
  { version: 6, name: 'object_block_offset', sqlite: blockOffsetSqlite, postgres: blockOffsetPostgres },
  { version: 7, name: 'objects_pack_seq', sqlite: packSeqSqlite, postgres: packSeqPostgres },
  { version: 8, name: 'users_run_bindings_scoped_tokens', sqlite: principalsSqlite, postgres: principalsPostgres },
  { version: 9, name: 'work_folders', sqlite: foldersSqlite, postgres: foldersPostgres },
  { version: 10, name: 'folder_sync_states', sqlite: folderSyncSqlite, postgres: folderSyncPostgres },
]);

/** The highest schema version this build can run against. */
export const LATEST_SCHEMA_VERSION: number = MIGRATIONS.at(-1)?.version ?? 0;
