import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExcludeRules } from './excludes.js';
import { IncludeGates, rebaseGitignoreLine } from './gitignore-rules.js';

describe('rebaseGitignoreLine', () => {
  it.each([
    ['*.log', 'a/b', 'a/b/**/*.log'],
    ['build/', 'a', 'a/**/build/'],
    ['/local.txt', 'a', 'a/local.txt'],
    ['x/*.js', 'a', 'a/x/*.js'],
    ['**/deep', 'a', 'a/**/deep'],
    ['!keep.log', 'a', '!a/**/keep.log'],
    ['name   ', 'a', 'a/**/name'],
    ['name\\ ', 'a', 'a/**/name\\ '],
    ['\\#hash', 'a', 'a/**/\\#hash'],
    ['*.bin', 'we!rd #[1]', 'we\\!rd \\#\\[1\\]/**/*.bin'],
    ['*.log', '', '*.log'],
  ])('rewrites %j from %j as %j', (line, base, expected) => {
    expect(rebaseGitignoreLine(line, base)).toBe(expected);
  });

  it.each(['', '# comment', '!', '/', '   '])('drops %j', (line) => {
    expect(rebaseGitignoreLine(line, 'a')).toBeUndefined();
  });
});

describe('IncludeGates', () => {
  it('open the directories on the way to an anchored pattern, and only those', () => {
    const gates = IncludeGates.compile(['node_modules/@scope/pkg/', '/vendor/*/lib', 'a/**/b']);
    expect(gates?.opensInto('node_modules')).toBe(true);
    expect(gates?.opensInto('node_modules/@scope')).toBe(true);
    expect(gates?.opensInto('node_modules/@scope/pkg')).toBe(false);
    expect(gates?.opensInto('node_modules/other')).toBe(false);
    expect(gates?.opensInto('vendor/x')).toBe(true);
    expect(gates?.opensInto('vendor/x/lib')).toBe(false);
    expect(gates?.opensInto('a/x/y/z')).toBe(true);
    expect(gates?.opensInto('src/node_modules')).toBe(false);
  });

  it('are absent for unanchored, negated and comment patterns', () => {
    expect(IncludeGates.compile(['*.json', 'dist/', '!a/b', '# a/b', '**/x/y'])).toBeUndefined();
  });
});

// A fixture of nested .gitignore files exercising negation, dir-only rules, anchoring, `**`,
// escapes, trailing spaces, CRLF and odd directory names, decided both by `git` and by a walk
// with ExcludeRules. Git is told to ignore any user or system configuration.
const GITIGNORES: Record<string, string> = {
  '.gitignore': [
    '# comment',
    '*.log',
    '!keep.log',
    'build/',
    '/only-root.txt',
    'docs/**/*.tmp',
    'tmp',
    '!tmp/',
    'cache*/',
    'logs/',
    '!logs/keep.txt',
    'dist/*',
    '!dist/keep/',
    'trailing.txt   ',
    '\\#hash.txt\r',
    '',
  ].join('\n'),
  'sub/.gitignore': '!*.log\ngenerated/\n/local.txt\n!build/\nnested/deep/\nx/*.js\n**/deepname\n',
  'sub/inner/.gitignore': '*.txt\n!important.txt\n',
  'b[1]/.gitignore': 'x*\n',
  'we!rd #dir/.gitignore': '*.bin\n',
  'sp ace/.gitignore': '/a.txt\n',
};

const FILES = [
  'a.log',
  'keep.log',
  'src/x.log',
  'src/keep.log',
  'build/out.js',
  'only-root.txt',
  'src/only-root.txt',
  'docs/a.tmp',
  'docs/x/y.tmp',
  'docs/readme.md',
  'tmp',
  'src/tmp/file.txt',
  'cache1/f',
  'cachefile',
  'logs/keep.txt',
  'dist/keep/a.js',
  'dist/other.js',
  'trailing.txt',
  '#hash.txt',
  'sub/app.log',
  'sub/generated/x.js',
  'sub/local.txt',
  'sub/x/local.txt',
  'sub/x/a.js',
  'sub/x/y/a.js',
  'sub/build/out.js',
  'sub/nested/deep/f',
  'sub/nested/other.txt',
  'sub/q/deepname/f',
  'sub/inner/a.txt',
  'sub/inner/important.txt',
  'sub/inner/more/b.txt',
  'sub/inner/x.log',
  'b[1]/xa',
  'b[1]/ya',
  'b[1]/c/xb',
  'we!rd #dir/f.bin',
  'we!rd #dir/f.txt',
  'sp ace/a.txt',
  'sp ace/b/a.txt',
];

function git(cwd: string, args: string[], input?: string): string {
  const env = { ...process.env, HOME: cwd, XDG_CONFIG_HOME: cwd, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
  const result = spawnSync('git', args, { cwd, env, input, encoding: 'utf8' });
  // check-ignore exits 1 when nothing is ignored; anything else is a real failure.
  if (result.status !== 0 && result.status !== 1) throw new Error(`git ${args.join(' ')} failed: ${result.stderr}`);
  return result.stdout;
}

/** Every excluded entry (a directory stands for its subtree) of a walk like the snapshot scanner's. */
function walkExcluded(root: string): Set<string> {
  const rules = ExcludeRules.create({ gitignore: true, cacheExcludes: false });
  const excluded = new Set<string>();
  const walk = (abs: string, rel: string): void => {
    const ignoreFile = path.join(abs, '.gitignore');
    const dirRules = rules.enter(rel, fs.existsSync(ignoreFile) ? fs.readFileSync(ignoreFile, 'utf8') : undefined);
    for (const name of fs.readdirSync(abs).sort()) {
      if (rel === '' && name === '.git') continue;
      const relPath = rel === '' ? name : `${rel}/${name}`;
      const isDir = fs.lstatSync(path.join(abs, name)).isDirectory();
      if (dirRules.match(name, isDir) !== undefined) excluded.add(relPath);
      else if (isDir) walk(path.join(abs, name), relPath);
    }
  };
  walk(root, '');
  return excluded;
}

describe('gitignore semantics against git', () => {
  let root = '';
  afterEach(() => {
    if (root !== '') fs.rmSync(root, { recursive: true, force: true });
  });

  it('excludes exactly what git check-ignore and git ls-files ignore', () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'holdfast-gitignore-'));
    for (const [rel, text] of [...Object.entries(GITIGNORES), ...FILES.map((f) => [f, 'x'] as const)]) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    }
    git(root, ['init', '-q']);
    const dirs = new Set(
      FILES.flatMap((f) =>
        f
          .split('/')
          .slice(0, -1)
          .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
      ),
    );
    const candidates = [...FILES, ...dirs].sort();

    const checkIgnored = new Set(
      git(root, ['check-ignore', '--stdin', '-z'], `${candidates.join('\0')}\0`)
        .split('\0')
        .filter(Boolean),
    );
    const untracked = new Set(git(root, ['ls-files', '--others', '--exclude-standard', '-z']).split('\0').filter(Boolean));
    const excluded = walkExcluded(root);
    const ours = (rel: string): boolean => rel.split('/').some((_, i, parts) => excluded.has(parts.slice(0, i + 1).join('/')));

    const table = (decide: (rel: string) => boolean, paths: readonly string[]) => Object.fromEntries(paths.map((p) => [p, decide(p)]));
    expect(table(ours, candidates)).toEqual(table((p) => checkIgnored.has(p), candidates));
    expect(table(ours, FILES)).toEqual(table((p) => !untracked.has(p), FILES));
    // The fixture means something: both outcomes occur, at several depths.
    expect(FILES.filter(ours).length).toBeGreaterThan(15);
    expect(FILES.filter((p) => !ours(p)).length).toBeGreaterThan(15);
  });
});
