import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { ProcessTree } from '../../host-process.js';
import type { SandboxDirs } from '../../sandbox-dirs.js';
import { killProcess } from '../../tracked-processes.js';

/** The descriptor bwrap reports its namespace's init pid on (`--info-fd`); spawned as the first extra pipe. */
export const BWRAP_INFO_FD = 3;

/**
 * Tracks and kills one bwrap exec. bwrap forks an init process for the new pid namespace and
 * reports its host pid on `--info-fd`; SIGKILLing that init makes the kernel kill every process
 * in the namespace. Killing only the outer bwrap is not enough: `--die-with-parent` is armed by
 * the init itself, so a bwrap killed in its first milliseconds would leave the sandbox running.
 * A kill requested before the pid is known is therefore held until it arrives (or until bwrap
 * exits without starting anything).
 */
export function bwrapProcessTree(child: ChildProcess & { readonly pid: number }, dirs: SandboxDirs, sandboxId: string): ProcessTree {
  const outer = child.pid;
  dirs.track(sandboxId, outer, 'process');
  let init: number | undefined;
  let killRequested = false;
  let done = false;
  const killAll = (): void => {
    killProcess(outer, 'process');
    if (init !== undefined) killProcess(init, 'process');
  };

  const info = child.stdio[BWRAP_INFO_FD] as Readable | null | undefined;
  const chunks: Buffer[] = [];
  info?.on('data', (chunk: Buffer) => chunks.push(chunk));
  info?.on('error', () => undefined); // bwrap may exit before writing; then there is nothing to kill
  info?.once('end', () => {
    init = initPid(Buffer.concat(chunks).toString('utf8'));
    if (init === undefined || done) return;
    try {
      dirs.track(sandboxId, init, 'process');
    } catch {
      killRequested = true; // the sandbox was destroyed while this exec started
    }
    if (killRequested) killAll();
  });

  return {
    kill: () => {
      killRequested = true;
      if (init !== undefined) killAll();
    },
    exited: () => {
      done = true;
      dirs.untrack(sandboxId, outer);
      if (init !== undefined) dirs.untrack(sandboxId, init);
    },
  };
}

/** The `child-pid` of bwrap's info JSON, or undefined when bwrap wrote none. */
function initPid(json: string): number | undefined {
  if (json.trim() === '') return undefined;
  const pid = (JSON.parse(json) as { 'child-pid'?: unknown })['child-pid'];
  return typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 1 ? pid : undefined;
}
