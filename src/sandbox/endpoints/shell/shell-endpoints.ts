import type { EndpointContext, WorkspaceSource } from '../../../snapshot/workspace-source.js';
import type { WorkspaceTarget } from '../../../snapshot/workspace-target.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import type { SandboxProbe, Transport } from './probe.js';
import { ShellWorkspaceSource } from './shell-source.js';
import { ShellWorkspaceTarget } from './shell-target.js';

/** How the shell endpoints of one sandbox are made. */
export interface ShellEndpointConfig {
  /** `shell-stdin` or `shell-args`, as `chooseTransport` decided. */
  readonly transport: Exclude<Transport, 'agent'>;
  /** The sandbox's probe (its `touch` precision and `tar`). */
  readonly probe: SandboxProbe;
  /** The workspace root inside the sandbox; default the handle's `workspaceRoot`. */
  readonly root?: string;
}

/**
 * The `source` and `target` factories `Snapshots.checkpoint` / `Snapshots.restore` take, for a
 * sandbox reached with the shell transport.
 *
 * Fidelity (the same in `shell-stdin` and `shell-args`; the tools decide it, not the mode):
 * - names are bytes both ways (`find -print0`, octal-escaped arguments), so names that are not
 *   UTF-8 round-trip; names with control characters are left out (`invalid-path`) as in every scan;
 * - bytes, permission bits, hard links and symlink targets are exact, each checked after it lands;
 * - mtimes, of files, directories, symlinks and the root: to the millisecond with GNU coreutils
 *   (`touch -d @s.fff`, `touch -h`, `stat %y`), pre-1970 included. busybox `touch` sets whole
 *   seconds only (the probe finds out): mtimes are then kept and verified to the second
 *   (symlinks and the root included) and the receipt reports `mtimePrecisionMs: 1000` and
 *   `mtimesRounded`;
 * - with `gitignore`, the scan applies `.gitignore` files and `.git/info/exclude` as a local scan
 *   does (fetched in one batched read, applied on the host before any file is read);
 * - a warm restore sends every file again (`reuse` keeps nothing of the previous copy).
 */
export function shellEndpoints(
  handle: SandboxHandle,
  config: ShellEndpointConfig,
): { source: (context: EndpointContext) => WorkspaceSource; target: (context: EndpointContext) => WorkspaceTarget } {
  const root = config.root ?? handle.workspaceRoot;
  return {
    source: (context) => new ShellWorkspaceSource({ handle, root, cacheDir: context.cacheDir }, context),
    target: (context) =>
      new ShellWorkspaceTarget({
        handle,
        root,
        mode: config.transport === 'shell-args' ? 'args' : 'stdin',
        mtimePrecision: config.probe.mtimePrecision,
        tar: config.probe.tar,
        cacheDir: context.cacheDir,
      }),
  };
}
