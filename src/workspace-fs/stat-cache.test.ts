import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Sha256Hex } from '../core/hash.js';
import { type DirIdentity, RACY_WINDOW_MS, readStatCacheBase, StatCache, StatCacheBuilder, type StatIdentity } from './stat-cache.js';

const sha = (c: string): Sha256Hex => c.repeat(64) as Sha256Hex;
const NOW = 1_800_000_000_000;
const stat = (n: number): StatIdentity => ({
  size: n,
  mtimeMs: NOW - 5000 - n + 0.25,
  ctimeMs: NOW - 4000 + n / 3,
  ino: 1000 + n,
  mode: 0o644,
});
const dirId = (n: number): DirIdentity => ({
  exactMtimeMs: NOW - 9000 + n / 7,
  ctimeMs: NOW - 9000,
  mode: 0o755,
  namesHash: `${n}`.padStart(16, '0'),
});

let dir: string;
let file: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-stat-cache-'));
  file = path.join(dir, 'cache.tsv');
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('StatCache', () => {
  it('finds a file by path and stat, a directory by identity, and nothing once either has moved', () => {
    const b = new StatCacheBuilder(NOW);
    b.addFile('a/x', stat(1), sha('1'), [sha('1')]);
    b.addFile('a/y', stat(2), sha('2'), [sha('3'), sha('4')]);
    b.addFile('a/empty', stat(0), sha('5'), []);
    b.addDir('a', dirId(1), sha('6'));
    b.save(file, 'ck1');
    const cache = StatCache.load(file);
    expect(cache.base).toBe('ck1');
    expect(cache.lookup('a/x', stat(1), NOW)).toMatchObject({ sha256: sha('1'), chunks: [sha('1')], size: 1 });
    expect(cache.lookup('a/y', stat(2), NOW)).toMatchObject({ sha256: sha('2'), chunks: [sha('3'), sha('4')] });
    expect(cache.lookup('a/empty', stat(0), NOW)?.chunks).toEqual([]);
    expect(cache.vouches('a/y', stat(2), NOW)).toBe(true);
    expect(cache.idsAt('a/y')).toEqual({ sha256: sha('2'), chunks: [sha('3'), sha('4')] });
    expect(cache.treeOf('a', dirId(1))).toBe(sha('6'));
    // Each part of the identity counts; an unknown path or a racy file is no hit.
    for (const moved of [{ size: 9 }, { mtimeMs: NOW - 1 - 9000 }, { ctimeMs: 5 }, { ino: 7 }, { mode: 0o755 }]) {
      expect(cache.lookup('a/x', { ...stat(1), ...moved }, NOW)).toBeUndefined();
      expect(cache.vouches('a/x', { ...stat(1), ...moved }, NOW)).toBe(false);
    }
    expect(cache.lookup('a/x', stat(1), stat(1).mtimeMs + RACY_WINDOW_MS)).toBeUndefined();
    expect(cache.lookup('a/z', stat(1), NOW)).toBeUndefined();
    expect(cache.idsAt('a/z')).toBeUndefined();
    expect(cache.treeOf('a', { ...dirId(1), namesHash: '0'.repeat(16) })).toBeUndefined();
    expect(cache.treeOf('b', dirId(1))).toBeUndefined();
    // A hit carries its line as stored, which a builder carries over unchanged.
    const carried = new StatCacheBuilder(NOW);
    carried.add('a/y', cache.lookup('a/y', stat(2), NOW) as never);
    carried.save(file, 'ck2');
    expect(StatCache.load(file).lookup('a/y', stat(2), NOW)?.chunks).toEqual([sha('3'), sha('4')]);
  });

  it('reads a file grown by appends (and a cache that took them in) as its last line per path and its last header', () => {
    const first = new StatCacheBuilder(NOW);
    for (let i = 0; i < 50; i += 1) first.addFile(`f${i}`, stat(i), sha('1'), [sha('1')]);
    first.addDir('', dirId(1), sha('a'));
    first.save(file, 'ck1');
    const held = StatCache.load(file);
    for (const [round, base] of ['ck2', 'ck3'].entries()) {
      const grow = new StatCacheBuilder(NOW, false);
      grow.addFile(`f${round}`, stat(100 + round), sha('2'), [sha('2')]);
      grow.addFile(`new${round}`, stat(200 + round), sha('3'), [sha('4'), sha('5')]);
      grow.addDir('', dirId(2 + round), sha('b'));
      const text = grow.appendTo(file, base);
      expect(text).toBeDefined();
      held.absorb(base, text as string);
    }
    expect(readStatCacheBase(file)).toBe('ck3');
    for (const cache of [StatCache.load(file), held]) {
      expect(cache.base).toBe('ck3');
      // The later line wins: the old stat of f0 and f1 no longer matches, the new one does.
      expect(cache.lookup('f0', stat(0), NOW)).toBeUndefined();
      expect(cache.lookup('f0', stat(100), NOW)?.sha256).toBe(sha('2'));
      expect(cache.vouches('f1', stat(101), NOW)).toBe(true);
      expect(cache.lookup('f49', stat(49), NOW)?.sha256).toBe(sha('1'));
      expect(cache.idsAt('new1')).toEqual({ sha256: sha('3'), chunks: [sha('4'), sha('5')] });
      expect(cache.treeOf('', dirId(1))).toBeUndefined();
      expect(cache.treeOf('', dirId(3))).toBe(sha('b'));
      expect(cache.size).toBe(53);
    }
  });

  it('reads a cut append as the header before it names, and a damaged line as no hit', () => {
    const b = new StatCacheBuilder(NOW);
    b.addFile('x', stat(1), sha('1'), [sha('1')]);
    b.save(file, 'ck1');
    const x = fs.readFileSync(file, 'utf8').split('\n')[1] as string;
    // An append cut before its header: the file still names ck1, and the cut line reads as a damaged one.
    fs.appendFileSync(file, `${x.slice(0, x.length - 10)}\ny\tnot a line\n\u0001\tdamaged`);
    const cache = StatCache.load(file);
    expect(cache.base).toBe('ck1');
    expect(cache.lookup('x', stat(1), NOW)).toBeUndefined();
    expect(cache.vouches('x', stat(1), NOW)).toBe(true);
    expect(cache.idsAt('x')).toBeUndefined();
    expect(cache.lookup('y', stat(1), NOW)).toBeUndefined();
    expect(cache.idsAt('y')).toBeUndefined();
    expect(cache.treeOf('', dirId(1))).toBeUndefined();
    fs.writeFileSync(file, 'not a cache\nx\t1\n');
    expect(StatCache.load(file).size).toBe(0);
    expect(StatCache.load(path.join(dir, 'missing')).base).toBeUndefined();
  });

  it('may grow until it holds more than two lines per file of the scan, plus a slack', () => {
    const b = new StatCacheBuilder(NOW);
    for (let i = 0; i < 1500; i += 1) b.addFile(`f${i}`, stat(i), sha('1'), [sha('1')]);
    b.save(file, 'ck1');
    const cache = StatCache.load(file);
    expect(cache.mayGrow(250)).toBe(true);
    expect(cache.mayGrow(249)).toBe(false);
  });
});
