import { mkdirSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { HoldfastError, StoreError } from '../../errors.js';
import { translateDbError } from '../db-errors.js';
import { type MigratedDatabase, migrateSqlite } from '../migrator.js';
import type { Database } from '../schema.js';
import { TranslatingDialect } from './translating-dialect.js';

/**
 * How long a SQLite writer waits for another connection's write lock before failing with a
 * transient `STORE_UNAVAILABLE`. Covers a concurrent migration or a long checkpoint commit.
 */
export const SQLITE_BUSY_TIMEOUT_MS = 15_000;

/**
 * Opens (creating if needed) the SQLite metadata database at `file`, migrates it, and returns
 * a Kysely instance over it.
 *
 * Durability settings, per connection:
 * - `journal_mode=WAL`: readers never block the writer.
 * - `synchronous=FULL`: every commit fsyncs the WAL before returning, so an acknowledged
 *   checkpoint survives power loss. (`NORMAL` would only survive a process crash: the last
 *   commits before an OS crash could roll back, while their pack blobs and callers already
 *   moved on.)
 * - `foreign_keys=ON`, `busy_timeout` = {@link SQLITE_BUSY_TIMEOUT_MS}.
 *
 * Transactions start with `BEGIN IMMEDIATE`. better-sqlite3 is synchronous: use one store per
 * file per process; a second store in the same process that waits for the first one's open
 * transaction blocks the event loop until the busy timeout.
 */
export async function openSqlite(file: string, now: () => number = Date.now): Promise<MigratedDatabase> {
  const context = { dialect: 'sqlite', target: file } as const;
  const translate = (error: unknown): unknown => translateDbError(error, context);
  let raw: BetterSqlite3.Database;
  try {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    raw = new BetterSqlite3(file, { timeout: SQLITE_BUSY_TIMEOUT_MS });
  } catch (error) {
    throw openFailure(file, translate(error));
  }
  try {
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = FULL');
    raw.pragma('foreign_keys = ON');
    const migration = migrateSqlite(raw, file, now);
    const dialect = new TranslatingDialect(new SqliteDialect({ database: raw }), {
      translate,
      beginSql: 'begin immediate',
      // One connection per database: the database's own flag is the connection's.
      inTransaction: () => raw.inTransaction,
    });
    return { db: new Kysely<Database>({ dialect }), migration };
  } catch (error) {
    raw.close();
    throw openFailure(file, translate(error));
  }
}

function openFailure(file: string, error: unknown): unknown {
  if (error instanceof HoldfastError || !(error instanceof Error)) return error;
  // Errors with a code are the file system's or SQLite's; anything else is a bug and stays as it is.
  if (typeof (error as { code?: unknown }).code !== 'string') return error;
  return new StoreError(`[sqlite] cannot open ${file} (${error.message}): check the path and its permissions, or set HOLDFAST_META`, {
    data: { target: file },
    cause: error,
  });
}
