import path from 'node:path';
import { probeSandbox } from '../../src/sandbox/endpoints/shell/probe.js';
import { shellEndpoints } from '../../src/sandbox/endpoints/shell/shell-endpoints.js';
import type { ShellMode } from '../../src/sandbox/endpoints/shell/shell-exec.js';
import { ShellWorkspaceSource } from '../../src/sandbox/endpoints/shell/shell-source.js';
import type { SandboxHandle } from '../../src/sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import type { RestoreProgress, RestoreReceipt } from '../../src/snapshot/restore/restore.js';
import type { Snapshots } from '../../src/snapshot/snapshots.js';
import { type FixtureEntry, fillScriptShell } from './endpoint-fixture.js';

/** Options of a shell-transport checkpoint or restore in tests. */
export interface ShellEndpointOptions {
  readonly mode: ShellMode;
  readonly root?: string;
  /** Use the sandbox's `tar` when the probe finds it (default true). */
  readonly tar?: boolean;
}

/** Checkpoints `handle`'s workspace through the shell transport. */
export function shellCheckpoint(
  snapshots: Snapshots,
  handle: SandboxHandle,
  workspace: string,
  options: ShellEndpointOptions,
  extra: Partial<Parameters<Snapshots['checkpoint']>[0]> = {},
): Promise<CheckpointResult> {
  const root = options.root ?? handle.workspaceRoot;
  return snapshots.checkpoint({
    ...extra,
    workspace,
    source: (context) => new ShellWorkspaceSource({ handle, root, cacheDir: context.cacheDir }, context),
  });
}

/** Restores into `handle`'s workspace through the shell transport (probing the sandbox for its `touch` and `tar`). */
export async function shellRestore(
  snapshots: Snapshots,
  handle: SandboxHandle,
  workspace: string,
  options: ShellEndpointOptions,
  o: { checkpoint?: string; replace?: boolean; onProgress?: (p: RestoreProgress) => void; signal?: AbortSignal } = {},
): Promise<RestoreReceipt> {
  const probe = await probeSandbox(handle);
  const { target } = shellEndpoints(handle, {
    transport: options.mode === 'args' ? 'shell-args' : 'shell-stdin',
    probe: { ...probe, tar: probe.tar && options.tar !== false },
    ...(options.root === undefined ? {} : { root: options.root }),
  });
  return snapshots.restore({ workspace, ...o, target });
}

/** The host directory of a bwrap sandbox's workspace (its disk lives under the provider's root). */
export function bwrapWorkspaceOnHost(providerRoot: string, id: string): string {
  return path.join(providerRoot, id, 'workspace');
}

/** `touch -t` form of a whole-second UTC time: `[[CC]YY]MMDDhhmm.ss`. */
function touchStamp(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}.${two(d.getUTCSeconds())}`;
}

/**
 * {@link fillScriptShell} plus each symlink's own mtime (`touch -h`, which busybox has) and a
 * whole-second mtime for the root, so a whole-second fixture is whole seconds everywhere.
 */
export function fillScriptBusybox(root: string, fixture: readonly FixtureEntry[]): string {
  const links = fixture.flatMap((e) =>
    e.type === 'symlink' ? [`touch -h -t ${touchStamp(e.mtimeMs)} '${e.path.replace(/'/g, `'\\''`)}'`] : [],
  );
  return [fillScriptShell(root, fixture), ...links, `touch -t ${touchStamp(Date.UTC(2024, 2, 4, 5, 6, 7))} .`].join('\n');
}
