/**
 * File names are bytes on Linux; Holdfast's paths are strings. This module is the one
 * bijection between them, so a name that is not valid UTF-8 is stored and restored exactly
 * instead of being mangled into U+FFFD (which then names no file at all).
 *
 * The mapping ("byte escapes", as Python's `surrogateescape`): valid UTF-8 decodes as usual;
 * every byte that is not part of a valid UTF-8 sequence becomes the lone surrogate
 * U+DC80..U+DCFF (byte 0x80..0xFF; bytes below 0x80 are always valid). Lone surrogates never
 * come out of valid UTF-8, so the two kinds of characters cannot be confused, and
 * `JSON.stringify` writes them as `\udcXX` escapes: tree objects and wire frames stay ASCII
 * there, and `JSON.parse` gives the same string back.
 *
 * Not every string is the image of some bytes: `"\udcc3\udca9"` encodes to `C3 A9`, which
 * decodes to `é`. {@link isCanonicalName} is the check that a string came from bytes; tree
 * validation applies it, so two different strings can never name the same file.
 */

/** Matches a byte escape (U+DC80..U+DCFF) anywhere in a string. */
const ESCAPE_RE = /[\udc80-\udcff]/u;
/** Matches a lone surrogate (with the `u` flag a surrogate pair is one code point and does not match). */
const LONE_SURROGATE_RE = /[\ud800-\udfff]/u;

/** True when `text` holds at least one byte escape, i.e. names bytes that are not valid UTF-8. */
export function hasByteEscapes(text: string): boolean {
  return ESCAPE_RE.test(text);
}

/** Length of the valid UTF-8 sequence starting at `i`, or 0 when the byte there starts none. */
function sequenceLength(bytes: Uint8Array, i: number): number {
  const b0 = bytes[i] as number;
  if (b0 < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf): boolean => {
    const b = bytes[i + k];
    return b !== undefined && b >= lo && b <= hi;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    // E0 needs A0..BF (no overlong forms); ED needs 80..9F (no encoded surrogates).
    const lo = b0 === 0xe0 ? 0xa0 : 0x80;
    const hi = b0 === 0xed ? 0x9f : 0xbf;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    // F0 needs 90..BF (no overlong forms); F4 needs 80..8F (nothing above U+10FFFF).
    const lo = b0 === 0xf0 ? 0x90 : 0x80;
    const hi = b0 === 0xf4 ? 0x8f : 0xbf;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

/** The string for a name's (or a path's) raw bytes: UTF-8 where valid, a byte escape for every other byte. */
export function textFromBytes(bytes: Uint8Array): string {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fast = buf.toString('utf8');
  // A decode without U+FFFD was valid UTF-8; a real U+FFFD (EF BF BD) takes the slow path and comes back as itself.
  if (!fast.includes('\ufffd')) return fast;
  let out = '';
  let start = 0;
  for (let i = 0; i < buf.length; ) {
    const n = sequenceLength(buf, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out += buf.toString('utf8', start, i) + String.fromCharCode(0xdc00 + (buf[i] as number));
    i += 1;
    start = i;
  }
  return out + buf.toString('utf8', start);
}

/** The raw bytes a name's (or a path's) string stands for: the inverse of {@link textFromBytes}. */
export function bytesFromText(text: string): Buffer {
  if (!hasByteEscapes(text)) return Buffer.from(text);
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i += 1; // a surrogate pair is one character, never an escape
      continue;
    }
    if (c < 0xdc80 || c > 0xdcff) continue;
    parts.push(Buffer.from(text.slice(start, i)), Buffer.of(c - 0xdc00));
    start = i + 1;
  }
  parts.push(Buffer.from(text.slice(start)));
  return Buffer.concat(parts);
}

/** Length in bytes of the name or path `text` stands for. */
export function byteLength(text: string): number {
  return hasByteEscapes(text) ? bytesFromText(text).length : Buffer.byteLength(text);
}

/**
 * True when `text` is exactly what {@link textFromBytes} gives for some bytes: no surrogate
 * other than byte escapes, and no run of escapes that would decode as valid UTF-8.
 */
export function isCanonicalName(text: string): boolean {
  if (!LONE_SURROGATE_RE.test(text)) return true;
  return textFromBytes(bytesFromText(text)) === text;
}

/**
 * What to hand to `fs` for a path that may hold byte escapes: the string itself when it has
 * none (the common case, no copy), else its raw bytes. Every `fs` call on a workspace path
 * goes through this.
 */
export function fsPath(text: string): string | Buffer {
  return hasByteEscapes(text) ? bytesFromText(text) : text;
}

/** `text` with each byte escape shown as `\xNN`, for reports and messages. */
export function showEscapes(text: string): string {
  return hasByteEscapes(text)
    ? text.replace(/[\udc80-\udcff]/gu, (c) => `\\x${(c.charCodeAt(0) - 0xdc00).toString(16).toUpperCase().padStart(2, '0')}`)
    : text;
}
