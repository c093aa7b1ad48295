import { describe, expect, it } from 'vitest';
import type { ScannedDir, ScannedEntry, ScannedFile } from '../../../workspace-fs/scan.js';
import { scanDelta } from './scan-delta.js';

function file(p: string, extra: Partial<ScannedFile> = {}): ScannedFile {
  return { type: 'file', name: p.slice(p.lastIndexOf('/') + 1), path: p, mode: 0o644, size: 3, mtimeMs: 10, ctimeMs: 10, ino: 1, ...extra };
}

function dir(p: string, children: ScannedEntry[], extra: Partial<ScannedDir> = {}): ScannedDir {
  const name = p.slice(p.lastIndexOf('/') + 1);
  return { type: 'dir', name, path: p, mode: 0o755, mtimeMs: 5, exactMtimeMs: 5.5, ctimeMs: 5.5, children, ...extra };
}

/** The same tree, built anew (a second scan of an unchanged directory). */
const tree = (f: Partial<ScannedFile> = {}, top: Partial<ScannedDir> = {}): ScannedDir =>
  dir(
    '',
    [
      dir('a', [file('a/x'), dir('a/b', [file('a/b/y', f)])]),
      dir('c', [file('c/z'), { type: 'symlink', name: 'l', path: 'c/l', target: 'z', mtimeMs: 1 }]),
      file('top'),
    ],
    top,
  );

describe('scanDelta', () => {
  it('an identical tree is one stub root, and no file is sent', () => {
    const d = scanDelta(tree(), tree());
    expect(d.root).toEqual({ type: 'dir', name: '', same: true });
    expect(d.sent).toEqual([]);
  });

  it.each([
    ['ctime', { ctimeMs: 11 }],
    ['inode', { ino: 2 }],
    ['size', { size: 4 }],
    ['mtime', { mtimeMs: 11 }],
    ['mode', { mode: 0o755 }],
    ['a new hard link', { dev: 3 }],
  ])('a file whose %s differs expands its directories; every unchanged sibling subtree stays a stub', (_what, change) => {
    const d = scanDelta(tree(change), tree());
    const root = d.root as ScannedDir;
    expect(root.children.map((c) => [c.name, 'same' in c])).toEqual([
      ['a', false],
      ['c', true],
      ['top', false],
    ]);
    const a = root.children[0] as ScannedDir;
    expect(a.children.map((c) => [c.name, 'same' in c])).toEqual([
      ['x', false],
      ['b', false],
    ]);
    expect(d.sent.map((f) => f.path).sort()).toEqual(['a/b/y', 'a/x', 'top']);
  });

  it('an added, removed or renamed entry, or a directory stat, expands; a new directory travels whole', () => {
    const before = tree();
    const renamed = dir('', [dir('a2', (before.children[0] as ScannedDir).children), before.children[1] as ScannedEntry, file('top')]);
    const d = scanDelta(renamed, before);
    const names = (d.root as ScannedDir).children.map((c) => [c.name, 'same' in c]);
    expect(names).toEqual([
      ['a2', false],
      ['c', true],
      ['top', false],
    ]);
    // A directory with no earlier one at its path has no stub anywhere under it.
    expect(JSON.stringify((d.root as ScannedDir).children[0])).not.toContain('"same"');
    expect(d.sent.map((f) => f.path).sort()).toEqual(['a/b/y', 'a/x', 'top']);
    expect('same' in scanDelta(tree({}, { exactMtimeMs: 6 }), tree()).root).toBe(false);
    const symlinkMoved = tree();
    (symlinkMoved.children[1] as ScannedDir).children[1] = { type: 'symlink', name: 'l', path: 'c/l', target: 'top', mtimeMs: 1 };
    expect(((scanDelta(symlinkMoved, tree()).root as ScannedDir).children[1] as { same?: boolean }).same).toBeUndefined();
  });
});
