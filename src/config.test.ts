import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig } from './config.js';

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
