import { describe, expect, it } from 'vitest';
import type { Sha256Hex } from '../../core/hash.js';
import type { ScannedDir, ScannedFile } from '../../workspace-fs/scan.js';
import { comparePaths } from '../tree-walk.js';
import type { FileIds } from './tree-builder.js';
import { linkGroups } from './tree-builder.js';

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
