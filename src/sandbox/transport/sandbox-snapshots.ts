import type { CheckpointResult } from '../../snapshot/checkpoint.js';
import type { RestoreReceipt } from '../../snapshot/restore.js';
import type { Snapshots } from '../../snapshot/snapshots.js';
import { type AgentSource, ONE_SHOT_AGENTS } from '../agent/host/agent-pool.js';
import { findSandbox } from '../open-provider.js';
import type { SandboxHandle } from '../sandbox-provider.js';
import { restoreIntoSandbox } from './exec-restore.js';
import { ExecWorkspaceSource } from './exec-source.js';

type CheckpointInput = Omit<Parameters<Snapshots['checkpoint']>[0], 'dir' | 'source'>;
type RestoreInput = Omit<Parameters<Snapshots['restore']>[0], 'dir'>;

/** Which sandbox: its id and, optionally, its provider (otherwise every provider is asked). */
export interface SandboxRef {
  readonly sandbox: string;
  readonly provider?: string;
}

/**
 * Checkpoints a sandbox's workspace. A provider that exposes the workspace as a host path is
 * read directly; otherwise the engine goes through the in-sandbox agent over exec.
 */
export async function checkpointSandbox(snapshots: Snapshots, options: CheckpointInput & SandboxRef): Promise<CheckpointResult> {
  const { sandbox, provider, ...rest } = options;
  return checkpointHandle(snapshots, await findSandbox(sandbox, provider), rest);
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
    snapshots.checkpoint({
      ...rest,
      source: (workspace) =>
        new ExecWorkspaceSource(client, handle.workspaceRoot, workspace.id, snapshots.services.workers, handle.id, snapshots.baseFiles),
    }),
  );
}

/** Restores a checkpoint (default: the head) into a sandbox's workspace, the same two ways. */
export async function restoreSandbox(snapshots: Snapshots, options: RestoreInput & SandboxRef): Promise<RestoreReceipt> {
  const { sandbox, provider, ...rest } = options;
  return restoreHandle(snapshots, await findSandbox(sandbox, provider), rest);
}

/** {@link restoreSandbox} for a sandbox already in hand; `agents` as in {@link checkpointHandle}. */
export async function restoreHandle(
  snapshots: Snapshots,
  handle: SandboxHandle,
  rest: RestoreInput,
  agents: AgentSource = ONE_SHOT_AGENTS,
): Promise<RestoreReceipt> {
  if (handle.localPath !== undefined) return snapshots.restore({ ...rest, dir: handle.localPath });
  const { workspace, checkpoint } = await snapshots.restorePoint(rest.workspace, rest.checkpoint);
  return agents.use(handle, (client) =>
    restoreIntoSandbox(snapshots.services, {
      client,
      root: handle.workspaceRoot,
      workspace,
      checkpoint,
      ...(rest.replace === undefined ? {} : { replace: rest.replace }),
      ...(rest.signal === undefined ? {} : { signal: rest.signal }),
      ...(rest.onProgress === undefined ? {} : { onProgress: rest.onProgress }),
    }),
  );
}
