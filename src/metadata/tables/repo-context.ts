import { randomUUID } from 'node:crypto';
import { type Kysely, type RawBuilder, type SqlBool, sql } from 'kysely';
import { InputError, isHoldfastError } from '../../errors.js';
import type { Database } from '../schema.js';

/**
 * What every repository is built from: a Kysely handle (the store's, or a transaction's when
 * the repository is bound to one) and the clock that stamps `created_at`-style columns.
 */
export interface RepoContext {
  readonly db: Kysely<Database>;
  /** The SQL engine, for the few statements that differ (advisory locks). */
  readonly dialect: 'sqlite' | 'postgres';
  /** Epoch milliseconds; injectable so tests can order rows deterministically. */
  readonly now: () => number;
}

/** A new random row id (UUID v4), used when the caller does not supply one. */
export function newId(): string {
  return randomUUID();
}

/**
 * Runs `work` in a transaction: the current one when `db` is already a transaction,
 * otherwise a new one that commits when `work` resolves and rolls back when it rejects.
 */
export function withinTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}

/** True for the translated foreign-key violation (see `db-errors.ts`). */
export function isForeignKeyViolation(error: unknown): boolean {
  return isHoldfastError(error, 'CONFLICT') && error.data.reason === 'foreign_key';
}

/** Rejects an empty or non-string identifier or name with `INVALID_INPUT` naming the field. */
export function requireText(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new InputError('INVALID_INPUT', `${field} must be a non-empty string`, { data: { field } });
  }
  return value;
}

/** Rejects anything but a non-negative safe integer with `INVALID_INPUT` naming the field. */
export function requireCount(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InputError('INVALID_INPUT', `${field} must be a non-negative integer`, { data: { field } });
  }
  return value;
}

/** A JSON object as stored in TEXT columns (`stats`, `error`, `result`, `data`). */
export type JsonObject = Readonly<Record<string, unknown>>;

/**
 * A failure as kept in an `error` column: `HoldfastError#toJSON()` or the same shape (a code,
 * a message, optional data). Its code is a string: a stored row outlives the version that wrote it.
 */
export interface RecordedError extends JsonObject {
  readonly code: string;
  readonly message: string;
}

/** An `error` column as written by {@link toJsonText} from a {@link RecordedError}. */
export function recordedErrorFromText(text: string | null): RecordedError | null {
  return fromJsonText(text) as RecordedError | null;
}

/** JSON text of an object for a TEXT column; `INVALID_INPUT` naming `field` for anything else. */
export function toJsonText(value: JsonObject, field: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (cause) {
    throw new InputError('INVALID_INPUT', `${field} is not serialisable as JSON`, { data: { field }, cause });
  }
  if (text === undefined || !text.startsWith('{'))
    throw new InputError('INVALID_INPUT', `${field} must be a JSON object`, { data: { field } });
  return text;
}

/** The object stored by {@link toJsonText}, or `null`. */
export function fromJsonText(text: string | null): JsonObject | null {
  return text === null ? null : (JSON.parse(text) as JsonObject);
}

/**
 * A WHERE condition: `column` starts with `prefix`, compared exactly (case and all) on both
 * engines. The `substr` equality is the test itself; LIKE is not used, since SQLite's is
 * case-insensitive and `%`/`_` in a prefix would need escaping. On SQLite (BINARY collation,
 * bytewise) a range on the column is added so its index narrows the scan; on PostgreSQL id
 * columns use the database's collation, where a range is not a prefix test, so callers scope
 * the query by an indexed column (the tenant) instead.
 */
export function startsWith(dialect: RepoContext['dialect'], column: string, prefix: string): RawBuilder<SqlBool> {
  const ref = sql.ref(column);
  const exact = sql<SqlBool>`substr(${ref}, 1, length(${prefix})) = ${prefix}`;
  if (dialect !== 'sqlite') return exact;
  // Every string starting with `prefix` sorts at or after it and before it followed by the largest code point.
  return sql<SqlBool>`(${ref} >= ${prefix} AND ${ref} < ${`${prefix}\u{10FFFF}`} AND ${exact})`;
}

/**
 * The keyset condition of a page of a listing ordered newest first (`created_at DESC`, then
 * `id` in `idOrder`): the rows strictly after `after = [createdAt, id]` in that order. A row
 * inserted while a client pages is either before the cursor (never returned) or after it
 * (returned once); none is skipped or repeated.
 */
export function afterNewest(after: readonly [createdAt: number, id: string], idOrder: 'asc' | 'desc'): RawBuilder<SqlBool> {
  const [createdAt, id] = after;
  const idAfter = idOrder === 'asc' ? sql<SqlBool>`id > ${id}` : sql<SqlBool>`id < ${id}`;
  return sql<SqlBool>`(created_at < ${createdAt} OR (created_at = ${createdAt} AND ${idAfter}))`;
}
