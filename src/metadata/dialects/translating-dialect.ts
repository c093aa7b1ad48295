import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';

/** Options of {@link TranslatingDialect}. */
export interface TranslatingDialectOptions {
  /** Maps a driver error to the error to throw instead (usually a HoldfastError). */
  readonly translate: (error: unknown) => unknown;
  /**
   * SQL that opens a transaction when no isolation level or access mode is requested;
   * SQLite uses `begin immediate` so a writer takes the write lock up front and waits on
   * `busy_timeout`, instead of failing with SQLITE_BUSY when a read lock cannot be upgraded.
   */
  readonly beginSql?: string;
  /**
   * Whether `connection` still has an open transaction. SQLite rolls a transaction back by
   * itself on some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, …); the ROLLBACK Kysely then
   * sends would fail with "no transaction is active" and replace the error that explains the
   * failure. With this, rollback is skipped when there is nothing left to roll back.
   */
  readonly inTransaction?: (connection: DatabaseConnection) => boolean;
}

/**
 * Wraps any Kysely dialect so every driver call (connect, query, stream, begin, commit,
 * rollback, savepoints) passes its errors through one `translate` function. This is how
 * the metadata store maps driver errors to Holdfast codes in a single place rather than in
 * every repository.
 */
export class TranslatingDialect implements Dialect {
  readonly #inner: Dialect;
  readonly #options: TranslatingDialectOptions;

  /** Wraps `inner`; `options.translate` sees every error its driver throws. */
  constructor(inner: Dialect, options: TranslatingDialectOptions) {
    this.#inner = inner;
    this.#options = options;
  }

  /** The inner driver, wrapped. */
  createDriver(): Driver {
    return new TranslatingDriver(this.#inner.createDriver(), this.#options);
  }

  /** The inner dialect's compiler, unchanged. */
  createQueryCompiler(): QueryCompiler {
    return this.#inner.createQueryCompiler();
  }

  /** The inner dialect's adapter, unchanged. */
  createAdapter(): DialectAdapter {
    return this.#inner.createAdapter();
  }

  /** The inner dialect's introspector, unchanged. */
  // biome-ignore lint/suspicious/noExplicitAny: mirrors Kysely's own Dialect signature.
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return this.#inner.createIntrospector(db);
  }
}

class TranslatingDriver implements Driver {
  readonly #inner: Driver;
  readonly #options: TranslatingDialectOptions;
  readonly #wrappers = new WeakMap<DatabaseConnection, DatabaseConnection>();
  readonly #unwrapped = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(inner: Driver, options: TranslatingDialectOptions) {
    this.#inner = inner;
    this.#options = options;
  }

  async #guard<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      throw this.#options.translate(error);
    }
  }

  #unwrap(connection: DatabaseConnection): DatabaseConnection {
    return this.#unwrapped.get(connection) ?? connection;
  }

  init(): Promise<void> {
    return this.#guard(() => this.#inner.init());
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.#guard(() => this.#inner.acquireConnection());
    let wrapper = this.#wrappers.get(inner);
    if (wrapper === undefined) {
      wrapper = new TranslatingConnection(inner, this.#options.translate);
      this.#wrappers.set(inner, wrapper);
      this.#unwrapped.set(wrapper, inner);
    }
    return wrapper;
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const inner = this.#unwrap(connection);
    const { beginSql } = this.#options;
    if (beginSql !== undefined && settings.isolationLevel === undefined && settings.accessMode === undefined) {
      return this.#guard(async () => {
        await inner.executeQuery(CompiledQuery.raw(beginSql));
      });
    }
    return this.#guard(() => this.#inner.beginTransaction(inner, settings));
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.#guard(() => this.#inner.commitTransaction(this.#unwrap(connection)));
  }

  /** Rolls back, unless the database already did (see `inTransaction`): the caller's original error is what it rethrows. */
  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const inner = this.#unwrap(connection);
    if (this.#options.inTransaction?.(inner) === false) return Promise.resolve();
    return this.#guard(() => this.#inner.rollbackTransaction(inner));
  }

  savepoint(connection: DatabaseConnection, name: string, compileQuery: QueryCompiler['compileQuery']): Promise<void> {
    return this.#guard(() => required(this.#inner.savepoint, 'savepoint').call(this.#inner, this.#unwrap(connection), name, compileQuery));
  }

  rollbackToSavepoint(connection: DatabaseConnection, name: string, compileQuery: QueryCompiler['compileQuery']): Promise<void> {
    const method = required(this.#inner.rollbackToSavepoint, 'rollbackToSavepoint');
    return this.#guard(() => method.call(this.#inner, this.#unwrap(connection), name, compileQuery));
  }

  releaseSavepoint(connection: DatabaseConnection, name: string, compileQuery: QueryCompiler['compileQuery']): Promise<void> {
    const method = required(this.#inner.releaseSavepoint, 'releaseSavepoint');
    return this.#guard(() => method.call(this.#inner, this.#unwrap(connection), name, compileQuery));
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#unwrap(connection));
  }

  destroy(): Promise<void> {
    return this.#guard(() => this.#inner.destroy());
  }
}

function required<T>(method: T | undefined, name: string): T {
  if (method === undefined) throw new Error(`the wrapped Kysely driver does not support ${name}`);
  return method;
}

class TranslatingConnection implements DatabaseConnection {
  readonly #inner: DatabaseConnection;
  readonly #translate: (error: unknown) => unknown;

  constructor(inner: DatabaseConnection, translate: (error: unknown) => unknown) {
    this.#inner = inner;
    this.#translate = translate;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      return await this.#inner.executeQuery<R>(compiledQuery);
    } catch (error) {
      throw this.#translate(error);
    }
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    try {
      yield* this.#inner.streamQuery<R>(compiledQuery, chunkSize);
    } catch (error) {
      throw this.#translate(error);
    }
  }
}
