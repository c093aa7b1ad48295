import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { AgentClient, type AgentClientOptions } from '../../src/sandbox/agent/host/agent-client.js';
import type { AgentChannel, AgentExecFn, AgentExit } from '../../src/sandbox/agent/host/agent-connection.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The bundle under test: the real file a sandbox would run. */
export const AGENT_BUNDLE = path.join(repo, 'dist', 'agent', 'holdfast-agent.mjs');
let built = false;

/**
 * Builds the agent bundle from the current sources, once per test process. Bundling takes well
 * under a second and replaces the outputs atomically, so every test file can call it without
 * relying on `npm run build` having run and without racing other workers.
 */
export function buildAgentBundle(): string {
  if (!built) {
    execFileSync(process.execPath, [path.join(repo, 'scripts', 'bundle-agent.mjs')], { stdio: 'inherit' });
    built = true;
  }
  return AGENT_BUNDLE;
}

/** A spawned agent: a channel whose stdin is always there, and its pid. */
export type SpawnedChannel = AgentChannel & { readonly stdin: Writable; readonly pid: number };

/** Runs argv (`node` means this Node) as a child process and wraps it as an agent channel. */
export function spawnChannel(argv: readonly string[], env: NodeJS.ProcessEnv = {}): SpawnedChannel {
  const [cmd, ...args] = argv;
  const child = spawn(cmd === 'node' ? process.execPath : (cmd as string), args, { env: { ...process.env, ...env }, stdio: 'pipe' });
  const exit = new Promise<AgentExit>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    exit,
    kill: () => child.kill('SIGKILL'),
    pid: child.pid as number,
  };
}

/** An exec function for `ensureAgent` that runs commands on the host. */
export const hostExec: AgentExecFn = (argv) => spawnChannel(argv);

/** Starts the bundled agent with its state under `home`. */
export function startAgent(home: string, env: NodeJS.ProcessEnv = {}): SpawnedChannel {
  return spawnChannel(['node', buildAgentBundle(), '--home', home], env);
}

/** Starts the agent and shakes hands. */
export async function connectAgent(
  home: string,
  env: NodeJS.ProcessEnv = {},
  options: AgentClientOptions = {},
): Promise<{ client: AgentClient; channel: SpawnedChannel }> {
  const channel = startAgent(home, env);
  return { client: await AgentClient.connect(channel, { timeoutMs: 30_000, ...options }), channel };
}

/** A fresh temp directory. */
export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `holdfast-${prefix}-`));
}
