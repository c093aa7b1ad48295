import { describe, expect, it } from 'vitest';
import { ScanTally } from './scan-limits.js';

const limits = { maxFileBytes: 1024, maxEntries: 100 };

describe('ScanTally.addSymlink', () => {
  it('keeps a relative target that stays inside as it is, with no report', () => {
    const tally = new ScanTally(limits, '/ws', '/ws');
    expect(tally.addSymlink('x/l', '../a/b')).toBe('../a/b');
    expect(tally.excluded).toEqual([]);
    expect(tally.symlinks).toBe(1);
  });

  it.each([
    ['x/l', '/ws/a/b', '../a/b'],
    ['l', '/ws/a', 'a'],
    ['l', '/ws', '.'],
    ['x/y/l', '/ws/./x/../a//b', '../../a/b'],
    ['x/l', '/ws/x', '.'],
  ])('stores %s -> %s as %s and reports it', (link, target, stored) => {
    const tally = new ScanTally(limits, '/ws', '/ws/');
    expect(tally.addSymlink(link, target)).toBe(stored);
    expect(tally.excluded).toEqual([{ path: link, reason: 'symlink-made-relative', rule: target }]);
    expect(tally.symlinks).toBe(1);
  });

  it.each([['/etc/passwd'], ['/wsx/a'], ['/ws/../etc'], ['/'], ['/ws/.holdfast/x']])(
    'leaves out the absolute target %s (symlink-escape)',
    (target) => {
      const tally = new ScanTally(limits, '/ws', '/ws');
      expect(tally.addSymlink('l', target)).toBeUndefined();
      expect(tally.excluded.map((e) => e.reason)).toEqual(['symlink-escape']);
      expect(tally.symlinks).toBe(0);
    },
  );

  it('without a root every absolute target escapes', () => {
    const tally = new ScanTally(limits, 'the sandbox');
    expect(tally.addSymlink('l', '/ws/a')).toBeUndefined();
    expect(tally.excluded.map((e) => e.reason)).toEqual(['symlink-escape']);
  });

  it('makes targets under the filesystem root relative when the root is /', () => {
    const tally = new ScanTally(limits, '/', '/');
    expect(tally.addSymlink('x/l', '/a')).toBe('../a');
  });
});
