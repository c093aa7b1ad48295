import { Kysely, PostgresDialect } from 'kysely';
import type { CustomTypesConfig } from 'pg';
import pg from 'pg';
import { redactUrl } from '../../config.js';
import { translateDbError } from '../db-errors.js';
import { type MigratedDatabase, migratePostgres } from '../migrator.js';
import type { Database } from '../schema.js';
import { TranslatingDialect } from './translating-dialect.js';

/** Upper bound on connections one store holds open. */
export const PG_POOL_MAX_CONNECTIONS = 10;
/** How long acquiring a new connection may take before it fails as `STORE_UNAVAILABLE`. */
export const PG_CONNECT_TIMEOUT_MS = 10_000;
/** Idle connections are closed after this long. */
export const PG_IDLE_TIMEOUT_MS = 30_000;

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/**
 * Type parsers for this store's pool only (the global `pg.types` is left alone, so other pg
 * users in the process are unaffected): int8 (`bigint` columns, `count(*)`) and numeric
 * (`sum(...)`) arrive as JS numbers. An int8 beyond 2^53 fails the query rather than
 * silently losing precision; nothing Holdfast stores (ms timestamps, byte sizes) gets near.
 */
export const POSTGRES_TYPES: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary' && oid === INT8_OID) return parseInt8;
    if (format !== 'binary' && oid === NUMERIC_OID) return Number;
    return pg.types.getTypeParser(oid, format);
  }) as CustomTypesConfig['getTypeParser'],
};

function parseInt8(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) throw new RangeError(`int8 value ${value} does not fit a JS number`);
  return parsed;
}

/** A PostgreSQL URL for messages: the password replaced by `***`, query parameters dropped. */
export function describePostgresTarget(url: string): string {
  return redactUrl(url).replace(/\?.*$/, '');
}

/**
 * Connects a bounded pool ({@link PG_POOL_MAX_CONNECTIONS}) to `url`, migrates the database,
 * and returns a Kysely instance over the pool. Connection failures reject with
 * `STORE_UNAVAILABLE` naming the host and database (password redacted); the pool is closed
 * before the rejection.
 */
export async function openPostgres(url: string, now: () => number = Date.now): Promise<MigratedDatabase> {
  const target = describePostgresTarget(url);
  const translate = (error: unknown): unknown => translateDbError(error, { dialect: 'postgres', target });
  const pool = new pg.Pool({
    connectionString: url,
    max: PG_POOL_MAX_CONNECTIONS,
    connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: PG_IDLE_TIMEOUT_MS,
    application_name: 'holdfast',
    types: POSTGRES_TYPES,
  });
  // An idle client whose server went away emits 'error' on the pool; without a listener
  // Node would crash the process. The pool drops that client; the next query reconnects.
  pool.on('error', () => {});
  // A client checked out of the pool (a transaction between two queries) has no pool listener:
  // when its server connection ends there (pg_terminate_backend, a restart), pg emits 'error'
  // on the client itself, which crashed the process. The query in flight or the next one fails
  // instead (STORE_UNAVAILABLE), and the pool drops the client on release as not queryable.
  pool.on('connect', (client) => client.on('error', () => {}));
  const dialect = new TranslatingDialect(new PostgresDialect({ pool }), { translate });
  const db = new Kysely<Database>({ dialect });
  try {
    const migration = await migratePostgres(db, target, now);
    return { db, migration };
  } catch (error) {
    await db.destroy().catch(() => {});
    throw translate(error);
  }
}
