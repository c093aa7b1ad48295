import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../../../test/support/error-code.js';
import { expectBwrapInstalled, survivors } from '../../../test/support/sandbox-processes.js';
import { describeSandboxProviderContract } from '../sandbox.contract.js';
import { BWRAP_HOME, BWRAP_WORKSPACE } from './bwrap/bwrap-args.js';
import { BwrapSandboxProvider } from './bwrap.js';

describe('bwrap prerequisites', () => {
  it('bubblewrap is installed', () => {
    expectBwrapInstalled();
  });
});

let contractRoot = '';
describeSandboxProviderContract({
  name: 'bwrap',
  create: async () => {
    contractRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-bwrap-'));
    const provider = new BwrapSandboxProvider({ root: contractRoot });
    return {
      provider,
      cleanup: async () => {
        for (const info of await provider.list()) await provider.destroy(info.id);
        fs.rmSync(contractRoot, { recursive: true, force: true });
      },
    };
  },
  reopen: () => new BwrapSandboxProvider({ root: contractRoot }),
});

describe('BwrapSandboxProvider', () => {
  let root: string;
  let provider: BwrapSandboxProvider;
  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-bwrap-'));
    provider = new BwrapSandboxProvider({ root });
  });
  afterAll(() => {
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('mounts a private host disk at /workspace and /home/agent and deletes it on destroy', async () => {
    const sandbox = await provider.create();
    expect({ workspace: sandbox.workspaceRoot, home: sandbox.agentHome, local: sandbox.localPath }).toEqual({
      workspace: BWRAP_WORKSPACE,
      home: BWRAP_HOME,
      local: undefined,
    });
    expect((await sandbox.run(['sh', '-c', 'echo ws > /workspace/a.txt && echo home > ~/b.txt'])).code).toBe(0);
    expect(fs.readFileSync(path.join(sandbox.hostDiskPath, 'workspace', 'a.txt'), 'utf8')).toBe('ws\n');
    expect(fs.readFileSync(path.join(sandbox.hostDiskPath, 'home', 'b.txt'), 'utf8')).toBe('home\n');
    await provider.destroy(sandbox.id);
    expect(fs.existsSync(sandbox.hostDiskPath)).toBe(false);
  });

  it('tracks running execs on the disk and forgets them when they end', async () => {
    const sandbox = await provider.create();
    const procs = path.join(sandbox.hostDiskPath, 'procs');
    const proc = sandbox.exec(['sleep', '100']);
    expect(fs.readdirSync(procs)).toHaveLength(1);
    proc.kill();
    await proc.exit;
    expect(fs.readdirSync(procs)).toEqual([]);
    await provider.destroy(sandbox.id);
  });

  it('a timeout SIGKILLs bwrap and with it every process in the sandbox', async () => {
    const sandbox = await provider.create();
    const marker = `hf-timeout-marker-${process.pid}-${Date.now()}`;
    const result = await sandbox.run(['sh', '-c', `sleep 100 & node -e 'setInterval(() => {}, 1e6)' ${marker}`], { timeoutMs: 700 });
    expect({ timedOut: result.timedOut, signal: result.signal }).toEqual({ timedOut: true, signal: 'SIGKILL' });
    expect(await survivors(marker)).toEqual([]);
    await provider.destroy(sandbox.id);
  });

  it("a kill in bwrap's first milliseconds still leaves nothing running", async () => {
    const sandbox = await provider.create();
    const marker = `hf-early-kill-marker-${process.pid}-${Date.now()}`;
    for (let i = 0; i < 10; i += 1) {
      const result = await sandbox.run(['sh', '-c', `sleep 100; : ${marker}`], { signal: AbortSignal.abort() });
      expect(result.code === 0).toBe(false);
    }
    expect(await survivors(marker)).toEqual([]);
    await provider.destroy(sandbox.id);
  });

  it('runs commands as the unprivileged agent user with no capabilities', async () => {
    const sandbox = await provider.create();
    const result = await sandbox.run(['sh', '-c', 'id -u; id -g; whoami; grep CapEff /proc/self/status']);
    expect(result.stdout.toString().split('\n').slice(0, 4)).toEqual(['1000', '1000', 'agent', 'CapEff:\t0000000000000000']);
    await provider.destroy(sandbox.id);
  });

  it('rejects images and fails with STORE_UNAVAILABLE when bwrap cannot be found', async () => {
    expect(await codeOf(() => provider.create({ image: 'debian:12' }))).toBe('INVALID_INPUT');
    const broken = new BwrapSandboxProvider({ root, bwrapPath: path.join(root, 'no-bwrap') });
    expect(await codeOf(() => broken.create())).toBe('STORE_UNAVAILABLE');
  });
});
