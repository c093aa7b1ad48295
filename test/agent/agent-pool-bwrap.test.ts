import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isHoldfastError } from '../../src/errors.js';
import type { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import { AgentPool } from '../../src/sandbox/agent/host/agent-pool.js';
import { withAgent } from '../../src/sandbox/agent/host/agent-session.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { listFiles } from '../../src/workspace-fs/scan.js';

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
