import { describe, expect, it } from 'vitest';
import { ConflictError, ERROR_CODES, HoldfastError, isHoldfastError, NotFoundError, StoreError } from './errors.js';

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
  });
});
