import type BetterSqlite3 from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { StoreError } from '../errors.js';
import { MIGRATIONS, type Migration } from './migrations.js';
import type { Database } from './schema.js';

/**
 * Applies {@link MIGRATIONS} to a database, safely when several processes open the same
 * fresh database at once: each takes a database-wide lock inside one transaction, then
 * re-reads the applied versions and applies only the missing ones, recording each in
 * `holdfast_schema_migrations` in that same transaction. A loser of the race waits for
 * the lock, finds everything applied and commits nothing.
 *
 * - PostgreSQL: `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`, released at commit/rollback.
 * - SQLite: `BEGIN EXCLUSIVE`; a second process waits through its busy_timeout. The SQLite
 *   runner is synchronous (better-sqlite3), so two stores in one process cannot interleave.
 */

/** Advisory-lock key for migrations: the ASCII bytes of "Holdfast" as a signed int8. */
export const MIGRATION_LOCK_KEY = 0x486f6c6466617374n;

/** What a migration run did. */
export interface MigrationResult {
  /** Versions applied by this run, ascending; empty when the schema was already current. */
  readonly applied: readonly number[];
  /** The schema version after the run. */
  readonly version: number;
}

const VERSION_TABLE_SQLITE = `CREATE TABLE IF NOT EXISTS holdfast_schema_migrations (
  version INTEGER PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT`;

const VERSION_TABLE_POSTGRES = `CREATE TABLE IF NOT EXISTS holdfast_schema_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at bigint NOT NULL
)`;

/**
 * The migrations still to apply given the versions already recorded, ascending. Throws
 * `STORE_UNAVAILABLE` naming both versions when the database is newer than this build.
 */
export function planMigrations(applied: Iterable<number>, target: string, known: readonly Migration[] = MIGRATIONS): Migration[] {
  const done = new Set(applied);
  const codeVersion = known.at(-1)?.version ?? 0;
  const databaseVersion = Math.max(0, ...done);
  if (databaseVersion > codeVersion) {
    throw new StoreError(
      `metadata database ${target} has schema version ${databaseVersion} but this Holdfast knows up to version ${codeVersion}: upgrade Holdfast, or point HOLDFAST_META at another database`,
      { data: { databaseVersion, codeVersion, target } },
    );
  }
  return known.filter((migration) => !done.has(migration.version));
}

/** Migrates a raw better-sqlite3 connection synchronously (see the module notes). */
export function migrateSqlite(db: BetterSqlite3.Database, target: string, now: () => number = Date.now): MigrationResult {
  db.exec('BEGIN EXCLUSIVE');
  try {
    db.exec(VERSION_TABLE_SQLITE);
    const rows = db.prepare('SELECT version FROM holdfast_schema_migrations').pluck().all() as number[];
    const pending = planMigrations(rows, target);
    const record = db.prepare('INSERT INTO holdfast_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of pending) {
      for (const statement of migration.sqlite) db.exec(statement);
      record.run(migration.version, migration.name, now());
    }
    db.exec('COMMIT');
    return result(rows, pending);
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw error;
  }
}

/** Migrates a PostgreSQL database through Kysely, in one transaction under the advisory lock. */
export async function migratePostgres(db: Kysely<Database>, target: string, now: () => number = Date.now): Promise<MigrationResult> {
  return db.transaction().execute(async (trx) => {
    await sql.raw(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`).execute(trx);
    await sql.raw(VERSION_TABLE_POSTGRES).execute(trx);
    const rows = await trx.selectFrom('holdfast_schema_migrations').select('version').execute();
    const applied = rows.map((row) => row.version);
    const pending = planMigrations(applied, target);
    for (const migration of pending) {
      for (const statement of migration.postgres) await sql.raw(statement).execute(trx);
      await trx
        .insertInto('holdfast_schema_migrations')
        .values({ version: migration.version, name: migration.name, applied_at: now() })
        .execute();
    }
    return result(applied, pending);
  });
}

function result(applied: readonly number[], pending: readonly Migration[]): MigrationResult {
  const versions = [...applied, ...pending.map((migration) => migration.version)];
  return { applied: pending.map((migration) => migration.version), version: Math.max(0, ...versions) };
}

/** A Kysely instance whose schema is current, as returned by the dialect openers. */
export interface MigratedDatabase {
  readonly db: Kysely<Database>;
  readonly migration: MigrationResult;
}
