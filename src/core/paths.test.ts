import { describe, expect, it } from 'vitest';
import { posixWithin, resolveWithin, splitRelativePath, symlinkStaysInside, symlinkTargetProblem } from './paths.js';

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

  it('keep the links real trees hold', () => {
    expect(symlinkStaysInside('node_modules/.bin/tsc', '../typescript/bin/tsc')).toBe(true);
    expect(symlinkStaysInside('a/b/link-up', '../../plain.txt')).toBe(true);
    expect(symlinkStaysInside('d/up', '..')).toBe(true);
    expect(symlinkStaysInside('link', './a//b/')).toBe(true);
    expect(symlinkStaysInside('self', '.')).toBe(true);
  });

  it.each([
    ['d/up2', 'up/..', 'climbs after a name: the kernel follows d/up -> .. first, then leaves the root'],
    ['d/x', 'up/../../etc', 'climbs after a name'],
    ['a/b', 'c/./d', 'a "." after a name'],
    ['link', '..', 'climbs above the root'],
    ['a/link', '../..', 'climbs above the root'],
    ['a/link', '../../a/x', 'climbs above the root, even though it lexically comes back'],
    ['link', '/etc/passwd', 'absolute'],
    ['link', '', 'empty'],
    ['link', 'x/.holdfast', 'a reserved segment'],
    ['link', 'bad\nname', 'a control character'],
    ['link', `${'a/'.repeat(2049)}`, 'longer than MAX_PATH_BYTES'],
  ])('refuse %s -> %j (%s)', (link, target) => {
    expect(symlinkStaysInside(link, target)).toBe(false);
  });

  it('tell targets that are never storable from those that depend on where the link is', () => {
    expect(symlinkTargetProblem('../../x')).toBeUndefined();
    expect(symlinkTargetProblem('up/..')).toBeDefined();
    expect(symlinkTargetProblem('/x')).toBeDefined();
  });
});

describe('posixWithin', () => {
  it('is true for the directory itself and what lies below it, false for what climbs out or starts elsewhere', () => {
    expect(posixWithin('/w', '/w')).toBe(true);
    expect(posixWithin('/w/a/b', '/w')).toBe(true);
    expect(posixWithin('/w/..cache', '/w')).toBe(true);
    expect(posixWithin('/w/../etc', '/w')).toBe(false);
    expect(posixWithin('/wx', '/w')).toBe(false);
    expect(posixWithin('/', '/w')).toBe(false);
  });
});
