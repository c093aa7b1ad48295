import { describe, expect, it } from 'vitest';
import { resolveWithin, splitRelativePath, symlinkStaysInside } from './paths.js';

describe('workspace paths', () => {
  it('accept relative POSIX paths and resolve them inside the root', () => {
    expect(splitRelativePath('src/é/a.ts')).toEqual(['src', 'é', 'a.ts']);
    expect(resolveWithin('/w', 'a/b')).toBe('/w/a/b');
  });

  it.each(['', '/etc/passwd', 'a//b', './a', 'a/..', '../x', 'a/./b', 'bad\nname', 'x/.holdfast/y', `${'n'.repeat(256)}`, 'a/'])(
    'reject %j with INVALID_PATH',
    (bad) => {
      expect(() => splitRelativePath(bad)).toThrow(expect.objectContaining({ code: 'INVALID_PATH' }));
    },
  );

  it('tell symlinks that stay inside the root from those that escape', () => {
    expect(symlinkStaysInside('a/link', 'b')).toBe(true);
    expect(symlinkStaysInside('a/link', '../b')).toBe(true);
    expect(symlinkStaysInside('a/link', '../../b')).toBe(false);
    expect(symlinkStaysInside('link', '/etc/passwd')).toBe(false);
    expect(symlinkStaysInside('link', '.holdfast/x')).toBe(false);
  });
});
