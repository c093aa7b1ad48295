import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxImage } from './support/docker-images.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

describe('holdfast sandbox (compiled bin)', () => {
  let dir: string;
  const holdfast = (args: string[], input?: string): Promise<Run> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_SANDBOX_DIR: dir, HOLDFAST_TEST_LEAK: 'leaked' };
      const child = execFile(process.execPath, [bin, ...args], { env }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
      });
      child.stdin?.end(input ?? '');
    });

  beforeAll(() => {
    expectBwrapInstalled();
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-cli-'));
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('create, exec, ls and destroy a bwrap sandbox', async () => {
    const created = await holdfast(['--json', 'sandbox', 'create', '--label', 'team=infra', '--env', 'GREETING=hi']);
    expect(created.code).toBe(0);
    const { id, provider, workspaceRoot } = JSON.parse(created.stdout) as { id: string; provider: string; workspaceRoot: string };
    expect({ provider, workspaceRoot }).toEqual({ provider: 'bwrap', workspaceRoot: '/workspace' });
    expect(fs.existsSync(path.join(dir, 'bwrap', id, 'workspace'))).toBe(true);

    const run = await holdfast([
      'sandbox',
      'exec',
      id,
      '--',
      'sh',
      '-c',
      'echo "$GREETING $PWD $HOLDFAST_TEST_LEAK"; echo oops >&2; exit 5',
    ]);
    expect(run).toEqual({ code: 5, stdout: 'hi /workspace \n', stderr: 'oops\n' });
    const piped = await holdfast(['sandbox', 'exec', '--stdin', '--provider', 'bwrap', id, '--', 'cat'], 'through stdin');
    expect(piped).toMatchObject({ code: 0, stdout: 'through stdin' });
    expect((await holdfast(['sandbox', 'exec', '--timeout', '300', id, '--', 'sleep', '30'])).code).toBe(124);

    const listed = JSON.parse((await holdfast(['--json', 'sandbox', 'ls'])).stdout) as Array<{
      id: string;
      labels: Record<string, string>;
    }>;
    expect(listed).toEqual([expect.objectContaining({ id, provider: 'bwrap', labels: { team: 'infra' }, state: 'running' })]);
    expect((await holdfast(['sandbox', 'ls'])).stdout).toContain(id);

    const destroyed = await holdfast(['--json', 'sandbox', 'destroy', id, 'sbx-0000000000000000']);
    expect(JSON.parse(destroyed.stdout)).toEqual([
      { id, destroyed: true },
      { id: 'sbx-0000000000000000', destroyed: false },
    ]);
    expect(JSON.parse((await holdfast(['--json', 'sandbox', 'ls'])).stdout)).toEqual([]);
    const gone = await holdfast(['--json', 'sandbox', 'exec', id, '--', 'true']);
    expect(gone.code).toBe(1);
    expect((JSON.parse(gone.stderr) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
  }, 60_000);

  it('takes a unique id prefix (8+ characters) or latest wherever a sandbox id is taken', async () => {
    const make = async () => (JSON.parse((await holdfast(['--json', 'sandbox', 'create'])).stdout) as { id: string }).id;
    const older = await make();
    const newer = await make();
    const echo = (id: string) => holdfast(['--json', 'sandbox', 'exec', '--provider', 'bwrap', id, '--', 'sh', '-c', 'echo ok']);
    const unique = (id: string, other: string): string => {
      let n = 8;
      while (other.startsWith(id.slice(0, n))) n += 1;
      return id.slice(0, n);
    };
    expect(await echo(unique(older, newer))).toMatchObject({ code: 0, stdout: 'ok\n' });
    const errorOf = (r: Run) => (JSON.parse(r.stderr) as { error: { code: string; data: Record<string, unknown> } }).error;
    // Too short: a usage error; no match: NOT_FOUND.
    const short = await echo(older.slice(0, 7));
    expect(short.code).toBe(2);
    expect(errorOf(short).code).toBe('INVALID_INPUT');
    expect(errorOf(await echo('sbx-zzzzzzzz')).code).toBe('NOT_FOUND');
    // latest is the newest sandbox; destroy by prefix reports the full id it destroyed.
    const latest = await holdfast([
      '--json',
      'sandbox',
      'exec',
      '--provider',
      'bwrap',
      'latest',
      '--',
      'sh',
      '-c',
      'touch /workspace/mark',
    ]);
    expect(latest.code).toBe(0);
    expect(fs.existsSync(path.join(dir, 'bwrap', newer, 'workspace', 'mark'))).toBe(true);
    const destroyed = await holdfast(['--json', 'sandbox', 'destroy', '--provider', 'bwrap', unique(newer, older), unique(older, newer)]);
    expect(JSON.parse(destroyed.stdout)).toEqual([
      { id: newer, destroyed: true },
      { id: older, destroyed: true },
    ]);
  }, 60_000);

  it('creates local sandboxes too, and rejects bad flags with exit 2', async () => {
    const created = await holdfast(['sandbox', 'create', '--provider', 'local']);
    expect(created.code).toBe(0);
    const id = created.stdout.trim();
    expect((await holdfast(['sandbox', 'exec', id, '--', 'pwd', '-P'])).stdout).toBe(
      `${fs.realpathSync(path.join(dir, 'local', id, 'workspace'))}\n`,
    );
    expect((await holdfast(['sandbox', 'destroy', id])).code).toBe(0);
    expect((await holdfast(['sandbox', 'create', '--provider', 'nope'])).code).toBe(2);
    expect((await holdfast(['sandbox', 'create', '--label', 'no-equals-sign'])).code).toBe(2);
  }, 60_000);

  it('checkpoint --sandbox and restore --sandbox move a workspace into a new sandbox', async () => {
    const store = path.join(dir, 'store');
    const cacheEnv = ['--store', store];
    const first = JSON.parse((await holdfast(['--json', 'sandbox', 'create'])).stdout) as { id: string };
    const write = await holdfast([
      'sandbox',
      'exec',
      first.id,
      '--',
      'sh',
      '-c',
      'mkdir -p a/b && echo one > a/b/f.txt && chmod 751 a/b/f.txt && ln -s a/b/f.txt link',
    ]);
    expect(write.code).toBe(0);
    const saved = await holdfast([...cacheEnv, '--json', 'checkpoint', '--sandbox', first.id, '-w', 'moved']);
    expect(saved.code).toBe(0);
    expect((JSON.parse(saved.stdout) as { stats: { files: number; symlinks: number } }).stats).toMatchObject({ files: 1, symlinks: 1 });
    expect((await holdfast(['sandbox', 'destroy', first.id])).code).toBe(0);

    const second = JSON.parse((await holdfast(['--json', 'sandbox', 'create'])).stdout) as { id: string };
    const restored = await holdfast([...cacheEnv, '--json', 'restore', '--sandbox', second.id, '-w', 'moved']);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ files: 1, symlinks: 1, verified: true });
    const check = await holdfast(['sandbox', 'exec', second.id, '--', 'sh', '-c', 'cat a/b/f.txt; stat -c %a a/b/f.txt; readlink link']);
    expect(check).toMatchObject({ code: 0, stdout: 'one\n751\na/b/f.txt\n' });
    // Both a directory and --sandbox, or neither, is a usage error.
    expect((await holdfast([...cacheEnv, 'checkpoint', '-w', 'moved'])).code).toBe(2);
    expect((await holdfast([...cacheEnv, 'restore', dir, '--sandbox', second.id, '-w', 'moved'])).code).toBe(2);
    expect((await holdfast(['sandbox', 'destroy', second.id])).code).toBe(0);
  }, 120_000);

  it('creates a docker sandbox from an image, runs in it and destroys it; an image on a provider without images is INVALID_INPUT', async () => {
    const image = busyboxImage();
    const created = await holdfast(['--json', 'sandbox', 'create', '--provider', 'docker', '--image', image]);
    expect(created.code, created.stderr).toBe(0);
    const { id, provider } = JSON.parse(created.stdout) as { id: string; provider: string };
    expect(provider).toBe('docker');
    try {
      const run = await holdfast(['sandbox', 'exec', id, '--', 'sh', '-c', 'id -u; pwd']);
      expect(run).toMatchObject({ code: 0, stdout: '1000\n/workspace\n' });
    } finally {
      expect((await holdfast(['sandbox', 'destroy', id])).code).toBe(0);
    }
    const refused = await holdfast(['--json', 'sandbox', 'create', '--provider', 'local', '--image', image]);
    expect(refused.code).toBe(2);
    expect(JSON.parse(refused.stdout || refused.stderr)).toMatchObject({ error: { code: 'INVALID_INPUT' } });
  }, 60_000);
});
