import { ConflictError, describeError, HoldfastError, InputError, StoreError, StoreFullError } from '../errors.js';

/**
 * The one place where driver errors (better-sqlite3 `SqliteError`, pg `DatabaseError`, socket
 * errors) become {@link HoldfastError}s. Every query of a metadata store passes through it
 * (see `TranslatingDialect`), so repositories only ever see Holdfast codes:
 *
 * | driver condition                                   | code                | class          |
 * |----------------------------------------------------|---------------------|----------------|
 * | unique / primary-key violation                     | `ALREADY_EXISTS`    | ConflictError  |
 * | foreign-key violation                              | `CONFLICT`, `data.reason = 'foreign_key'` | ConflictError |
 * | CHECK / NOT NULL violation                         | `INVALID_INPUT`     | InputError     |
 * | busy, locked, serialization failure, deadlock      | `STORE_UNAVAILABLE`, transient | StoreError |
 * | unreachable, refused, shut down, too many clients  | `STORE_UNAVAILABLE`, transient | StoreError |
 * | disk full (SQLITE_FULL, SQLSTATE 53100)           | `STORE_FULL`        | StoreFullError |
 * | auth failure, missing database, corrupt, I/O error | `STORE_UNAVAILABLE`, not transient | StoreError |
 *
 * Unique violations are `ALREADY_EXISTS`, not `CONFLICT`: the named thing exists and the
 * caller should fetch it, whereas `CONFLICT` means "you lost a race on state you read"
 * (compare-and-swap, status transitions) and re-reading then retrying is the remedy.
 * Anything else (SQL bugs, type errors) is passed through unchanged and surfaces as a 500.
 */

/** Which store an error came from, for messages: `target` must already be secret-free. */
export interface DbErrorContext {
  readonly dialect: 'sqlite' | 'postgres';
  /** Redacted URL (`postgres://user:***@host:5432/db`) or the SQLite file path. */
  readonly target: string;
}

const PG_TRANSIENT = new Set(['40001', '40P01', '55P03', '57014', '57P01', '57P02', '57P03', '53300', '53400']);
const PG_FATAL = new Set(['28000', '28P01', '3D000', '53200', '58030']);
/** PostgreSQL's disk_full. */
const PG_DISK_FULL = '53100';
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
const SQLITE_FATAL = /^SQLITE_(IOERR|CANTOPEN|READONLY|CORRUPT|NOTADB|PERM)/;
/** SQLite's full database or disk (also `max_page_count` reached). */
const SQLITE_DISK_FULL = /^SQLITE_FULL/;

/**
 * Converts a driver error into the matching {@link HoldfastError}; returns `error` itself when
 * it is already a HoldfastError or is not a store condition (a bug, which should stay loud).
 */
export function translateDbError(error: unknown, context: DbErrorContext): unknown {
  if (error instanceof HoldfastError || !(error instanceof Error)) return error;
  const code = errorCode(error);
  const tag = `[${context.dialect}]`;
  if (code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    const data = constraintData(error);
    return new ConflictError('ALREADY_EXISTS', `${tag} ${describeKey(data)} already exists`, { data, cause: error });
  }
  if (code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
    return new ConflictError('CONFLICT', `${tag} the row refers to a row that does not exist (or is still referenced)`, {
      data: { ...constraintData(error), reason: 'foreign_key' },
      cause: error,
    });
  }
  if (code === '23514' || code === '23502' || code === 'SQLITE_CONSTRAINT_CHECK' || code === 'SQLITE_CONSTRAINT_NOTNULL') {
    return new InputError('INVALID_INPUT', `${tag} value rejected by the schema: ${error.message}`, {
      data: constraintData(error),
      cause: error,
    });
  }
  const where = `${context.dialect === 'postgres' ? 'PostgreSQL at' : 'SQLite database'} ${context.target}`;
  const data = { target: context.target, ...(code === undefined ? {} : { driverCode: code }) };
  if (
    code !== undefined &&
    (PG_TRANSIENT.has(code) || code.startsWith('08') || code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
  ) {
    return new StoreError(`${tag} ${where} is busy or went away (${describeError(error)}): retry the request`, {
      data,
      cause: error,
      transient: true,
    });
  }
  if ((code !== undefined && NET_CODES.has(code)) || isPoolConnectFailure(error)) {
    return new StoreError(`${tag} cannot reach ${where} (${describeError(error)}): start it or check HOLDFAST_META`, {
      data,
      cause: error,
      transient: true,
    });
  }
  if (code !== undefined && (code === PG_DISK_FULL || SQLITE_DISK_FULL.test(code))) {
    return new StoreFullError(
      `${tag} ${where} is full (${describeError(error)}): free space on its disk (or raise its size limit), then retry; nothing of the failed write was kept`,
      { data: { store: 'metadata', dialect: context.dialect, ...data }, cause: error },
    );
  }
  if (code !== undefined && (PG_FATAL.has(code) || SQLITE_FATAL.test(code))) {
    return new StoreError(`${tag} ${where} refused the request (${describeError(error)}): check HOLDFAST_META, credentials and disk`, {
      data,
      cause: error,
    });
  }
  return error;
}

function errorCode(error: Error): string | undefined {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // Node reports a failed multi-address connect as an AggregateError of per-address errors.
  if (error instanceof AggregateError) {
    const first: unknown = error.errors[0];
    if (first instanceof Error) return errorCode(first);
  }
  return undefined;
}

/** pg's own connection failures carry no code, only these messages (the last: a client whose connection already failed). */
function isPoolConnectFailure(error: Error): boolean {
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout|encountered a connection error and is not queryable/i.test(
    error.message,
  );
}

interface ConstraintData {
  readonly [key: string]: string | readonly string[] | undefined;
  readonly table?: string;
  readonly columns?: readonly string[];
  readonly constraint?: string;
}

/** Pulls table, columns and constraint name out of either driver's error. */
function constraintData(error: Error): ConstraintData {
  const pg = error as { table?: unknown; constraint?: unknown; detail?: unknown };
  if (typeof pg.constraint === 'string' || typeof pg.table === 'string') {
    const key = typeof pg.detail === 'string' ? /^Key \(([^)]*)\)=/.exec(pg.detail)?.[1] : undefined;
    return {
      ...(typeof pg.table === 'string' ? { table: pg.table } : {}),
      ...(key === undefined ? {} : { columns: key.split(',').map((c) => c.trim()) }),
      ...(typeof pg.constraint === 'string' ? { constraint: pg.constraint } : {}),
    };
  }
  // SQLite: "UNIQUE constraint failed: workspaces.tenant_id, workspaces.name"
  //         "CHECK constraint failed: packs_kind_check"
  const detail = /constraint failed: (.+)$/.exec(error.message)?.[1];
  if (detail === undefined) return {};
  const parts = detail.split(',').map((part) => part.trim());
  if (!parts.every((part) => part.includes('.'))) return { constraint: detail };
  return { table: parts[0]?.split('.')[0] ?? '', columns: parts.map((part) => part.slice(part.indexOf('.') + 1)) };
}

function describeKey(data: ConstraintData): string {
  const columns = data.columns === undefined ? '' : ` (${data.columns.join(', ')})`;
  return data.table === undefined ? 'a row with the same key' : `a ${data.table} row with the same${columns === '' ? ' key' : columns}`;
}
