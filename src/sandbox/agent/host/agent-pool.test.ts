import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isHoldfastError } from '../../../errors.js';
import { listFiles } from '../../../workspace-fs/scan.js';
import { BwrapSandboxProvider } from '../../providers/bwrap.js';
import { LocalSandboxProvider } from '../../providers/local.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import type { AgentClient } from './agent-client.js';
import { AgentPool } from './agent-pool.js';
import { withAgent } from './agent-session.js';

describe('AgentPool', () => {
  let root: string;
  let provider: LocalSandboxProvider;
  let sandbox: SandboxHandle;
  beforeAll(async () => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hf-agent-pool-')));
    provider = new LocalSandboxProvider({ root });
    sandbox = await provider.create();
  });
  afterAll(async () => {
    for (const info of (await provider?.list()) ?? []) await provider.destroy(info.id);
    fs.rmSync(root, { recursive: true, force: true });
  });

  const grab = (pool: AgentPool, hold?: Promise<void>) =>
    pool.use(sandbox, async (client) => {
      await client.probe();
      await hold;
      return client;
    });

  it('lends the same live connection to consecutive operations, a separate one to a concurrent user', async () => {
    const pool = new AgentPool();
    try {
      const first = await grab(pool);
      expect(await grab(pool)).toBe(first);
      let release!: () => void;
      const held = grab(
        pool,
        new Promise<void>((resolve) => {
          release = resolve;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      const concurrent = await grab(pool);
      release();
      expect(await held).toBe(first);
      expect(concurrent).not.toBe(first);
      // The concurrent user finished first and was pooled; the lent one came back to a full slot and was closed.
      expect(concurrent.alive).toBe(true);
      expect(first.alive).toBe(false);
      expect(await grab(pool)).toBe(concurrent);
    } finally {
      await pool.close();
    }
  });

  it('drops a connection after a failed operation, on evict, and on close', async () => {
    const pool = new AgentPool();
    let failed: AgentClient | undefined;
    await expect(
      pool.use(sandbox, async (client) => {
        failed = client;
        throw new Error('operation failed');
      }),
    ).rejects.toThrow('operation failed');
    const next = await grab(pool);
    expect(next).not.toBe(failed);
    pool.evict(sandbox.provider, sandbox.id);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(next.alive).toBe(false);
    const kept = await grab(pool);
    expect(kept).not.toBe(next);
    await pool.close();
    expect(kept.alive).toBe(false);
    // After close, operations still work, each with its own connection.
    const after = await grab(pool);
    expect(after.alive).toBe(false);
  });
});

describe('AgentPool on bubblewrap', () => {
  let root: string;
  let provider: BwrapSandboxProvider;
  beforeAll(() => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hf-agent-pool-bwrap-')));
    provider = new BwrapSandboxProvider({ root });
  });
  afterAll(async () => {
    for (const info of (await provider?.list()) ?? []) await provider.destroy(info.id);
    fs.rmSync(root, { recursive: true, force: true });
  });

  const LIMITS = { maxFileBytes: 1 << 20, maxEntries: 1000 };
  const scanPaths = (client: AgentClient, workspace: string) =>
    client.scan({ root: workspace, limits: LIMITS }).then((s) => listFiles(s.scan.root).map((f) => f.path));

  it('a pooled agent whose workspace directory the host removed and recreated is replaced, never scans the old one', async () => {
    const sandbox = await provider.create();
    const hostWorkspace = path.join(sandbox.hostDiskPath, 'workspace');
    fs.writeFileSync(path.join(hostWorkspace, 'before.txt'), 'old');
    const pool = new AgentPool();
    try {
      const first = await pool.use(sandbox, async (client) => ({ client, paths: await scanPaths(client, sandbox.workspaceRoot) }));
      expect(first.paths).toEqual(['before.txt']);
      expect(first.client.alive).toBe(true);
      // A host tool replaces the directory the pooled agent's sandbox has mounted.
      fs.rmSync(hostWorkspace, { recursive: true });
      fs.mkdirSync(hostWorkspace);
      fs.writeFileSync(path.join(hostWorkspace, 'after.txt'), 'new');
      // The stale agent itself refuses: its root is the removed directory.
      const stale = await first.client.scan({ root: sandbox.workspaceRoot, limits: LIMITS }).catch((e: unknown) => e);
      expect(isHoldfastError(stale, 'NOT_FOUND')).toBe(true);
      expect((stale as { data: Record<string, unknown> }).data.reason).toBe('root-unlinked');
      // The pool lends that agent, sees the refusal and retries once with a fresh one.
      const second = await pool.use(sandbox, async (client) => ({ client, paths: await scanPaths(client, sandbox.workspaceRoot) }));
      expect(second.paths).toEqual(['after.txt']);
      expect(second.client).not.toBe(first.client);
      expect(first.client.alive).toBe(false);
      // A one-shot agent started now sees the new directory too.
      expect(await withAgent(sandbox, (client) => scanPaths(client, sandbox.workspaceRoot))).toEqual(['after.txt']);
    } finally {
      await pool.close();
      await provider.destroy(sandbox.id);
    }
  });
});
