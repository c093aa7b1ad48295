import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Running execs of a directory-backed sandbox, one small file per process in the sandbox's
 * `procs/` directory. A file per pid (rather than a list in the record) lets execs in several
 * host processes register and finish without read-modify-write races, and lets `destroy` in
 * yet another process find and kill them.
 */

/** How a tracked pid is killed: as a process group (local) or as one process whose death takes its namespace down (bwrap). */
export type KillMode = 'group' | 'process';

interface TrackedProcess {
  readonly pid: number;
  readonly mode: KillMode;
  /** Kernel start time of the pid, so a recycled pid is never killed by mistake. */
  readonly startTime: string | undefined;
}

/** How long `killTrackedProcesses` waits for killed processes to disappear before deleting their files. */
const KILL_WAIT_MS = 5_000;
const KILL_POLL_MS = 10;

/** Records `pid` as running in the sandbox whose `procs/` directory is `procsDir`. Throws ENOENT when the sandbox is gone. */
export function trackProcess(procsDir: string, pid: number, mode: KillMode): void {
  const entry: TrackedProcess = { pid, mode, startTime: processStartTime(pid) };
  fs.writeFileSync(path.join(procsDir, String(pid)), JSON.stringify(entry));
}

/** Forgets `pid`; a sandbox destroyed meanwhile is fine. */
export function untrackProcess(procsDir: string, pid: number): void {
  fs.rmSync(path.join(procsDir, String(pid)), { force: true });
}

/** SIGKILLs a process group or a single process, ignoring one that is already gone. */
export function killProcess(pid: number, mode: KillMode): void {
  signalProcess(pid, mode, 'SIGKILL');
}

/** Sends `signal` to a process group or a single process, ignoring one that is already gone. */
export function signalProcess(pid: number, mode: KillMode, signal: NodeJS.Signals): void {
  try {
    process.kill(mode === 'group' ? -pid : pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * Kills every process tracked in `procsDir` and waits until each is dead (or a zombie), so the
 * caller can delete the sandbox's files without a killed process still writing into them.
 */
export async function killTrackedProcesses(procsDir: string): Promise<void> {
  let names: string[];
  try {
    names = fs.readdirSync(procsDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const victims: TrackedProcess[] = [];
  for (const name of names) {
    const entry = readEntry(path.join(procsDir, name));
    if (entry === undefined || processStartTime(entry.pid) !== entry.startTime) continue;
    killProcess(entry.pid, entry.mode);
    victims.push(entry);
  }
  const deadline = Date.now() + KILL_WAIT_MS;
  for (const victim of victims) {
    while (isAlive(victim) && Date.now() < deadline) await sleep(KILL_POLL_MS);
  }
}

function readEntry(file: string): TrackedProcess | undefined {
  try {
    const entry = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<TrackedProcess>;
    if (!Number.isSafeInteger(entry.pid) || (entry.pid ?? 0) <= 1) return undefined;
    return { pid: entry.pid as number, mode: entry.mode === 'group' ? 'group' : 'process', startTime: entry.startTime };
  } catch {
    return undefined; // a half-written entry belongs to an exec that is registering right now and will see the sandbox gone
  }
}

function isAlive(entry: TrackedProcess): boolean {
  const stat = readStat(entry.pid);
  return stat !== undefined && stat.startTime === entry.startTime && stat.state !== 'Z';
}

/** The kernel's start time of `pid` (field 22 of /proc/PID/stat), or undefined without procfs or once it is gone. */
export function processStartTime(pid: number): string | undefined {
  return readStat(pid)?.startTime;
}

function readStat(pid: number): { state: string; startTime: string } | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses; fields after its closing ')' are plain.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTime = fields[19];
  return state === undefined || startTime === undefined ? undefined : { state, startTime };
}
