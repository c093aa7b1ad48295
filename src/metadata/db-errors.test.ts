import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { translateDbError } from './db-errors.js';

/** An error shaped as the drivers throw it: pg's DatabaseError and better-sqlite3's SqliteError carry `code`. */
function driverError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/** Code and store data of what `translateDbError` made of `error`. */
function translated(error: Error, dialect: 'sqlite' | 'postgres'): unknown {
  const target = dialect === 'sqlite' ? '/var/lib/holdfast/meta.db' : 'postgres://holdfast:***@db:5432/holdfast';
  const result = translateDbError(error, { dialect, target });
  return isHoldfastError(result)
    ? { code: result.code, store: result.data.store, dialect: result.data.dialect, target: result.data.target }
    : result;
}

describe('translateDbError: a full store', () => {
  // A real PostgreSQL disk-full needs a server on a filled file system; the mapping of its SQLSTATE is what is checked here.
  it('maps PostgreSQL disk_full (SQLSTATE 53100) to STORE_FULL, naming the store', () => {
    expect(translated(driverError('could not extend file "base/16384/2619": No space left on device', '53100'), 'postgres')).toEqual({
      code: 'STORE_FULL',
      store: 'metadata',
      dialect: 'postgres',
      target: 'postgres://holdfast:***@db:5432/holdfast',
    });
  });

  it('maps SQLITE_FULL to STORE_FULL, naming the store', () => {
    expect(translated(driverError('database or disk is full', 'SQLITE_FULL'), 'sqlite')).toEqual({
      code: 'STORE_FULL',
      store: 'metadata',
      dialect: 'sqlite',
      target: '/var/lib/holdfast/meta.db',
    });
  });

  it('keeps the other resource conditions as they were: out of memory stays STORE_UNAVAILABLE', () => {
    expect(translated(driverError('out of memory', '53200'), 'postgres')).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(translated(driverError('disk I/O error', 'SQLITE_IOERR_WRITE'), 'sqlite')).toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
