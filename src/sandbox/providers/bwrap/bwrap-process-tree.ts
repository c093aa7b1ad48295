import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProcessTree } from '../../host-process.js';
import type { SandboxDirs } from '../../sandbox-dirs.js';
import type { ExecSignal } from '../../sandbox-provider.js';
import { killProcess, signalProcess } from '../../tracked-processes.js';

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
  /** Signals other than SIGKILL asked for before the init pid was known, delivered when it is. */
  const held: ExecSignal[] = [];
  let learnPid: (pid: number | undefined) => void = () => undefined;
  const pid = new Promise<number | undefined>((resolve) => {
    learnPid = resolve;
  });
  const killAll = (): void => {
    killProcess(outer, 'process');
    if (init !== undefined) killProcess(init, 'process');
  };
  // bwrap's init (set up with --new-session) leads the session and process group the command runs in.
  const deliver = (signal: ExecSignal): void => {
    if (init !== undefined) signalProcess(init, 'group', signal);
  };

  const info = child.stdio[BWRAP_INFO_FD] as Readable | null | undefined;
  const chunks: Buffer[] = [];
  info?.on('data', (chunk: Buffer) => chunks.push(chunk));
  info?.on('error', () => undefined); // bwrap may exit before writing; then there is nothing to kill
  info?.once('end', () => {
    init = initPid(Buffer.concat(chunks).toString('utf8'));
    if (init === undefined || done) {
      learnPid(undefined);
      return;
    }
    void lookUpCommandPid(init, () => done).then(learnPid);
    try {
      dirs.track(sandboxId, init, 'process');
    } catch {
      killRequested = true; // the sandbox was destroyed while this exec started
    }
    if (killRequested) killAll();
    else for (const signal of held.splice(0)) deliver(signal);
  });

  return {
    pid,
    kill: (signal) => {
      if (signal !== 'SIGKILL') {
        if (init === undefined) held.push(signal);
        else deliver(signal);
        return;
      }
      killRequested = true;
      if (init !== undefined) killAll();
    },
    exited: () => {
      done = true;
      learnPid(undefined);
      dirs.untrack(sandboxId, outer);
      if (init !== undefined) dirs.untrack(sandboxId, init);
    },
  };
}

/** Lookups of the command's pid after bwrap reported its init, and the wait between two (the init may not have forked yet). */
const PID_LOOKUPS = 50;
const PID_LOOKUP_WAIT_MS = 10;

/** {@link commandPid}, asked again while the init has not forked the command yet and the exec runs. */
async function lookUpCommandPid(init: number, exited: () => boolean): Promise<number | undefined> {
  for (let i = 0; i < PID_LOOKUPS && !exited(); i += 1) {
    const found = commandPid(init);
    if (found !== undefined) return found;
    await sleep(PID_LOOKUP_WAIT_MS);
  }
  return undefined;
}

/**
 * The pid, inside its namespace, of the command bwrap's init `init` runs: the init's first child
 * (`/proc/<init>/task/<init>/children`), by the last `NSpid` of its status. Undefined when the
 * command is not (or no longer) there. bwrap's init forks the command once, so it is its only child.
 */
function commandPid(init: number): number | undefined {
  try {
    const first = Number.parseInt(fs.readFileSync(`/proc/${init}/task/${init}/children`, 'utf8').trim().split(' ')[0] ?? '', 10);
    if (!Number.isSafeInteger(first) || first <= 0) return undefined;
    const line = fs
      .readFileSync(`/proc/${first}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('NSpid:'));
    const inner = Number.parseInt(line?.trim().split(/\s+/).at(-1) ?? '', 10);
    return Number.isSafeInteger(inner) && inner > 0 ? inner : undefined;
  } catch {
    return undefined; // gone already
  }
}

/** The `child-pid` of bwrap's info JSON, or undefined when bwrap wrote none. */
function initPid(json: string): number | undefined {
  if (json.trim() === '') return undefined;
  const pid = (JSON.parse(json) as { 'child-pid'?: unknown })['child-pid'];
  return typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 1 ? pid : undefined;
}
