import { InputError } from '../errors.js';

/**
 * Keyset pagination shared by every listing: a page ends at its last row, and the cursor is
 * that row's sort key (for example `[createdAt, id]`), JSON in base64url so clients treat it
 * as opaque. The next page asks for the rows strictly after the key in the listing's order,
 * so a row inserted while a client pages is never returned twice and no existing row is
 * skipped (an offset would shift under inserts). The same encoding as the work-folder
 * listing's cursor (`[path, id]`).
 */

/** Rows per page when the caller names no `limit`. */
export const DEFAULT_PAGE_SIZE = 100;

/** Largest `limit` a caller may ask for. */
export const MAX_PAGE_SIZE = 1000;

/** One component of a sort key. */
export type KeyPart = string | number;

/** The type of each component of a listing's sort key, in order. */
export type KeyShape = readonly ('string' | 'number')[];

/** The key of listings ordered by creation: `[createdAt, id]`. */
export const CREATED_KEY = ['number', 'string'] as const;

/** The key type {@link KeyShape} `S` describes. */
export type KeyOf<S extends KeyShape> = { -readonly [I in keyof S]: S[I] extends 'number' ? number : string };

/** One page of a listing. */
export interface Page<T> {
  readonly items: T[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  readonly nextCursor: string | null;
}

/** What a caller asks of a listing. */
export interface PageRequest {
  /** At most this many rows; default {@link DEFAULT_PAGE_SIZE}, at most {@link MAX_PAGE_SIZE}. */
  readonly limit?: number | undefined;
  /** The `nextCursor` of the previous page. Malformed, or of another key shape: `INVALID_INPUT`. */
  readonly cursor?: string | undefined;
}

/** The cursor of a page that ended at the row whose sort key is `key`. */
export function encodePageCursor(key: readonly KeyPart[]): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

/**
 * The sort key inside `cursor`, checked against `shape`: anything that is not a cursor this
 * listing handed out (bad base64url, bad JSON, wrong arity or types) is `INVALID_INPUT` with
 * data `{field: 'cursor'}`.
 */
export function decodePageCursor<S extends KeyShape>(cursor: string, shape: S): KeyOf<S> {
  let value: unknown;
  try {
    // Node's base64url decoder skips characters outside the alphabet; refuse them instead.
    value = /^[A-Za-z0-9_-]+$/.test(cursor) ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined;
  } catch {
    value = undefined;
  }
  const valid =
    Array.isArray(value) &&
    value.length === shape.length &&
    value.every((part, i) => (shape[i] === 'number' ? Number.isSafeInteger(part) : typeof part === 'string'));
  if (!valid)
    throw new InputError('INVALID_INPUT', 'cursor is not one this listing handed out: pass a nextCursor as given', {
      data: { field: 'cursor' },
    });
  return value as KeyOf<S>;
}

/**
 * Reads one page: `fetch(after, n)` returns up to `n` rows strictly after `after` (from the
 * start when `undefined`) in the listing's order; `keyOf` is a row's sort key. One row more
 * than the page is read, so the last page says `nextCursor: null` without another query.
 */
export async function readPage<T, S extends KeyShape>(
  request: PageRequest,
  shape: S,
  fetch: (after: KeyOf<S> | undefined, n: number) => Promise<T[]>,
  keyOf: (row: T) => KeyOf<S>,
): Promise<Page<T>> {
  const limit = request.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw new InputError('INVALID_INPUT', `limit must be an integer from 1 to ${MAX_PAGE_SIZE}`, { data: { field: 'limit' } });
  }
  const after = request.cursor === undefined ? undefined : decodePageCursor(request.cursor, shape);
  const rows = await fetch(after, limit + 1);
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last !== undefined ? encodePageCursor(keyOf(last)) : null };
}
