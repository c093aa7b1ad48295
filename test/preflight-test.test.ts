import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** `npm test` on a machine that lacks what the suite needs must give up this fast, not after a build. */
const FAIL_AT_ONCE_MS = 20_000;
/** When it does not give up, the test stops it (and whatever it started) after this long. */
const GIVE_UP_MS = 45_000;
/** The command the one line must name. */
const SETUP = 'npm run setup';

interface Ran {
  readonly exit: number | null;
  readonly output: string;
  readonly ms: number;
}

/** Runs `command args` in the checkout in its own process group, killing the group after GIVE_UP_MS. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {}
    }, GIVE_UP_MS);
    child.on('close', (exit) => {
      clearTimeout(timer);
      resolve({ exit, output, ms: Date.now() - started });
    });
  });
}

describe("the README's test command on a machine without the suite's tools", () => {
  let bin: string;

  beforeAll(() => {
    // A fresh machine: a shell, Node and npm, none of bubblewrap, docker, chromium, busybox, git.
    bin = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-fresh-bin-'));
    fs.symlinkSync('/bin/sh', path.join(bin, 'sh'));
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    fs.symlinkSync(fs.realpathSync('/usr/bin/npm'), path.join(bin, 'npm'));
  });
  afterAll(() => {
    fs.rmSync(bin, { recursive: true, force: true });
  });

  it('npm test fails at once with one line naming the setup command, before building or running anything', async () => {
    const distBefore = fs.statSync(path.join(root, 'dist', 'index.js')).mtimeMs;
    const ran = await run(path.join(bin, 'npm'), ['test'], { HOME: process.env.HOME ?? os.tmpdir(), PATH: bin });
    expect(ran.exit).not.toBe(0);
    expect(ran.exit).not.toBeNull();
    expect(ran.ms).toBeLessThan(FAIL_AT_ONCE_MS);
    const named = ran.output.split('\n').filter((line) => line.includes(SETUP));
    expect(named).toHaveLength(1);
    for (const tool of ['bubblewrap', 'docker.io', 'chromium']) expect(named[0]).toContain(tool);
    expect(ran.output).not.toMatch(/passed|vitest/i);
    expect(fs.statSync(path.join(root, 'dist', 'index.js')).mtimeMs).toBe(distBefore);
  }, 60_000);

  it('a docker client without a daemon and a PostgreSQL that does not answer are named too', async () => {
    const ran = await run(process.execPath, ['scripts/preflight-test.mjs'], {
      ...process.env,
      DOCKER_HOST: `unix://${path.join(bin, 'no-dockerd.sock')}`,
      HOLDFAST_TEST_PG: 'postgres://postgres@127.0.0.1:1/postgres',
    });
    expect(ran.exit).toBe(1);
    const lines = ran.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(SETUP);
    expect(lines[0]).toContain('dockerd');
    expect(lines[0]).toContain('PostgreSQL on 127.0.0.1:1');
  }, 60_000);

  it('on a machine that has everything, the preflight says nothing and lets the suite run', async () => {
    const ran = await run(process.execPath, ['scripts/preflight-test.mjs'], process.env);
    expect(ran).toMatchObject({ exit: 0, output: '' });
  }, 60_000);

  it('.ci/run installs through the same setup script the one line names', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.setup).toBe('bash .ci/setup');
    expect(pkg.scripts.pretest).toBe('node scripts/preflight-test.mjs');
    expect(fs.readFileSync(path.join(root, '.ci', 'run'), 'utf8')).toMatch(/^bash \.ci\/setup$/m);
  });
});
