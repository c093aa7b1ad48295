import { describe, expect, it } from 'vitest';
import { planAroundRetained } from './retained-incoming.js';
import { DIRECTORY, signature } from './sync-plan.js';

const file = (sha: string) => signature('file', sha.repeat(64).slice(0, 64), false);

describe('planAroundRetained', () => {
  it('leaves out every change at, under or over a retained entry; a directory above one may still be made', () => {
    const plan = planAroundRetained(
      {
        'locked.txt': file('a'),
        'dir/locked/inner.txt': file('b'),
        dir: DIRECTORY,
        'dir/beside.txt': file('c'),
        'dir/locked': file('d'),
        other: file('e'),
        'dir-sibling/x': file('f'),
      },
      ['dir', 'gone.txt', 'locked.txt/child', 'dir/old.txt', 'dir-sibling'],
      ['locked.txt', 'dir/locked'],
    );
    expect(plan.imports).toEqual({ dir: DIRECTORY, 'dir/beside.txt': file('c'), other: file('e'), 'dir-sibling/x': file('f') });
    expect(plan.removals).toEqual(['gone.txt', 'dir/old.txt', 'dir-sibling']);
  });

  it('a file written over a directory holding a retained entry is left out', () => {
    const plan = planAroundRetained({ dir: file('a') }, [], ['dir/locked.txt']);
    expect(plan).toEqual({ imports: {}, removals: [] });
  });
});
