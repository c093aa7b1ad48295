import type { Migration } from './migration.js';

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

/** Version 9: `work_folders`. */
export const migration: Migration = { version: 9, name: 'work_folders', sqlite: foldersSqlite, postgres: foldersPostgres };
