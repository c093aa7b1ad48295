import { describe, expect, it } from 'vitest';
import { attachmentDisposition, parseRange, resolveRange } from './work-folders-content.js';

describe('parseRange', () => {
  it('reads the three single-range forms', () => {
    expect(parseRange('bytes=0-0')).toEqual({ start: 0, end: 0 });
    expect(parseRange('bytes=10-')).toEqual({ start: 10 });
    expect(parseRange('bytes=-5')).toEqual({ suffix: 5 });
    expect(parseRange(' bytes=3-9 ')).toEqual({ start: 3, end: 9 });
  });

  it('ignores what it does not serve: none, several ranges, other units, reversed or malformed ones', () => {
    for (const header of [
      undefined,
      '',
      'bytes=0-1,3-4',
      'items=0-1',
      'bytes=5-2',
      'bytes=abc',
      'bytes=-',
      'bytes=1-2-3',
      `bytes=${'9'.repeat(20)}-`,
    ]) {
      expect(parseRange(header), String(header)).toBeUndefined();
    }
  });
});

describe('resolveRange', () => {
  it('clips to the file and turns a suffix into an offset', () => {
    expect(resolveRange({ start: 2, end: 5 }, 10)).toEqual({ offset: 2, length: 4 });
    expect(resolveRange({ start: 2, end: 500 }, 10)).toEqual({ offset: 2, length: 8 });
    expect(resolveRange({ start: 9 }, 10)).toEqual({ offset: 9, length: 1 });
    expect(resolveRange({ suffix: 3 }, 10)).toEqual({ offset: 7, length: 3 });
    expect(resolveRange({ suffix: 30 }, 10)).toEqual({ offset: 0, length: 10 });
  });

  it('is unsatisfiable past the end, for an empty suffix and on an empty file', () => {
    expect(resolveRange({ start: 10 }, 10)).toBeNull();
    expect(resolveRange({ suffix: 0 }, 10)).toBeNull();
    expect(resolveRange({ start: 0 }, 0)).toBeNull();
    expect(resolveRange({ suffix: 4 }, 0)).toBeNull();
  });
});

describe('attachmentDisposition', () => {
  it('names the last segment, with a safe ASCII fallback and the exact UTF-8 name', () => {
    expect(attachmentDisposition('a/b/report.pdf')).toBe(`attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`);
    expect(attachmentDisposition('x/"; evil=1\r\n.txt')).toBe(
      `attachment; filename="___evil_1__.txt"; filename*=UTF-8''%22%3B%20evil%3D1%0D%0A.txt`,
    );
    expect(attachmentDisposition("日本'(x)*")).toBe(`attachment; filename="____x__"; filename*=UTF-8''%E6%97%A5%E6%9C%AC%27%28x%29%2A`);
  });
});
