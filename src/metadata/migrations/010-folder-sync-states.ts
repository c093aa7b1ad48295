import type { Migration } from './migration.js';

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

/** Version 10: `folder_sync_states`. */
export const migration: Migration = { version: 10, name: 'folder_sync_states', sqlite: folderSyncSqlite, postgres: folderSyncPostgres };
