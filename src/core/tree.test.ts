import { describe, expect, it } from 'vitest';
import { sha256Hex } from './hash.js';
import { bytesFromText, textFromBytes } from './name-bytes.js';
import { compareNames, decodeTree, encodeTree, type TreeEntry } from './tree.js';

const h = (s: string) => sha256Hex(s);
const entries: TreeEntry[] = [
  { name: 'zeta', type: 'dir', mode: 0o755, mtimeMs: 5, tree: h('t') },
  { name: 'Alpha.txt', type: 'file', mode: 0o644, size: 3, mtimeMs: 1_700_000_000_123, sha256: h('abc'), chunks: [h('abc')] },
  { name: 'é', type: 'symlink', target: 'zeta/x', mtimeMs: 9 },
  { name: 'empty', type: 'file', mode: 0o755, size: 0, mtimeMs: 0, sha256: h(''), chunks: [] },
];

describe('tree objects', () => {
  it('are canonical: order of input entries and extra keys do not change the id', () => {
    const a = encodeTree(entries);
    const b = encodeTree([...entries].reverse().map((e) => ({ ...e, extra: 'ignored' }) as unknown as TreeEntry));
    expect(b.id).toBe(a.id);
    expect(b.bytes.equals(a.bytes)).toBe(true);
    expect(decodeTree(a.id, a.bytes).map((e) => e.name)).toEqual(['Alpha.txt', 'empty', 'zeta', 'é']);
  });

  it('round-trip every entry type', () => {
    const { id, bytes } = encodeTree(entries);
    const sorted = decodeTree(id, bytes);
    expect(sorted).toEqual([entries[1], entries[3], entries[0], entries[2]]);
  });

  it('reject bytes that do not match their id', () => {
    const { id, bytes } = encodeTree(entries);
    const flipped = Buffer.from(bytes);
    flipped[10] = (flipped[10] ?? 0) ^ 1;
    expect(() => decodeTree(id, flipped)).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
  });

  it.each([
    ['a parent segment', { name: '..', type: 'dir', mode: 0o755, mtimeMs: 0, tree: h('x') }],
    ['a slash', { name: 'a/b', type: 'symlink', target: 'x', mtimeMs: 0 }],
    ['a reserved name', { name: '.holdfast', type: 'dir', mode: 0o755, mtimeMs: 0, tree: h('x') }],
    ['a bad hash', { name: 'f', type: 'file', mode: 0o644, size: 1, mtimeMs: 0, sha256: 'nothex', chunks: [] }],
    ['chunks that contradict the size', { name: 'f', type: 'file', mode: 0o644, size: 0, mtimeMs: 0, sha256: h(''), chunks: [h('x')] }],
    ['an unknown type', { name: 'f', type: 'socket', mtimeMs: 0 }],
    ['a setuid file', { name: 'f', type: 'file', mode: 0o4755, size: 1, mtimeMs: 0, sha256: h('x'), chunks: [h('x')] }],
    ['a setgid file', { name: 'f', type: 'file', mode: 0o2755, size: 1, mtimeMs: 0, sha256: h('x'), chunks: [h('x')] }],
    ['a sticky directory', { name: 'tmp', type: 'dir', mode: 0o1777, mtimeMs: 0, tree: h('x') }],
    ['a file type in the mode', { name: 'f', type: 'file', mode: 0o100644, size: 1, mtimeMs: 0, sha256: h('x'), chunks: [h('x')] }],
    [
      'too many chunks for the size',
      { name: 'f', type: 'file', mode: 0o644, size: 2, mtimeMs: 0, sha256: h('x'), chunks: [h('a'), h('b')] },
    ],
    [
      'too few chunks for the size',
      { name: 'f', type: 'file', mode: 0o644, size: 5 * 1024 * 1024, mtimeMs: 0, sha256: h('x'), chunks: [h('a')] },
    ],
    ['an absolute symlink', { name: 'l', type: 'symlink', target: '/etc/passwd', mtimeMs: 0 }],
    ['a symlink climbing after a name', { name: 'l', type: 'symlink', target: 'up/../..', mtimeMs: 0 }],
    ['a symlink into a reserved name', { name: 'l', type: 'symlink', target: '.holdfast/x', mtimeMs: 0 }],
  ])('reject an entry with %s even when the hash matches', (_what, bad) => {
    const bytes = Buffer.from(JSON.stringify({ v: 1, entries: [bad] }));
    expect(() => decodeTree(sha256Hex(bytes), bytes)).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
  });

  it('reject unsorted or duplicate entries', () => {
    const e1 = { name: 'b', type: 'symlink', target: 'x', mtimeMs: 0 };
    const e2 = { name: 'a', type: 'symlink', target: 'x', mtimeMs: 0 };
    for (const list of [
      [e1, e2],
      [e2, e2],
    ]) {
      const bytes = Buffer.from(JSON.stringify({ v: 1, entries: list }));
      expect(() => decodeTree(sha256Hex(bytes), bytes)).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
    }
  });

  it('reject non-canonical bytes for valid entries (extra keys, other key order, whitespace)', () => {
    const good = { name: 'f', type: 'symlink', target: 'x', mtimeMs: 0 };
    for (const bytes of [
      Buffer.from(JSON.stringify({ v: 1, entries: [{ ...good, extra: 1 }] })),
      Buffer.from(JSON.stringify({ v: 1, entries: [{ type: 'symlink', name: 'f', target: 'x', mtimeMs: 0 }] })),
      Buffer.from(JSON.stringify({ v: 1, entries: [good] }, null, 1)),
    ]) {
      expect(() => decodeTree(sha256Hex(bytes), bytes)).toThrow(expect.objectContaining({ code: 'INTEGRITY' }));
    }
  });

  it('refuse to encode what decoding would refuse', () => {
    const setuid = { ...entries[1], mode: 0o4755 } as TreeEntry;
    const escaping: TreeEntry = { name: 'l', type: 'symlink', target: '/etc', mtimeMs: 0 };
    const twice = [entries[0], entries[0]] as TreeEntry[];
    for (const list of [[setuid], [escaping], twice]) {
      expect(() => encodeTree(list)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });
});

describe('compareNames', () => {
  it('orders names exactly as their bytes, with and without surrogates, escapes and astral characters', () => {
    const pieces = [
      'a',
      'B',
      'z',
      '~',
      '\u00e9',
      '\u00ff',
      '\u0100',
      '\u07ff',
      '\u0800',
      '\ud7ff',
      '\ue000',
      '\uffff',
      '\u{1f600}',
      '\u{10000}',
    ];
    const names = [
      ...pieces,
      textFromBytes(Uint8Array.of(0x61, 0xff)),
      textFromBytes(Uint8Array.of(0xc3)),
      textFromBytes(Uint8Array.of(0x80)),
    ];
    for (const x of pieces) for (const y of pieces) names.push(x + y, `${x}a${y}`);
    for (const a of names) {
      for (const b of names) {
        expect(Math.sign(compareNames(a, b))).toBe(Math.sign(Buffer.compare(bytesFromText(a), bytesFromText(b))));
      }
    }
  });
});
