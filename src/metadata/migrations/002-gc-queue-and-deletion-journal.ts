import type { Migration } from './migration.js';
import { ID64 } from './sql-checks.js';

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

/** Version 2: `gc_queue_and_deletion_journal`. */
export const migration: Migration = { version: 2, name: 'gc_queue_and_deletion_journal', sqlite: gcSqlite, postgres: gcPostgres };
