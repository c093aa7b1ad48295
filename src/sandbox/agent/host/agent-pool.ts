import { isHoldfastError } from '../../../errors.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import { UNLINKED_ROOT } from '../wire/protocol.js';
import type { AgentClient } from './agent-client.js';
import { withAgent } from './agent-session.js';
import { connectAgent } from './stage-agent.js';

/** How the engine gets an agent connection for one operation on a sandbox. */
export interface AgentSource {
  /** Runs `fn` with a connected agent of `handle`'s sandbox, used by nothing else meanwhile. */
  use<T>(handle: SandboxHandle, fn: (client: AgentClient) => Promise<T>): Promise<T>;
}

/** A connection per operation, closed after it (the CLI's way: nothing stays behind). */
export const ONE_SHOT_AGENTS: AgentSource = { use: withAgent };

/**
 * How long a pooled agent may sit unused before its connection is closed: longer than the
 * periodic checkpoint interval (180 s), so a run whose agent thinks between turns keeps its
 * agent, and with it the watches that let a turn read only what changed.
 */
export const AGENT_IDLE_MS = 5 * 60_000;

interface Idle {
  readonly client: AgentClient;
  readonly since: number;
}

/**
 * Keeps one agent connection per sandbox open between operations, so a run's turns do not
 * start an agent (a process in the sandbox, ~70 ms) for every checkpoint. A connection is
 * lent to one operation at a time (a second concurrent user gets its own, closed after use),
 * dropped when it fails or its agent died, when the sandbox is evicted, and after
 * {@link AGENT_IDLE_MS} unused.
 */
export class AgentPool implements AgentSource {
  private readonly idle = new Map<string, Idle>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly idleMs = AGENT_IDLE_MS) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.floor(idleMs / 2)));
    this.sweeper.unref();
  }

  async use<T>(handle: SandboxHandle, fn: (client: AgentClient) => Promise<T>): Promise<T> {
    const key = keyOf(handle.provider, handle.id);
    const lent = this.idle.get(key);
    this.idle.delete(key);
    const pooled = lent?.client.alive === true ? lent.client : undefined;
    if (lent !== undefined && pooled === undefined) quietly(lent.client);
    const client = pooled ?? (await connectAgent((argv, options) => handle.exec(argv, options), handle.agentHome)).client;
    let result: T;
    try {
      result = await fn(client);
    } catch (error) {
      // The agent's state after a failure is unknown: never lend it again.
      quietly(client);
      // A pooled agent that outlived its sandbox's view of the workspace (a host tool removed and
      // recreated the directory) refused before doing anything: a fresh agent sees the new one.
      if (pooled !== undefined && isHoldfastError(error, 'NOT_FOUND') && error.data?.reason === UNLINKED_ROOT) {
        return this.use(handle, fn);
      }
      throw error;
    }
    if (this.closed || !client.alive || this.idle.has(key)) quietly(client);
    else this.idle.set(key, { client, since: Date.now() });
    return result;
  }

  /** Closes the pooled connection of a sandbox that is being replaced or destroyed. */
  evict(provider: string, id: string): void {
    const key = keyOf(provider, id);
    const entry = this.idle.get(key);
    this.idle.delete(key);
    if (entry !== undefined) quietly(entry.client);
  }

  /** Closes every pooled connection; later operations still work, one connection each. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const clients = [...this.idle.values()].map((e) => e.client);
    this.idle.clear();
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  }

  private sweep(): void {
    const cutoff = Date.now() - this.idleMs;
    for (const [key, entry] of this.idle) {
      if (entry.since > cutoff && entry.client.alive) continue;
      this.idle.delete(key);
      quietly(entry.client);
    }
  }
}

function keyOf(provider: string, id: string): string {
  return `${provider}/${id}`;
}

function quietly(client: AgentClient): void {
  client.close().catch(() => undefined);
}
