import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBwrapInstalled, pgrep, survivors } from '../../../../test/support/sandbox-processes.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../bwrap.js';
import { SANDBOX_ETC_FILES } from './bwrap-args.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const POSTGRES_PORT = 5432;

/** Runs a small Node script inside the sandbox and returns what it printed. */
async function nodeInside(sandbox: BwrapSandboxHandle, script: string): Promise<string> {
  const result = await sandbox.run(['node', '-e', script], { timeoutMs: 20_000 });
  return result.stdout.toString().trim();
}

/** Resolves true if something on the host accepts TCP connections on 127.0.0.1:`port`. */
function hostAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('bwrap isolation', () => {
  let root: string;
  let provider: BwrapSandboxProvider;
  let a: BwrapSandboxHandle;
  let b: BwrapSandboxHandle;

  beforeAll(async () => {
    expectBwrapInstalled();
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-iso-'));
    provider = new BwrapSandboxProvider({ root });
    a = await provider.create();
    b = await provider.create();
  });
  afterAll(async () => {
    for (const info of (await provider?.list()) ?? []) await provider.destroy(info.id);
    if (root !== undefined) fs.rmSync(root, { recursive: true, force: true });
  });

  it('cannot read the host home, host files or another sandbox disk', async () => {
    const hostSecret = path.join(root, 'host-secret.txt');
    fs.writeFileSync(hostSecret, 'host secret');
    expect((await b.run(['sh', '-c', 'echo b-secret > secret.txt'])).code).toBe(0);
    for (const target of [os.homedir(), '/root', hostSecret, path.join(b.hostDiskPath, 'workspace', 'secret.txt'), root, '/etc/shadow']) {
      const result = await a.run(['cat', target]);
      expect({ target, code: result.code === 0, out: result.stdout.length }).toEqual({ target, code: false, out: 0 });
    }
    expect((await a.run(['cat', '/etc/passwd'])).stdout.toString()).toBe(SANDBOX_ETC_FILES.passwd);
    expect((await a.run(['cat', 'secret.txt'])).code).not.toBe(0);
  });

  it('sees only its own processes', async () => {
    const pids = (await a.run(['sh', '-c', 'ls /proc | grep -E "^[0-9]+$"'])).stdout.toString().split('\n').filter(Boolean);
    expect(pids.length).toBeLessThan(10);
  });

  it('cannot reach the network: not the host loopback (PostgreSQL), not DNS, not external addresses', async () => {
    expect(await hostAccepts(POSTGRES_PORT), 'PostgreSQL must listen on 127.0.0.1:5432 on the host for this test (.ci/run starts it)').toBe(
      true,
    );
    const connect = (host: string, port: number): string =>
      `const s = require('net').connect(${port}, '${host}'); s.setTimeout(3000, () => { console.log('TIMEOUT'); process.exit(0); });` +
      `s.on('connect', () => { console.log('CONNECTED'); process.exit(0); }); s.on('error', (e) => console.log(e.code));`;
    expect(await nodeInside(a, connect('127.0.0.1', POSTGRES_PORT))).not.toBe('CONNECTED');
    expect(await nodeInside(a, connect('1.1.1.1', 443))).not.toBe('CONNECTED');
    expect(await nodeInside(a, connect('10.0.2.2', 80))).not.toBe('CONNECTED');
    const lookup = `require('dns').lookup('example.com', (e, addr) => console.log(e ? 'FAILED' : addr))`;
    expect(await nodeInside(a, lookup)).toBe('FAILED');
    const interfaces = (await a.run(['cat', '/proc/net/dev'])).stdout.toString();
    expect(
      interfaces
        .split('\n')
        .slice(2)
        .filter(Boolean)
        .map((line) => line.trim().split(':')[0]),
    ).toEqual(['lo']);
  });

  it('cannot write outside its own disk; /tmp is private and per exec', async () => {
    for (const target of ['/usr/holdfast-x', '/etc/holdfast-x', '/holdfast-x', '/home/holdfast-x', '/proc/holdfast-x']) {
      expect({ target, code: (await a.run(['touch', target])).code }).not.toEqual({ target, code: 0 });
    }
    const name = `holdfast-tmp-${process.pid}-${Date.now()}`;
    expect((await a.run(['sh', '-c', `echo x > /tmp/${name} && cat /tmp/${name}`])).stdout.toString()).toBe('x\n');
    expect((await a.run(['cat', `/tmp/${name}`])).code).not.toBe(0);
    expect(fs.existsSync(path.join(os.tmpdir(), name))).toBe(false);
    expect((await a.run(['unshare', '--user', 'true'])).code).not.toBe(0);
  });

  it('gets only the allowlisted environment', async () => {
    process.env.HOLDFAST_TEST_LEAK = 'leaked';
    try {
      const env = (await a.run(['env'])).stdout.toString();
      const names = env
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('=')[0])
        .sort();
      // PWD is bwrap's own: it sets it to the --chdir directory.
      expect(names).toEqual(['HOME', 'LANG', 'PATH', 'PWD', 'TERM']);
    } finally {
      delete process.env.HOLDFAST_TEST_LEAK;
    }
  });

  it('dies with its parent: kill -9 of the process that started an exec leaves nothing running', async () => {
    const marker = `hf-orphan-marker-${process.pid}-${Date.now()}`;
    const script = path.join(root, 'exec-parent.mts');
    const providerModule = new URL('../bwrap.ts', import.meta.url).href;
    fs.writeFileSync(
      script,
      `import { BwrapSandboxProvider } from ${JSON.stringify(providerModule)};
const sandbox = await new BwrapSandboxProvider({ root: process.argv[2] }).get(process.argv[3]);
const proc = sandbox.exec(['sh', '-c', 'while true; do echo x >> orphan-beat; sleep 0.1; done & echo ready; exec sleep 1000 # ${marker}']);
proc.stdout.pipe(process.stdout);
`,
    );
    // node --import tsx directly (not the tsx CLI, which would put another process in between).
    const parent = spawn(process.execPath, ['--import', 'tsx', script, root, a.id], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      parent.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('ready')) resolve();
      });
      parent.once('exit', () => reject(new Error('the exec parent exited before the sandbox started')));
    });
    expect(pgrep(marker).length).toBeGreaterThan(0);
    parent.kill('SIGKILL');
    expect(await survivors(marker)).toEqual([]);
    const beat = path.join(a.hostDiskPath, 'workspace', 'orphan-beat');
    const size = fs.statSync(beat).size;
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(fs.statSync(beat).size).toBe(size);
  }, 30_000);
});
