import type { Migration } from './migration.js';
import { ID64 } from './sql-checks.js';

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

/** Version 4: `idempotency_keys`. */
export const migration: Migration = { version: 4, name: 'idempotency_keys', sqlite: idempotencySqlite, postgres: idempotencyPostgres };
