import type { CheckpointResult } from '../../snapshot/checkpoint.js';
import type { RestoreReceipt } from '../../snapshot/restore.js';
import type { Snapshots } from '../../snapshot/snapshots.js';
import { findSandbox } from '../open-provider.js';
import type { SandboxHandle } from '../sandbox-provider.js';
import { withAgent } from './agent-session.js';
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

/** {@link checkpointSandbox} for a sandbox already in hand. */
export async function checkpointHandle(snapshots: Snapshots, handle: SandboxHandle, rest: CheckpointInput): Promise<CheckpointResult> {
  if (handle.localPath !== undefined) return snapshots.checkpoint({ ...rest, dir: handle.localPath });
  return withAgent(handle, (client) =>
    snapshots.checkpoint({
      ...rest,
      source: (workspace) => new ExecWorkspaceSource(client, handle.workspaceRoot, workspace.id, snapshots.services.workers, handle.id),
    }),
  );
}

/** Restores a checkpoint (default: the head) into a sandbox's workspace, the same two ways. */
export async function restoreSandbox(snapshots: Snapshots, options: RestoreInput & SandboxRef): Promise<RestoreReceipt> {
  const { sandbox, provider, ...rest } = options;
  return restoreHandle(snapshots, await findSandbox(sandbox, provider), rest);
}

/** {@link restoreSandbox} for a sandbox already in hand. */
export async function restoreHandle(snapshots: Snapshots, handle: SandboxHandle, rest: RestoreInput): Promise<RestoreReceipt> {
  if (handle.localPath !== undefined) return snapshots.restore({ ...rest, dir: handle.localPath });
  const { workspace, checkpoint } = await snapshots.restorePoint(rest.workspace, rest.checkpoint);
  return withAgent(handle, (client) =>
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
