import type { CheckpointResult } from '../../snapshot/checkpoint.js';
import type { RestoreReceipt } from '../../snapshot/restore.js';
import type { Snapshots } from '../../snapshot/snapshots.js';
import { type AgentSource, ONE_SHOT_AGENTS } from '../agent/host/agent-pool.js';
import { findSandbox, openSandboxProvider } from '../open-provider.js';
import type { SandboxHandle, SandboxProvider } from '../sandbox-provider.js';
import { AgentWorkspaceSource } from './agent-source.js';
import { AgentWorkspaceTarget } from './agent-target.js';

type CheckpointInput = Omit<Parameters<Snapshots['checkpoint']>[0], 'dir' | 'source'>;
type RestoreInput = Omit<Parameters<Snapshots['restore']>[0], 'dir' | 'target'>;

/** Which sandbox: its id and, optionally, its provider (otherwise every shipped provider name is asked). */
export interface SandboxRef {
  readonly sandbox: string;
  readonly provider?: string;
}

/** Turns a provider name into a provider: the shipped ones by default, or those a library user injected (`openHoldfast({ providers })`). */
export type ProviderLookup = (name: string) => SandboxProvider;

/**
 * Checkpoints a sandbox's workspace. A provider that exposes the workspace as a host path is
 * read directly; otherwise the engine goes through the in-sandbox agent over exec.
 */
export async function checkpointSandbox(
  snapshots: Snapshots,
  options: CheckpointInput & SandboxRef,
  providers: ProviderLookup = openSandboxProvider,
): Promise<CheckpointResult> {
  const { sandbox, provider, ...rest } = options;
  return checkpointHandle(snapshots, await findSandbox(sandbox, provider, providers), rest);
}

/** {@link checkpointSandbox} for a sandbox already in hand; `agents` says how to reach its agent (default: a connection per call). */
export async function checkpointHandle(
  snapshots: Snapshots,
  handle: SandboxHandle,
  rest: CheckpointInput,
  agents: AgentSource = ONE_SHOT_AGENTS,
): Promise<CheckpointResult> {
  if (handle.localPath !== undefined) return snapshots.checkpoint({ ...rest, dir: handle.localPath });
  return agents.use(handle, (client) =>
    snapshots.checkpoint({ ...rest, source: (context) => new AgentWorkspaceSource(client, handle.workspaceRoot, handle.id, context) }),
  );
}

/** Restores a checkpoint (default: the head) into a sandbox's workspace, the same two ways. */
export async function restoreSandbox(
  snapshots: Snapshots,
  options: RestoreInput & SandboxRef,
  providers: ProviderLookup = openSandboxProvider,
): Promise<RestoreReceipt> {
  const { sandbox, provider, ...rest } = options;
  return restoreHandle(snapshots, await findSandbox(sandbox, provider, providers), rest);
}

/** {@link restoreSandbox} for a sandbox already in hand; `agents` as in {@link checkpointHandle}. */
export async function restoreHandle(
  snapshots: Snapshots,
  handle: SandboxHandle,
  rest: RestoreInput,
  agents: AgentSource = ONE_SHOT_AGENTS,
): Promise<RestoreReceipt> {
  if (handle.localPath !== undefined) return snapshots.restore({ ...rest, dir: handle.localPath });
  // The restore point is resolved first, so a missing workspace or checkpoint never stages an agent.
  await snapshots.restorePoint(rest.workspace, rest.checkpoint);
  return agents.use(handle, (client) =>
    snapshots.restore({ ...rest, target: () => new AgentWorkspaceTarget(client, handle.workspaceRoot, handle.id) }),
  );
}
