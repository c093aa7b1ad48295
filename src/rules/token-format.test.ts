import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { generateToken } from '../tenants/tokens.js';
import { findSecret } from './secrets.js';
import {
  BASE62_ALPHABET,
  crc32,
  hasTokenChecksum,
  TOKEN_CHECKSUM_CHARS,
  TOKEN_PREFIX,
  TOKEN_RANDOM_CHARS,
  tokenChecksum,
} from './token-format.js';

// Tokens are minted at run time, so this file holds no literal token for a scanner to flag.

describe("Holdfast's token format", () => {
  it('mints holdfast_ + 43 base62 + the base62 CRC32 of the random part, distinct every time', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i += 1) {
      const token = generateToken();
      expect(token).toMatch(/^holdfast_[0-9A-Za-z]{49}$/);
      expect(token.length).toBe(TOKEN_PREFIX.length + TOKEN_RANDOM_CHARS + TOKEN_CHECKSUM_CHARS);
      const random = token.slice(TOKEN_PREFIX.length, -TOKEN_CHECKSUM_CHARS);
      expect(hasTokenChecksum(random, token.slice(-TOKEN_CHECKSUM_CHARS))).toBe(true);
      seen.add(token);
    }
    expect(seen.size).toBe(200);
  });

  it('draws every base62 digit of the random part', () => {
    const digits = new Set<string>();
    for (let i = 0; i < 100; i += 1) for (const c of generateToken().slice(TOKEN_PREFIX.length, -TOKEN_CHECKSUM_CHARS)) digits.add(c);
    expect([...digits].sort().join('')).toBe([...BASE62_ALPHABET].sort().join(''));
  });

  it("computes zlib's CRC32 and writes it in 6 base62 digits, most significant first", () => {
    const texts = ['', 'a', 'holdfast', randomBytes(43).toString('base64url')];
    // `zlib.crc32` exists from Node 20.15 on; the format must not depend on it (engines allow 20.11).
    const reference = (zlib as { crc32?: (data: string) => number }).crc32;
    for (const text of texts) if (reference !== undefined) expect(crc32(text)).toBe(reference(text));
    expect(crc32('123456789')).toBe(0xcbf43926); // the CRC-32/ISO-HDLC check value
    const value = crc32('123456789');
    let decoded = 0;
    for (const c of tokenChecksum('123456789')) decoded = decoded * 62 + BASE62_ALPHABET.indexOf(c);
    expect(decoded).toBe(value);
    expect(tokenChecksum('')).toBe('000000');
  });

  it('is found by the holdfast-token rule, and one changed character of a token is not a token', () => {
    const token = generateToken();
    expect(findSecret(Buffer.from(`HOLDFAST_TOKEN=${token}\n`))).toEqual({ rule: 'holdfast-token', offset: 15 });
    for (const at of [TOKEN_PREFIX.length, TOKEN_PREFIX.length + 20, token.length - 1]) {
      const c = token[at] === 'a' ? 'b' : 'a';
      const changed = token.slice(0, at) + c + token.slice(at + 1);
      expect(findSecret(Buffer.from(`HOLDFAST_TOKEN=${changed}\n`))).toBeUndefined();
    }
  });

  it('finds a token minted before this format (hf_ + 32 random bytes in base64url) by its own rule', () => {
    for (let i = 0; i < 200; i += 1) {
      const legacy = `h${'f'}_${randomBytes(32).toString('base64url')}`;
      expect(findSecret(Buffer.from(`token: "${legacy}"`))).toEqual({ rule: 'holdfast-legacy-token', offset: 8 });
    }
  });
});
