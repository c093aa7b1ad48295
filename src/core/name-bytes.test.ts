import { describe, expect, it } from 'vitest';
import { byteLength, bytesFromText, fsPath, hasByteEscapes, isCanonicalName, showEscapes, textFromBytes } from './name-bytes.js';

/** A small seeded generator, so a failure names the bytes that caused it. */
function* randomByteStrings(seed: number, count: number): Generator<Buffer> {
  let x = seed;
  const next = () => {
    x = (x * 1103515245 + 12345) >>> 0;
    return x >>> 16;
  };
  for (let i = 0; i < count; i += 1) {
    const bytes = Buffer.alloc(1 + (next() % 12));
    // Bias towards bytes that start or continue multi-byte sequences.
    for (let j = 0; j < bytes.length; j += 1) bytes[j] = next() % 3 === 0 ? next() % 0x80 : 0x80 + (next() % 0x80);
    yield bytes;
  }
}

describe('name bytes', () => {
  it('round-trips every byte string exactly, and the text is canonical', () => {
    for (const bytes of randomByteStrings(7, 20_000)) {
      const text = textFromBytes(bytes);
      expect(bytesFromText(text).equals(bytes), bytes.toString('hex')).toBe(true);
      expect(isCanonicalName(text)).toBe(true);
      expect(byteLength(text)).toBe(bytes.length);
      // JSON (trees, wire frames) carries the text unchanged.
      expect(JSON.parse(JSON.stringify(text))).toBe(text);
    }
  });

  it('leaves valid UTF-8 as it is, including astral characters and a real U+FFFD', () => {
    for (const name of ['plain.txt', 'café', '日本語', 'emoji-😀-𐀀', 'rep-\ufffd']) {
      const bytes = Buffer.from(name);
      expect(textFromBytes(bytes)).toBe(name);
      expect(hasByteEscapes(name)).toBe(false);
      expect(fsPath(name)).toBe(name);
      expect(bytesFromText(name).equals(bytes)).toBe(true);
    }
  });

  it('escapes each invalid byte: Latin-1 é, overlong forms, encoded surrogates, stray continuations', () => {
    expect(textFromBytes(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe('caf\udce9');
    expect(textFromBytes(Buffer.from([0xc0, 0xaf]))).toBe('\udcc0\udcaf');
    expect(textFromBytes(Buffer.from([0xed, 0xa0, 0x80]))).toBe('\udced\udca0\udc80');
    expect(textFromBytes(Buffer.from([0x80, 0x41]))).toBe('\udc80A');
    expect(fsPath('dir/caf\udce9')).toEqual(Buffer.from([0x64, 0x69, 0x72, 0x2f, 0x63, 0x61, 0x66, 0xe9]));
    expect(showEscapes('caf\udce9')).toBe('caf\\xE9');
  });

  it('refuses strings no bytes decode to: escapes that spell valid UTF-8, other lone surrogates', () => {
    expect(isCanonicalName('\udcc3\udca9')).toBe(false); // C3 A9 decodes to é
    expect(isCanonicalName('a\ud800')).toBe(false);
    expect(isCanonicalName('b\udc10')).toBe(false);
    expect(isCanonicalName('𐀀')).toBe(true);
  });
});
