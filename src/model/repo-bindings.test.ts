import { describe, expect, it } from 'vitest';
import { MAX_REPO_BINDINGS, nameFromUrl, parseRepoBindings } from './repo-bindings.js';
import { parseRunBindings } from './run-bindings.js';

describe('parseRepoBindings', () => {
  it('derives names from URLs and makes a collision unique with a stable suffix', () => {
    const input = [
      { url: 'https://example.com/org/app.git', branch: 'task/1' },
      { url: 'file:///srv/other/app', ref: 'v1.0' },
      { url: 'git@example.com:org/lib.git', name: 'lib' },
    ];
    const first = parseRepoBindings(input);
    expect(first?.map((r) => r.name.slice(0, 4))).toEqual(['app', 'app-', 'lib']);
    expect(first?.[1]?.name).toMatch(/^app-[0-9a-f]{8}$/);
    expect(parseRepoBindings(input)).toEqual(first);
    expect(first?.[0]).toEqual({ name: 'app', url: 'https://example.com/org/app.git', branch: 'task/1' });
    expect(nameFromUrl('https://example.com/')).toBe('example.com');
    expect(nameFromUrl('file:///')).toBe('repo');
  });

  it('rides in run bindings beside collection owners', () => {
    expect(parseRunBindings({ task: 't-1', repos: [{ url: 'file:///r/x.git' }] })).toEqual({
      task: 't-1',
      repos: [{ name: 'x', url: 'file:///r/x.git' }],
    });
    expect(parseRunBindings({ repos: [] })).toBeUndefined();
  });

  it.each([
    ['a token as user name', 'https://ghp_abcdefabcdefabcdefabcdefabcdefabcdef12@github.com/o/r.git'],
    ['a password', 'ssh://git:secret@example.com/o/r.git'],
    ['user and password', 'https://user:pw@example.com/o/r.git'],
  ])('refuses a URL with %s as SECRET_EXCLUDED', (_name, url) => {
    expect(() => parseRepoBindings([{ url }])).toThrow(expect.objectContaining({ code: 'SECRET_EXCLUDED' }));
  });

  it.each([
    ['not a list', { url: 'file:///x' }],
    ['too many', Array.from({ length: MAX_REPO_BINDINGS + 1 }, (_, i) => ({ url: `file:///r${i}` }))],
    ['an ext:: transport', [{ url: 'ext::sh -c touch% /tmp/pwned' }]],
    ['an option as URL', [{ url: '--upload-pack=touch /tmp/x' }]],
    ['a control character', [{ url: 'file:///x\n' }]],
    ['an unknown field', [{ url: 'file:///x', path: '/etc' }]],
    ['a bad name', [{ url: 'file:///x', name: '../x' }]],
    [
      'names used twice',
      [
        { url: 'file:///x', name: 'a' },
        { url: 'file:///y', name: 'a' },
      ],
    ],
    ['a bad branch', [{ url: 'file:///x', branch: 'a..b' }]],
    ['a branch ending .lock', [{ url: 'file:///x', branch: 'a.lock' }]],
    ['an option as ref', [{ url: 'file:///x', ref: '-f' }]],
    ['a long URL', [{ url: `file:///${'x'.repeat(2048)}` }]],
  ])('refuses %s with INVALID_INPUT', (_name, input) => {
    expect(() => parseRepoBindings(input)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});
