import { describe, expect, it } from 'vitest';
import { listFirst, plural } from './output.js';

describe('plural and listFirst', () => {
  it('puts the noun in the number its count needs', () => {
    expect(plural(0, 'checkpoint')).toBe('0 checkpoints');
    expect(plural(1, 'checkpoint')).toBe('1 checkpoint');
    expect(plural(2, 'checkpoint')).toBe('2 checkpoints');
    expect(plural(1, 'entry', 'entries')).toBe('1 entry');
    expect(plural(3, 'entry', 'entries')).toBe('3 entries');
  });

  it('shows the first N items and says how many more there are', () => {
    expect(listFirst(['a', 'b', 'c'], 2, '  ', (s) => s)).toEqual(['  a', '  b', '  … and 1 more (--json lists all)']);
    expect(listFirst(['a'], 2, '', (s) => s)).toEqual(['a']);
  });
});
