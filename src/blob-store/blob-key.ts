import { InputError } from '../errors.js';
import type { ByteRange } from './blob-store.js';

/** Longest key accepted, in bytes (S3's own limit). */
export const MAX_BLOB_KEY_BYTES = 1024;

const SEGMENT_RE = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
const PREFIX_TAIL_RE = /^[A-Za-z0-9._-]*$/;

/**
 * The one place blob keys are checked. Keys are relative, `/`-separated segments of
 * `A-Z a-z 0-9 . _ -`; no segment is empty or starts with `.` (so `.`/`..` and the
 * drivers' own dot-directories can never be addressed). Throws `INVALID_INPUT`.
 */
export function assertBlobKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_BLOB_KEY_BYTES) {
    throw new InputError(
      'INVALID_INPUT',
      `blob key must be 1-${MAX_BLOB_KEY_BYTES} characters, got ${typeof key === 'string' ? key.length : typeof key}`,
      {
        data: { key },
      },
    );
  }
  for (const segment of key.split('/')) {
    if (!SEGMENT_RE.test(segment)) {
      throw new InputError(
        'INVALID_INPUT',
        `invalid blob key "${key}": segments use A-Z a-z 0-9 . _ - and must not be empty or start with "."`,
        {
          data: { key },
        },
      );
    }
  }
}

/**
 * Checks a list prefix: empty, or whole valid segments followed by an optional partial
 * segment (`packs/`, `packs/a`, `packs/ab/abc`). Throws `INVALID_INPUT`.
 */
export function assertBlobPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || prefix.length > MAX_BLOB_KEY_BYTES) {
    throw new InputError('INVALID_INPUT', `blob prefix must be at most ${MAX_BLOB_KEY_BYTES} characters`, { data: { prefix } });
  }
  if (prefix === '') return;
  const segments = prefix.split('/');
  const tail = segments.pop() ?? '';
  const wholeOk = segments.every((s) => SEGMENT_RE.test(s));
  const tailOk = PREFIX_TAIL_RE.test(tail) && !tail.startsWith('.');
  if (!wholeOk || !tailOk) {
    throw new InputError(
      'INVALID_INPUT',
      `invalid blob prefix "${prefix}": segments use A-Z a-z 0-9 . _ - and must not be empty or start with "."`,
      {
        data: { prefix },
      },
    );
  }
}

/** Checks a byte range's shape (non-negative safe integers). Throws `INVALID_INPUT`. */
export function assertByteRange(range: ByteRange | undefined): void {
  if (range === undefined) return;
  const { offset, length } = range;
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new InputError('INVALID_INPUT', `invalid byte range offset=${offset} length=${length}: both must be non-negative integers`, {
      data: { offset, length },
    });
  }
}

/** The error for a range that starts past the end of an object of `size` bytes. */
export function rangeOutOfBounds(key: string, range: ByteRange, size: number): InputError {
  return new InputError('INVALID_INPUT', `range offset ${range.offset} is past the end of "${key}" (${size} bytes)`, {
    data: { key, offset: range.offset, size },
  });
}
