import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalSandboxProvider } from '../../providers/local.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import type { AgentClient } from './agent-client.js';
import { AgentPool } from './agent-pool.js';

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
