import { describe, expect, it } from 'vitest';
import { buildTree, toggleSelection, topMost, trashUnits } from './folder-tree.js';

const paths = ['docs', 'docs/a.md', 'docs/sub', 'docs/sub/c.md', 'notes.txt'];

describe('folder tree selection', () => {
  it('selecting a directory selects its subtree; unselecting a child unselects its ancestors', () => {
    const all = toggleSelection(new Set(), paths, 'docs', true);
    expect([...all].sort()).toEqual(['docs', 'docs/a.md', 'docs/sub', 'docs/sub/c.md']);
    const less = toggleSelection(all, paths, 'docs/sub/c.md', false);
    expect([...less].sort()).toEqual(['docs/a.md']);
    expect([...toggleSelection(all, paths, 'docs/sub', false)].sort()).toEqual(['docs/a.md']);
  });

  it('trashes only the top-most selected paths', () => {
    expect(topMost(new Set(['docs', 'docs/a.md', 'docs/sub/c.md', 'notes.txt']))).toEqual(['docs', 'notes.txt']);
    expect(topMost(new Set(['docs/a.md', 'docs/sub/c.md']))).toEqual(['docs/a.md', 'docs/sub/c.md']);
    expect(topMost(new Set(['doc', 'docs/a.md']))).toEqual(['doc', 'docs/a.md']);
  });

  it('builds a tree with missing parents made up, directories first', () => {
    const tree = buildTree([
      { path: 'z.txt', kind: 'file' },
      { path: 'a/b/c.txt', kind: 'file' },
    ]);
    expect(tree.map((n) => [n.path, n.kind])).toEqual([
      ['a', 'directory'],
      ['z.txt', 'file'],
    ]);
    expect(tree[0]?.children[0]?.children[0]?.path).toBe('a/b/c.txt');
  });

  it('restores trash by unit: the row no row of the same deletion contains', () => {
    const rows = [
      { path: 'docs', deletedAt: 5 },
      { path: 'docs/a.md', deletedAt: 5 },
      { path: 'docs/a.md', deletedAt: 3 },
    ];
    expect(trashUnits(rows)).toEqual([rows[0], rows[2]]);
  });
});
