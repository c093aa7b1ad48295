import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { holdfastToken } from '../test/support/secret-samples.js';
import {
  DEFAULT_LOG_LEVEL,
  describeConfig,
  type HoldfastConfig,
  LOG_LEVELS,
  loadConfig,
  logLevelFromEnv,
  parseGitConfig,
  parseHoldfastConfig,
  readConfigEnv,
} from './config.js';

const cwd = '/srv/app';

function codeAndVariable(fn: () => unknown): { code: unknown; variable: unknown } {
  try {
    fn();
  } catch (error) {
    const e = error as { code?: unknown; data?: { variable?: unknown } };
    return { code: e.code, variable: e.data?.variable };
  }
  return { code: 'NO_ERROR', variable: undefined };
}

describe('loadConfig', () => {
  it('defaults to SQLite and local disk under ./.holdfast', () => {
    const config = loadConfig({ env: {}, cwd });
    expect(config).toEqual({
      meta: { kind: 'sqlite', path: path.join(cwd, '.holdfast', 'meta.db') },
      blobs: { kind: 'local-disk', path: path.join(cwd, '.holdfast', 'blobs') },
    });
    expect(Object.isFrozen(config) && Object.isFrozen(config.meta) && Object.isFrozen(config.blobs)).toBe(true);
  });

  it('--store wins over the environment', () => {
    const config = loadConfig({ env: { HOLDFAST_META: 'postgres://h/db', HOLDFAST_BLOBS: 's3://bkt' }, store: 'st', cwd });
    expect(config.meta).toEqual({ kind: 'sqlite', path: '/srv/app/st/meta.db' });
    expect(config.blobs).toEqual({ kind: 'local-disk', path: '/srv/app/st/blobs' });
  });

  it('parses sqlite:, postgres://, file: and file:// values', () => {
    const config = loadConfig({ env: { HOLDFAST_META: 'sqlite:data/m.db', HOLDFAST_BLOBS: 'file:///var/lib/hf%20blobs' }, cwd });
    expect(config.meta).toEqual({ kind: 'sqlite', path: '/srv/app/data/m.db' });
    expect(config.blobs).toEqual({ kind: 'local-disk', path: '/var/lib/hf blobs' });
    const pg = loadConfig({ env: { HOLDFAST_META: 'postgresql://u:secret@db.internal:5433/hf', HOLDFAST_BLOBS: 'file:b' }, cwd });
    expect(pg.meta).toEqual({ kind: 'postgres', url: 'postgresql://u:secret@db.internal:5433/hf' });
    expect(pg.blobs).toEqual({ kind: 'local-disk', path: '/srv/app/b' });
  });

  it('parses s3:// with endpoint, region, path style, prefix and credentials from the AWS variables', () => {
    const config = loadConfig({
      env: {
        HOLDFAST_BLOBS: 's3://my-bucket/team/holdfast/?endpoint=http://127.0.0.1:9000/&region=eu-west-1&forcePathStyle=true',
        AWS_ACCESS_KEY_ID: 'AKIA',
        AWS_SECRET_ACCESS_KEY: 'shh',
        AWS_SESSION_TOKEN: 'tok',
      },
      cwd,
    });
    expect(config.blobs).toEqual({
      kind: 's3',
      bucket: 'my-bucket',
      prefix: 'team/holdfast',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-west-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'AKIA', secretAccessKey: 'shh', sessionToken: 'tok' },
    });
  });

  it('s3:// without options uses AWS defaults: region from AWS_REGION, virtual-host style, default credential chain', () => {
    const config = loadConfig({ env: { HOLDFAST_BLOBS: 's3://bucket.one', AWS_REGION: 'us-west-2' }, cwd });
    expect(config.blobs).toEqual({ kind: 's3', bucket: 'bucket.one', prefix: '', region: 'us-west-2', forcePathStyle: false });
  });

  it.each([
    ['HOLDFAST_META', 'mysql://x'],
    ['HOLDFAST_META', 'sqlite:'],
    ['HOLDFAST_META', 'postgres://'],
    ['HOLDFAST_BLOBS', 'gs://bucket'],
    ['HOLDFAST_BLOBS', 'file:'],
    ['HOLDFAST_BLOBS', 's3://Bad_Bucket'],
    ['HOLDFAST_BLOBS', 's3://UpperCase'],
    ['HOLDFAST_BLOBS', 's3://ok-bucket/pre fix'],
    ['HOLDFAST_BLOBS', 's3://ok-bucket/a/../b'],
    ['HOLDFAST_BLOBS', 's3://ok-bucket?endpoint=ftp://x'],
    ['HOLDFAST_BLOBS', 's3://ok-bucket?forcePathStyle=yes'],
    ['HOLDFAST_BLOBS', 's3://ok-bucket?regoin=us-east-1'],
  ])('%s=%s fails with INVALID_INPUT naming the variable', (variable, value) => {
    expect(codeAndVariable(() => loadConfig({ env: { [variable]: value }, cwd }))).toEqual({ code: 'INVALID_INPUT', variable });
  });

  it('half a credential pair is an error', () => {
    const env = { HOLDFAST_BLOBS: 's3://ok-bucket', AWS_ACCESS_KEY_ID: 'AKIA' };
    expect(codeAndVariable(() => loadConfig({ env, cwd }))).toEqual({ code: 'INVALID_INPUT', variable: 'AWS_SECRET_ACCESS_KEY' });
  });

  it('never prints secrets', () => {
    const config = loadConfig({
      env: {
        HOLDFAST_META: 'postgres://u:hunter2@h/db',
        HOLDFAST_BLOBS: 's3://bkt?endpoint=http://h:1',
        AWS_ACCESS_KEY_ID: 'AK',
        AWS_SECRET_ACCESS_KEY: 'sekrit',
      },
      cwd,
    });
    const text = JSON.stringify(describeConfig(config));
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('sekrit');
    try {
      loadConfig({ env: { HOLDFAST_META: 'postgres://u:hunter2@' }, cwd });
    } catch (error) {
      expect(String((error as Error).message)).not.toContain('hunter2');
    }
  });
});

describe('git settings', () => {
  it('are absent without HOLDFAST_GIT_* (no host allowed) and parsed with it', () => {
    expect(loadConfig({ env: {}, cwd }).git).toBeUndefined();
    const config = loadConfig({
      env: {
        HOLDFAST_GIT_ALLOWED_HOSTS: 'GitHub.com, *.example.com',
        HOLDFAST_GIT_MAX_PACK_BYTES: '1048576',
        HOLDFAST_GIT_SSH_KNOWN_HOSTS: 'known_hosts',
      },
      cwd,
    });
    expect(config.git).toMatchObject({
      allowedHosts: ['github.com', '*.example.com'],
      protocols: ['https', 'ssh'],
      credentials: [],
      allowPrivateAddresses: false,
      sshKnownHostsFile: '/srv/app/known_hosts',
      maxPackBytes: 1048576,
    });
  });

  it.each([
    ['HOLDFAST_GIT_ALLOWED_HOSTS', 'http://github.com'],
    ['HOLDFAST_GIT_PROTOCOLS', 'https,file'],
    ['HOLDFAST_GIT_PROTOCOLS', 'ext'],
    ['HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES', 'yes'],
    ['HOLDFAST_GIT_MAX_PACK_BYTES', '-1'],
    ['HOLDFAST_GIT_CREDENTIALS_FILE', '/nonexistent/credentials.json'],
  ])('refuses %s=%s naming the variable', (variable, value) => {
    expect(codeAndVariable(() => loadConfig({ env: { [variable]: value }, cwd }))).toEqual({ code: 'INVALID_INPUT', variable });
  });
});

describe('configuration schemas', () => {
  function codeAndData(fn: () => unknown): { code: unknown; data: unknown } {
    try {
      fn();
    } catch (error) {
      const e = error as { code?: unknown; data?: unknown };
      return { code: e.code, data: e.data };
    }
    return { code: 'NO_ERROR', data: undefined };
  }

  it('HOLDFAST_LOG_LEVEL: every pino level and silent; unset or empty is info; anything else names the variable', () => {
    for (const level of LOG_LEVELS) expect(logLevelFromEnv({ HOLDFAST_LOG_LEVEL: level })).toBe(level);
    expect(logLevelFromEnv({})).toBe(DEFAULT_LOG_LEVEL);
    expect(logLevelFromEnv({ HOLDFAST_LOG_LEVEL: '' })).toBe('info');
    for (const value of ['verbose', 'INFO', '10', 'warning']) {
      const expected = { code: 'INVALID_INPUT', data: { variable: 'HOLDFAST_LOG_LEVEL', field: 'HOLDFAST_LOG_LEVEL' } };
      expect(codeAndData(() => logLevelFromEnv({ HOLDFAST_LOG_LEVEL: value }))).toEqual(expected);
      // Every command that loads the configuration refuses it too.
      expect(codeAndData(() => loadConfig({ env: { HOLDFAST_LOG_LEVEL: value }, cwd }))).toEqual(expected);
    }
  });

  it('a bad git or serve variable is INVALID_INPUT with data.field naming the variable', () => {
    expect(codeAndData(() => loadConfig({ env: { HOLDFAST_GIT_ALLOWED_HOSTS: 'github.com, http://x' }, cwd }))).toEqual({
      code: 'INVALID_INPUT',
      data: { variable: 'HOLDFAST_GIT_ALLOWED_HOSTS', field: 'HOLDFAST_GIT_ALLOWED_HOSTS' },
    });
    for (const [variable, value] of [
      ['HOLDFAST_PORT', '70000'],
      ['HOLDFAST_PORT', '80a'],
      ['HOLDFAST_LEASE_TTL_MS', '0'],
      ['HOLDFAST_INSPECTOR', 'maybe'],
    ] as const) {
      expect(codeAndData(() => loadConfig({ env: { [variable]: value }, cwd }))).toEqual({
        code: 'INVALID_INPUT',
        data: { variable, field: variable },
      });
    }
    expect(readConfigEnv({ HOLDFAST_PORT: '0', HOLDFAST_INSPECTOR: 'OFF', HOLDFAST_GC_SWEEP_INTERVAL_MS: '' })).toMatchObject({
      HOLDFAST_PORT: 0,
      HOLDFAST_INSPECTOR: false,
      HOLDFAST_GC_SWEEP_INTERVAL_MS: undefined,
    });
    expect(codeAndData(() => loadConfig({ env: { HOLDFAST_GIT_MAX_CHECKOUT_BYTES: '1e9' }, cwd }))).toEqual({
      code: 'INVALID_INPUT',
      data: { variable: 'HOLDFAST_GIT_MAX_CHECKOUT_BYTES', field: 'HOLDFAST_GIT_MAX_CHECKOUT_BYTES' },
    });
  });

  it('library git settings name the exact field; a credential is never echoed', () => {
    expect(codeAndData(() => parseGitConfig({ allowedHosts: ['github.com', 'not a host'] }))).toEqual({
      code: 'INVALID_INPUT',
      data: { variable: 'git.allowedHosts', field: 'git.allowedHosts[1]' },
    });
    const token = holdfastToken();
    let message = '';
    const refused = codeAndData(() => {
      try {
        parseGitConfig({ credentials: [{ host: 'github.com', username: 'a:b', token }] });
      } catch (error) {
        message = String((error as Error).message);
        throw error;
      }
    });
    expect(refused).toEqual({ code: 'INVALID_INPUT', data: { variable: 'git.credentials', field: 'git.credentials[0].username' } });
    expect(message.includes(token)).toBe(false);
    expect(parseGitConfig({ protocols: ['https', 'https', 'ssh'] }).protocols).toEqual(['https', 'ssh']);
  });

  it('a HoldfastConfig a library passes is checked by HoldfastConfigSchema, naming the field', () => {
    const good = { meta: { kind: 'sqlite', path: '/srv/m.db' }, blobs: { kind: 'local-disk', path: '/srv/b' } } as const;
    expect(parseHoldfastConfig(good)).toEqual(good);
    expect(Object.isFrozen(parseHoldfastConfig(good).meta)).toBe(true);
    const cases: Array<[unknown, string]> = [
      [{ ...good, meta: { kind: 'sqlite', path: 'relative.db' } }, 'meta.path'],
      [{ ...good, meta: { kind: 'mysql', url: 'mysql://x' } }, 'meta.kind'],
      [{ ...good, blobs: { kind: 's3', bucket: 'Bad_Bucket', prefix: '', region: 'us-east-1', forcePathStyle: false } }, 'blobs.bucket'],
      [{ ...good, git: { allowedHosts: ['ok.example', 'http://x'] } }, 'git.allowedHosts[1]'],
      [{ ...good, git: { maxPackBytes: -1 } }, 'git.maxPackBytes'],
    ];
    for (const [config, field] of cases) {
      expect(codeAndData(() => parseHoldfastConfig(config as HoldfastConfig))).toMatchObject({ code: 'INVALID_INPUT', data: { field } });
    }
  });
});
