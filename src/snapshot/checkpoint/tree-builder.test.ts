import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Sha256Hex } from '../../core/hash.js';
import type { ScannedDir, ScannedFile } from '../../workspace-fs/scan.js';
import { StatCache, StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import { comparePaths } from '../tree-walk.js';
import type { FileIds } from './tree-builder.js';
import { buildTrees, dirIdentityOf, linkGroups } from './tree-builder.js';

const sha = (c: string): Sha256Hex => c.repeat(64);

function file(p: string, ino: number, extra: Partial<ScannedFile> = {}): ScannedFile {
  const name = p.slice(p.lastIndexOf('/') + 1);
  return { type: 'file', name, path: p, mode: 0o644, size: 1, mtimeMs: 1000.5, ctimeMs: 1, ino, dev: 7, ...extra };
}

function dir(p: string, children: ScannedDir['children']): ScannedDir {
  return { type: 'dir', name: p.slice(p.lastIndexOf('/') + 1), path: p, mode: 0o755, mtimeMs: 0, exactMtimeMs: 0, ctimeMs: 0, children };
}

const idsOf = (entries: Array<[string, string]>): Map<string, FileIds> =>
  new Map(entries.map(([p, c]) => [p, { sha256: sha(c), chunks: [sha(c)] }]));

describe('dirIdentityOf', () => {
  it('hashes the names as stat caches on disk hold them: each name in UTF-16 units, then two zero bytes', () => {
    // A cache written by an earlier build keeps matching only while these bytes stay the same.
    const names = ['a', 'b\udc80c', 'é', 'x'.repeat(300)];
    const stream = Buffer.concat(names.flatMap((n) => [Buffer.from(n, 'utf16le'), Buffer.alloc(2)]));
    const d = dir(
      'd',
      names.map((n) => file(`d/${n}`, 1)),
    );
    expect(dirIdentityOf(d).namesHash).toBe(createHash('sha256').update(stream).digest('hex').slice(0, 16));
    expect(dirIdentityOf(dir('e', [])).namesHash).toBe(createHash('sha256').digest('hex').slice(0, 16));
  });
});

describe('linkGroups', () => {
  it('leads a group with the member first in flatten order (segments by bytes, not whole paths)', () => {
    // Byte order of whole paths puts "a-b/x" first ("-" < "/"); a walk of sorted trees meets "a/y" first.
    const root = dir('', [dir('a-b', [file('a-b/x', 5)]), dir('a', [file('a/y', 5)]), file('z', 5)]);
    const leaders = linkGroups(
      root,
      idsOf([
        ['a-b/x', 'a'],
        ['a/y', 'a'],
        ['z', 'a'],
      ]),
    );
    expect([...leaders].sort()).toEqual([
      ['a-b/x', 'a/y'],
      ['z', 'a/y'],
    ]);
    expect(comparePaths('a/y', 'a-b/x')).toBeLessThan(0);
  });

  it('breaks a group whose members differ (changed while read) and ignores one included member', () => {
    const root = dir('', [file('a', 1), file('b', 1), file('c', 2, { mode: 0o600 }), file('d', 2), file('e', 3), file('f', 3)]);
    const leaders = linkGroups(
      root,
      idsOf([
        ['a', 'a'],
        ['b', 'b'],
        ['c', 'c'],
        ['d', 'c'],
        ['e', 'e'],
      ]),
    );
    expect(leaders.size).toBe(0);
  });

  it('keeps files of another device apart, though their inode numbers match', () => {
    const root = dir('', [file('a', 1), file('b', 1, { dev: 8 })]);
    expect(
      linkGroups(
        root,
        idsOf([
          ['a', 'a'],
          ['b', 'a'],
        ]),
      ).size,
    ).toBe(0);
  });
});

describe('buildTrees with the trees of the last build (known)', () => {
  const plain = (p: string, ino: number): ScannedFile => {
    const { dev: _dev, ...f } = file(p, ino);
    return f;
  };
  const reuseOf = (known: ReadonlyMap<ScannedDir, Sha256Hex>, hits: Iterable<string>, encodeAll = false) => ({
    cache: StatCache.empty(),
    hits: new Set(hits),
    next: new StatCacheBuilder(0),
    known,
    built: new Map<ScannedDir, Sha256Hex>(),
    encodeAll,
  });

  it('keeps the id of the very directory object whose files all came from a cache; encodes a new object, a missed file, a hard link, or everything under encodeAll', () => {
    const sub = dir('s', [plain('s/a', 1), { type: 'symlink', name: 'l', path: 's/l', target: 'a', mtimeMs: 0 }]);
    const linked = dir('h', [file('h/x', 9)]);
    const root = dir('', [sub, linked, plain('top', 3)]);
    const ids = idsOf([
      ['s/a', 'a'],
      ['h/x', 'b'],
      ['top', 'c'],
    ]);
    const first = reuseOf(new Map(), []);
    const built = buildTrees(root, ids, first);
    expect(built.reused).toEqual([]);

    // The same objects, every file a hit: the directory with a symlink keeps its id; the one with a
    // linked file does not (which member leads may change), nor, then, the root above it.
    const again = reuseOf(first.built, ['s/a', 'h/x', 'top']);
    const second = buildTrees(root, ids, again);
    expect(second.rootId).toBe(built.rootId);
    expect(second.reused).toEqual([first.built.get(sub)]);
    expect(second.trees.map((t) => t.id)).toEqual([first.built.get(linked), first.built.get(root)]);
    const flat = dir('', [sub, plain('top', 3)]);
    const flatFirst = reuseOf(new Map(), []);
    const flatId = buildTrees(flat, ids, flatFirst).rootId;
    const flatAgain = buildTrees(flat, ids, reuseOf(flatFirst.built, ['s/a', 'top']));
    expect(flatAgain.trees).toEqual([]);
    expect(flatAgain.rootId).toBe(flatId);

    // A file read (not a hit) encodes its directory and every one above it.
    expect(buildTrees(root, ids, reuseOf(first.built, ['h/x', 'top'])).reused).toEqual([]);
    // An equal but new object is not the one built: encoded afresh, to the same id.
    const copy = dir('', [dir('s', [...sub.children]), linked, plain('top', 3)]);
    const fresh = buildTrees(copy, ids, reuseOf(first.built, ['s/a', 'h/x', 'top']));
    expect(fresh.reused).toEqual([]);
    expect(fresh.rootId).toBe(built.rootId);
    expect(buildTrees(root, ids, reuseOf(first.built, ['s/a', 'h/x', 'top'], true)).reused).toEqual([]);
  });
});
