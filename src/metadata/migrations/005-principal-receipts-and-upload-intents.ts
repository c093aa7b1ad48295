import type { Migration } from './migration.js';
import { ID64 } from './sql-checks.js';

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

/** Version 5: `principal_receipts_and_upload_intents`. */
export const migration: Migration = {
  version: 5,
  name: 'principal_receipts_and_upload_intents',
  sqlite: receiptsAndIntentsSqlite,
  postgres: receiptsAndIntentsPostgres,
};
