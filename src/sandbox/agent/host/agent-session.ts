import type { SandboxHandle } from '../../sandbox-provider.js';
import type { AgentClient } from './agent-client.js';
import { connectAgent } from './stage-agent.js';

/**
 * Connects to a sandbox's agent (staging the agent through exec + stdin when it is missing or
 * outdated), runs `fn`, and closes the connection whatever happens.
 */
export async function withAgent<T>(handle: SandboxHandle, fn: (client: AgentClient) => Promise<T>): Promise<T> {
  const { client } = await connectAgent((argv, options) => handle.exec(argv, options), handle.agentHome);
  try {
    return await fn(client);
  } finally {
    await client.close().catch(() => undefined);
  }
}
