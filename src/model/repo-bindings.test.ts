import { describe, expect, it } from 'vitest';
import { MAX_REPO_BINDINGS, nameFromUrl, parseRepoBindings } from './repo-bindings.js';
import { parseRunBindings } from './run-bindings.js';

describe('parseRepoBindings', () => {
  it('derives names from URLs and makes a collision unique with a stable suffix', () => {
    const input = [
      { url: 'https://example.com/org/app.git', branch: 'task/1' },
      { url: 'ssh://git@example.org/other/app', ref: 'v1.0' },
      { url: 'git@example.com:org/lib.git', name: 'lib' },
    ];
    const first = parseRepoBindings(input);
    expect(first?.map((r) => r.name.slice(0, 4))).toEqual(['app', 'app-', 'lib']);
    expect(first?.[1]?.name).toMatch(/^app-[0-9a-f]{8}$/);
    expect(parseRepoBindings(input)).toEqual(first);
    expect(first?.[0]).toEqual({ name: 'app', url: 'https://example.com/org/app.git', branch: 'task/1' });
    expect(nameFromUrl('https://example.com/')).toBe('example.com');
    expect(nameFromUrl('https:///')).toBe('repo');
  });

  it('rides in run bindings beside collection owners', () => {
    expect(parseRunBindings({ task: 't-1', repos: [{ url: 'git://example.com/r/x.git' }] })).toEqual({
      task: 't-1',
      repos: [{ name: 'x', url: 'git://example.com/r/x.git' }],
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
    ['not a list', { url: 'https://example.com/x' }],
    ['too many', Array.from({ length: MAX_REPO_BINDINGS + 1 }, (_, i) => ({ url: `https://example.com/r${i}` }))],
    ['an ext:: transport', [{ url: 'ext::sh -c touch% /tmp/pwned' }]],
    ['an option as URL', [{ url: '--upload-pack=touch /tmp/x' }]],
    ['a control character', [{ url: 'https://example.com/x\n' }]],
    ['an unknown field', [{ url: 'https://example.com/x', path: '/etc' }]],
    ['a bad name', [{ url: 'https://example.com/x', name: '../x' }]],
    [
      'names used twice',
      [
        { url: 'https://example.com/x', name: 'a' },
        { url: 'https://example.com/y', name: 'a' },
      ],
    ],
    ['a bad branch', [{ url: 'https://example.com/x', branch: 'a..b' }]],
    ['a branch ending .lock', [{ url: 'https://example.com/x', branch: 'a.lock' }]],
    ['an option as ref', [{ url: 'https://example.com/x', ref: '-f' }]],
    ['a long URL', [{ url: `https://example.com/${'x'.repeat(2048)}` }]],
    ['a file: URL', [{ url: 'file:///srv/repos/x.git' }]],
    ['a local path', [{ url: '/srv/repos/x.git' }]],
    ['an fd:: transport', [{ url: 'fd::0' }]],
    ['any transport helper', [{ url: 'anything::https://example.com/x' }]],
    ['a scp-like URL with a shell-looking path', [{ url: 'javascript:alert(1)' }]],
    ['an unknown scheme', [{ url: 'ftp://example.com/x.git' }]],
    ['a URL with a fragment', [{ url: 'https://example.com/x.git#frag' }]],
    ['an option as the ssh user', [{ url: 'ssh://-oProxyCommand@example.com/x.git' }]],
    ['an option as the scp-like user', [{ url: 'a@b@example.com:x.git' }]],
    ['a dot first in the ssh user', [{ url: 'ssh://.x@example.com/x.git' }]],
    ['an option as a ref, after a path', [{ url: 'https://example.com/x', ref: 'a/../-f' }]],
  ])('refuses %s with INVALID_INPUT', (_name, input) => {
    expect(() => parseRepoBindings(input)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});
