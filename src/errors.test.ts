import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ConflictError,
  ERROR_CODES,
  ERROR_FAMILIES,
  type ErrorCode,
  errorFor,
  HoldfastError,
  InputError,
  IntegrityError,
  isHoldfastError,
  NotFoundError,
  StoreError,
  StoreFullError,
} from './errors.js';

describe('HoldfastError', () => {
  it('carries a stable code, data and cause, and serialises to {code, message, data}', () => {
    const cause = new Error('ECONNRESET');
    const error = new StoreError('[s3] bucket b unreachable', { cause, transient: true, data: { bucket: 'b' } });
    expect(error).toBeInstanceOf(HoldfastError);
    expect(error.code).toBe('STORE_UNAVAILABLE');
    expect(error.transient).toBe(true);
    expect(error.cause).toBe(cause);
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      code: 'STORE_UNAVAILABLE',
      message: '[s3] bucket b unreachable',
      data: { bucket: 'b', transient: true },
    });
  });

  it('subclasses keep their codes and names', () => {
    expect(new NotFoundError('x').code).toBe('NOT_FOUND');
    expect(new ConflictError('STALE_LEASE', 'x').name).toBe('ConflictError');
    expect(isHoldfastError(new ConflictError('CONFLICT', 'x'), 'CONFLICT')).toBe(true);
    expect(isHoldfastError(new ConflictError('CONFLICT', 'x'), 'NOT_FOUND')).toBe(false);
    expect(isHoldfastError(new Error('plain'))).toBe(false);
  });

  it('has a closed, duplicate-free list of codes', () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    expect(ERROR_CODES).toContain('WORKSPACE_CHANGED');
    expect(ERROR_CODES).toContain('INTERRUPTED');
  });
});

describe('error families', () => {
  it('errorFor builds every code through its family, and the rest as a plain HoldfastError', () => {
    const families: Partial<Record<ErrorCode, new (...args: never[]) => HoldfastError>> = {
      INVALID_INPUT: InputError,
      INVALID_PATH: InputError,
      LIMIT_EXCEEDED: InputError,
      SECRET_EXCLUDED: InputError,
      CONFLICT: ConflictError,
      ALREADY_EXISTS: ConflictError,
      STALE_LEASE: ConflictError,
      WORKSPACE_CHANGED: ConflictError,
      REPOSITORY_BUSY: ConflictError,
      INTEGRITY: IntegrityError,
      RESTORE_INCOMPLETE: IntegrityError,
      NOT_FOUND: NotFoundError,
      STORE_UNAVAILABLE: StoreError,
      STORE_FULL: StoreFullError,
    };
    for (const code of ERROR_CODES) {
      const error = errorFor(code, 'm', { data: { k: 1 } });
      const family = families[code];
      expect(error.code).toBe(code);
      if (family === undefined) expect(Object.getPrototypeOf(error)).toBe(HoldfastError.prototype);
      else expect(error).toBeInstanceOf(family);
      expect(ERROR_FAMILIES[code]).toBe(error.name);
      expect(error.data).toMatchObject({ k: 1 });
    }
    expect(errorFor('STORE_UNAVAILABLE', 'm', { data: { transient: true } })).toMatchObject({ transient: true });
  });

  it('product code throws a code with a family only through that family', () => {
    const src = path.dirname(fileURLToPath(import.meta.url));
    const bypass: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(p);
        else if (/\.ts$/.test(entry.name) && !/\.(test|contract)\.ts$/.test(entry.name)) {
          for (const m of fs.readFileSync(p, 'utf8').matchAll(/new (\w+Error)\(\s*'([A-Z_]+)'/g)) {
            const family = ERROR_FAMILIES[m[2] as ErrorCode];
            if (family !== undefined && family !== m[1]) bypass.push(`${path.relative(src, p)}: ${m[1]}('${m[2]}')`);
          }
        }
      }
    };
    walk(src);
    expect(bypass).toEqual([]);
  });
});
