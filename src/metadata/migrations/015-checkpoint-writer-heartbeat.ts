import type { Migration } from './migration.js';

/**
 * A pending checkpoint's writer says it is alive: `writer_heartbeat_at` (epoch ms) is set when
 * the row is made and renewed while the checkpoint runs, so GC can tell a writer that was
 * killed (the stamp stops moving) from one still uploading, and mark its checkpoint failed
 * (`INTERRUPTED`) long before `MAX_CHECKPOINT_MS`. `NULL` for rows made before this version
 * (and for finished ones, which never need it). Adding a nullable column rewrites no rows.
 */
const heartbeatSqlite: readonly string[] = ['ALTER TABLE checkpoints ADD COLUMN writer_heartbeat_at INTEGER'];
const heartbeatPostgres: readonly string[] = ['ALTER TABLE checkpoints ADD COLUMN writer_heartbeat_at bigint'];

/** Version 15: `checkpoint_writer_heartbeat`. */
export const migration: Migration = {
  version: 15,
  name: 'checkpoint_writer_heartbeat',
  sqlite: heartbeatSqlite,
  postgres: heartbeatPostgres,
};
