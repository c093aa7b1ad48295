import fs from 'node:fs';
import path from 'node:path';
import { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import type { AgentChannel, AgentExecFn } from '../../src/sandbox/agent/host/agent-connection.js';
import { ensureAgent, type StagedAgent } from '../../src/sandbox/agent/host/stage-agent.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import type { SandboxHandle } from '../../src/sandbox/sandbox-provider.js';
import { buildAgentBundle, startAgent, tempDir } from './agent-harness.js';

/** A started agent: its client and how to watch or stop its process. */
export interface RunningAgent {
  readonly client: AgentClient;
  readonly channel: AgentChannel;
}

/**
 * Where agents run for a test: a plain child process, or a real bubblewrap sandbox reached only
 * through `exec` (workspace on a mount point, read-only root: the `inside` staging layout).
 */
export interface AgentHost {
  readonly name: string;
  /** A fresh restore target, as the agent sees it. */
  target(n: number): string;
  /** The same path as the host sees it, for inspection. */
  hostPath(agentPath: string): string;
  connect(env?: Record<string, string>): Promise<RunningAgent>;
  close(): Promise<void>;
}

/** Agents as child processes of the test, state under a temp home. */
export function processHost(): AgentHost {
  const work = tempDir('agent-host');
  const home = path.join(work, 'home');
  return {
    name: 'process',
    target: (n) => path.join(work, `t${n}`, 'ws'),
    hostPath: (p) => p,
    connect: async (env = {}) => {
      const channel = startAgent(home, env);
      return { client: await AgentClient.connect(channel, { timeoutMs: 30_000 }), channel };
    },
    close: async () => fs.rmSync(work, { recursive: true, force: true }),
  };
}

/** The exec of a sandbox handle, as the agent staging and client use it. */
export function execOf(handle: SandboxHandle, env: Record<string, string> = {}): AgentExecFn {
  return (argv, options) => handle.exec(argv, { ...options, env });
}

/** Agents in one bubblewrap sandbox; every target is its `/workspace`. */
export async function bwrapHost(): Promise<AgentHost & { readonly sandbox: BwrapSandboxHandle; readonly staged: StagedAgent }> {
  buildAgentBundle();
  const root = tempDir('agent-bwrap');
  const provider = new BwrapSandboxProvider({ root });
  const sandbox = (await provider.create()) as BwrapSandboxHandle;
  const staged = await ensureAgent(execOf(sandbox), sandbox.agentHome);
  return {
    name: 'bwrap',
    sandbox,
    staged,
    target: () => sandbox.workspaceRoot,
    hostPath: (p) => path.join(sandbox.hostDiskPath, p),
    connect: async (env = {}) => {
      const channel = await execOf(sandbox, env)(staged.command, { stdin: 'pipe' });
      return { client: await AgentClient.connect(channel, { timeoutMs: 30_000 }), channel };
    },
    close: async () => {
      await provider.destroy(sandbox.id);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
