import { describe, expect, it } from 'vitest';
import {
  CACHE_EXCLUDES,
  describeExclusion,
  EXCLUSION_REASONS,
  type ExcludeOptions,
  ExcludeRules,
  type Exclusion,
  SECRET_PATH_KEEP_SUFFIXES,
  SECRET_PATH_RULES,
} from './excludes.js';

/**
 * Decides `path` the way the walker does: enter each ancestor (with its `.gitignore`
 * text, if any), stop at the first excluded ancestor. `isDir` describes the last segment.
 */
function decide(rules: ExcludeRules, path: string, isDir = false, gitignores: Record<string, string> = {}): Exclusion | undefined {
  const segments = path.split('/');
  let dir = '';
  for (let i = 0; i < segments.length; i += 1) {
    const name = segments[i] as string;
    const last = i === segments.length - 1;
    const found = rules.enter(dir, gitignores[dir]).match(name, last ? isDir : true);
    if (found !== undefined || last) return found;
    dir = dir === '' ? name : `${dir}/${name}`;
  }
  return undefined;
}

const create = (options?: ExcludeOptions): ExcludeRules => ExcludeRules.create(options);
const reasonOf = (rules: ExcludeRules, path: string, isDir = false): string | undefined => decide(rules, path, isDir)?.reason;

describe('secret path rules', () => {
  const depths = ['', 'project/', 'a/b/c/'];

  it.each(['.ssh', '.aws', '.gnupg'])('exclude a %s directory at any depth', (name) => {
    for (const at of depths) {
      expect(decide(create(), `${at}${name}`, true)).toEqual({ path: `${at}${name}`, reason: 'secret-path', rule: `${name}/` });
    }
  });

  it.each([
    ['.netrc', '.netrc'],
    ['.git-credentials', '.git-credentials'],
    ['.docker/config.json', '.docker/config.json'],
    ['.pgpass', '.pgpass'],
    ['.pypirc', '.pypirc'],
    ['.kube/config', '.kube/config'],
    ['.terraform.d/credentials.tfrc.json', '.terraform.d/credentials.tfrc.json'],
    ['.azure/msal_token_cache.json', '.azure/msal_token_cache.json'],
    ['.config/gcloud/application_default_credentials.json', 'gcloud/application_default_credentials.json'],
    ['.config/gcloud/credentials.db', 'gcloud/credentials.db'],
    ['.config/gcloud/access_tokens.db', 'gcloud/access_tokens.db'],
    ['.env', '.env'],
    ['.env.local', '.env.*'],
    ['.env.production', '.env.*'],
    ['.env.example.bak', '.env.*'],
    ['id_rsa', 'id_rsa'],
    ['id_dsa', 'id_dsa'],
    ['id_ecdsa', 'id_ecdsa'],
    ['id_ed25519', 'id_ed25519'],
    ['id_ed25519_sk', 'id_ed25519_sk'],
  ])('exclude %s at any depth (rule %s)', (path, rule) => {
    for (const at of depths) expect(decide(create(), `${at}${path}`)).toEqual({ path: `${at}${path}`, reason: 'secret-path', rule });
  });

  it.each([
    '.env.example',
    '.env.sample',
    '.env.template',
    '.env.local.example',
    'id_rsa.pub',
    'id_ed25519.pub',
    'server.pem',
    'tls.key',
    'config.json',
    '.docker/daemon.json',
    'docker/config.json',
    'kube/config',
    '.kube/cache',
    '.config/gcloud/configurations/config_default',
    '.config/gcloud/active_config',
    '.npmrc',
    '.envrc',
    'environment.ts',
  ])('keep %s', (path) => {
    for (const at of depths) expect(decide(create(), `${at}${path}`)).toBeUndefined();
  });

  it('exclude gcloud legacy credentials as a directory', () => {
    expect(decide(create(), '.config/gcloud/legacy_credentials', true)).toEqual({
      path: '.config/gcloud/legacy_credentials',
      reason: 'secret-path',
      rule: 'gcloud/legacy_credentials/',
    });
  });

  it('apply directory rules to directories only', () => {
    expect(decide(create(), 'notes/.ssh', false)).toBeUndefined();
    expect(reasonOf(create(), 'notes/.ssh', true)).toBe('secret-path');
  });

  it('are not overridden by include, cacheExcludes: false or negated user rules', () => {
    const rules = create({ include: ['.env', '.ssh/', '**', '*'], exclude: ['!.env'], cacheExcludes: false });
    expect(reasonOf(rules, '.env')).toBe('secret-path');
    expect(reasonOf(rules, 'x/.ssh', true)).toBe('secret-path');
  });
});

describe('allowSecretPaths', () => {
  it('lets through exactly the listed paths and reports each once', () => {
    const rules = create({ allowSecretPaths: ['config/.env', 'home/.ssh/'] });
    expect(decide(rules, 'config/.env')).toBeUndefined();
    expect(decide(rules, 'config/.env')).toBeUndefined();
    expect(decide(rules, 'home/.ssh', true)).toBeUndefined();
    expect(reasonOf(rules, 'other/.env')).toBe('secret-path');
    expect(reasonOf(rules, '.env')).toBe('secret-path');
    // Inside an allowed directory, each secret path needs its own entry.
    expect(reasonOf(rules, 'home/.ssh/id_rsa')).toBe('secret-path');
    expect(rules.allowances).toEqual([
      { path: 'config/.env', reason: 'secret-path', rule: '.env' },
      { path: 'home/.ssh', reason: 'secret-path', rule: '.ssh/' },
    ]);
  });

  it('treat glob strings literally, so they allow nothing', () => {
    const rules = create({ allowSecretPaths: ['*.env', '**/.env', '.env*', 'config/*', '*', '**', '.ssh/**'] });
    for (const path of ['.env', 'config/.env', 'a/b/.env', '.env.local']) expect(reasonOf(rules, path)).toBe('secret-path');
    expect(reasonOf(rules, '.ssh', true)).toBe('secret-path');
    expect(rules.allowances).toEqual([]);
  });

  it('still apply the later rules to an allowed path', () => {
    const rules = create({ allowSecretPaths: ['.env'], exclude: ['.env'] });
    expect(decide(rules, '.env')).toEqual({ path: '.env', reason: 'user-rule', rule: '.env' });
  });

  it('reject entries that are not relative paths with INVALID_PATH', () => {
    for (const bad of ['/etc/.env', '../.env', 'a//.env', '']) {
      expect(() => create({ allowSecretPaths: [bad] })).toThrow(expect.objectContaining({ code: 'INVALID_PATH' }));
    }
  });
});

describe('cache excludes', () => {
  it.each(CACHE_EXCLUDES.map((rule) => [rule] as const))('exclude %s at any depth by default', (rule) => {
    const dir = rule.slice(0, -1);
    for (const at of ['', 'pkg/', 'a/b/']) {
      expect(decide(create(), `${at}${dir}`, true)).toEqual({ path: `${at}${dir}`, reason: 'cache', rule });
    }
  });

  it('match directories only, and `cache` only inside `.next`', () => {
    expect(decide(create(), 'node_modules', false)).toBeUndefined();
    expect(decide(create(), 'src/cache', true)).toBeUndefined();
    expect(decide(create(), '.next/static', true)).toBeUndefined();
  });

  it('are off with cacheExcludes: false', () => {
    const rules = create({ cacheExcludes: false });
    for (const rule of CACHE_EXCLUDES) expect(decide(rules, rule.slice(0, -1), true)).toBeUndefined();
  });

  it('yield to include, which re-includes the whole subtree', () => {
    const rules = create({ include: ['.venv/', 'node_modules'] });
    expect(decide(rules, '.venv', true)).toBeUndefined();
    expect(decide(rules, '.venv/lib/__pycache__', true)).toBeUndefined();
    expect(decide(rules, 'web/node_modules', true)).toBeUndefined();
    expect(reasonOf(rules, '.cache', true)).toBe('cache');
    expect(reasonOf(rules, '.venv/.env')).toBe('secret-path');
  });

  it('open an excluded directory for an include pattern that reaches inside it', () => {
    const rules = create({ include: ['node_modules/react/', 'logs/keep-*.txt'], exclude: ['logs/'] });
    expect(decide(rules, 'node_modules', true)).toBeUndefined();
    expect(decide(rules, 'node_modules/react', true)).toBeUndefined();
    expect(decide(rules, 'node_modules/react/node_modules', true)).toBeUndefined();
    expect(decide(rules, 'node_modules/lodash', true)).toEqual({ path: 'node_modules/lodash', reason: 'cache', rule: 'node_modules/' });
    expect(decide(rules, 'node_modules/.package-lock.json')).toEqual({
      path: 'node_modules/.package-lock.json',
      reason: 'cache',
      rule: 'node_modules/',
    });
    expect(decide(rules, 'logs/keep-1.txt')).toBeUndefined();
    expect(decide(rules, 'logs/other.txt')).toEqual({ path: 'logs/other.txt', reason: 'user-rule', rule: 'logs/' });
    // An unanchored include does not open excluded directories.
    expect(decide(create({ include: ['*.json'] }), 'node_modules', true)?.reason).toBe('cache');
  });
});

describe('user exclude rules', () => {
  it('use gitignore syntax relative to the workspace root', () => {
    const rules = create({ exclude: ['*.log', '!keep.log', '/dist/', 'tmp/**', 'docs/*.pdf'] });
    expect(decide(rules, 'a/b/x.log')).toEqual({ path: 'a/b/x.log', reason: 'user-rule', rule: '*.log' });
    expect(decide(rules, 'a/keep.log')).toBeUndefined();
    expect(decide(rules, 'dist', true)).toEqual({ path: 'dist', reason: 'user-rule', rule: '/dist/' });
    expect(decide(rules, 'pkg/dist', true)).toBeUndefined();
    expect(decide(rules, 'dist', false)).toBeUndefined();
    expect(reasonOf(rules, 'tmp/x')).toBe('user-rule');
    expect(reasonOf(rules, 'docs/a.pdf')).toBe('user-rule');
    expect(decide(rules, 'docs/sub/a.pdf')).toBeUndefined();
  });

  it('yield to include and come after cache excludes', () => {
    const rules = create({ exclude: ['*.log', 'node_modules/'], include: ['important.log'] });
    expect(decide(rules, 'important.log')).toBeUndefined();
    expect(reasonOf(rules, 'node_modules', true)).toBe('cache');
  });

  it('reject option lists that are not lists of strings with INVALID_INPUT', () => {
    for (const options of [{ exclude: '*.log' }, { include: [1] }, { allowSecretPaths: [null] }]) {
      expect(() => ExcludeRules.create(options as unknown as ExcludeOptions)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });
});

describe('gitignore handling', () => {
  it('is off by default: .gitignore text is not read or applied', () => {
    const rules = create();
    expect(rules.readsGitignore).toBe(false);
    expect(decide(rules, 'x.log', false, { '': '*.log\n' })).toBeUndefined();
    expect(create({ gitignore: true }).readsGitignore).toBe(true);
  });

  it('reports the file, line and pattern that matched', () => {
    const rules = create({ gitignore: true });
    const files = { '': '# build output\n*.log\n', 'a/b': 'gen/\n' };
    expect(decide(rules, 'a/b/c/x.log', false, files)).toEqual({ path: 'a/b/c/x.log', reason: 'gitignore', rule: '.gitignore:2:*.log' });
    expect(decide(rules, 'a/b/gen', true, files)).toEqual({ path: 'a/b/gen', reason: 'gitignore', rule: 'a/b/.gitignore:1:gen/' });
  });

  it('re-reads a directory’s .gitignore when the directory is entered again', () => {
    const rules = create({ gitignore: true });
    expect(reasonOf(rules, 'a/x.tmp')).toBeUndefined();
    expect(decide(rules, 'a/x.tmp', false, { a: '*.tmp' })?.reason).toBe('gitignore');
    expect(decide(rules, 'a/x.tmp', false, {})).toBeUndefined();
  });

  it('comes after cache excludes and before user rules, and yields to include', () => {
    const rules = create({ gitignore: true, exclude: ['*.txt'], include: ['keep.txt'] });
    const files = { '': 'node_modules/\n*.txt\n' };
    expect(decide(rules, 'node_modules', true, files)?.reason).toBe('cache');
    expect(decide(rules, 'a.txt', false, files)?.reason).toBe('gitignore');
    expect(decide(rules, 'keep.txt', false, files)).toBeUndefined();
  });
});

describe('describeExclusion', () => {
  it('renders every reason as one line naming the path', () => {
    for (const reason of EXCLUSION_REASONS) {
      const line = describeExclusion({ path: 'dir/entry', reason, rule: 'some-rule' });
      expect(line.startsWith('dir/entry: ')).toBe(true);
      expect(line).not.toContain('\n');
    }
  });
});

describe('default rule lists', () => {
  it('are frozen', () => {
    for (const list of [SECRET_PATH_RULES, SECRET_PATH_KEEP_SUFFIXES, CACHE_EXCLUDES, EXCLUSION_REASONS])
      expect(Object.isFrozen(list)).toBe(true);
  });
});
