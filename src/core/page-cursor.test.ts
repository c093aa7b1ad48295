import { describe, expect, it } from 'vitest';
import { codeOf } from '../../test/support/error-code.js';
import { CREATED_KEY, decodePageCursor, encodePageCursor, readPage } from './page-cursor.js';

describe('page cursors', () => {
  it('round-trip a key as opaque base64url; anything else is INVALID_INPUT', async () => {
    const cursor = encodePageCursor([1712345678901, 'b7e1']);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodePageCursor(cursor, CREATED_KEY)).toEqual([1712345678901, 'b7e1']);
    for (const bad of ['', '!!', `${cursor}=`, encodePageCursor(['x', 'y']), encodePageCursor([1]), encodePageCursor([1.5, 'x'])]) {
      expect(await codeOf(() => decodePageCursor(bad, CREATED_KEY)), bad).toBe('INVALID_INPUT');
    }
  });

  it('reads one row past the page to know whether another follows', async () => {
    const rows = [5, 4, 3, 2, 1];
    const fetch = async (after: [number] | undefined, n: number) => rows.filter((r) => after === undefined || r < after[0]).slice(0, n);
    const first = await readPage({ limit: 2 }, ['number'] as const, fetch, (r) => [r]);
    expect(first.items).toEqual([5, 4]);
    const rest = await readPage({ limit: 3, cursor: first.nextCursor ?? '' }, ['number'] as const, fetch, (r) => [r]);
    expect(rest).toEqual({ items: [3, 2, 1], nextCursor: null });
    expect(await codeOf(readPage({ limit: 0 }, ['number'] as const, fetch, (r) => [r]))).toBe('INVALID_INPUT');
  });
});
