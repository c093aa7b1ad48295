import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { armKill } from './exec-deadline.js';
import { sealedStdio } from './inherited-fds.js';
import type { ExecExit, ExecOptions, ExecProcess, ExecSignal } from './sandbox-provider.js';
import { checkedSignal } from './sandbox-spec.js';

/** One command as a provider starts it on the host (for bwrap: the `bwrap` process itself). */
export interface HostCommand {
  readonly command: string;
  readonly args: readonly string[];
  /** The complete environment; nothing of the host's own leaks through. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Start in a new session and process group, so the group can be killed as one. */
  readonly detached: boolean;
  /** Additional pipes from the command (fd 3, 4, …), for provider protocols such as bwrap's `--info-fd`. */
  readonly extraPipes?: number;
  /**
   * Arguments, put before `args`, that make the command close descriptor `fd` before it starts
   * anything (bwrap: `--args FD`). Every descriptor the host process would otherwise inherit
   * from Holdfast's parent is a `/dev/null` placeholder in the child (see `inherited-fds.ts`);
   * with this, what the command runs does not hold even the placeholder.
   */
  readonly closeFdArgs?: (fd: number) => readonly string[];
}

/** How a provider tracks and kills what one command started; see {@link ProcessHooks.start}. */
export interface ProcessTree {
  /**
   * `SIGKILL`: kills the command's whole tree (its process group, or its pid namespace); any
   * other signal is delivered to the command's process group. Called only while the command runs.
   */
  kill(signal: ExecSignal): void;
  /** The command's pid as the sandbox sees it; absent when that is its host pid (no pid namespace). */
  readonly pid?: Promise<number | undefined>;
  /** Called once when the command has exited: stop tracking it, kill what it left behind. */
  exited(): void;
}

/** The provider's part in running a host process. */
export interface ProcessHooks {
  /**
   * Called once the command has a pid (with `extraPipes` readable at `child.stdio[3…]`).
   * A throw kills the command by pid and is rethrown from `exec`.
   */
  start(child: ChildProcess & { readonly pid: number }): ProcessTree;
}

/** Exit status a shell reports for a command that could not be found or not executed. */
const EXIT_NOT_FOUND = 127;
const EXIT_NOT_EXECUTABLE = 126;

/**
 * Starts `cmd` and wraps it as an {@link ExecProcess}: streams output, feeds stdin, enforces
 * `timeoutMs` and `signal` by killing the whole tree. Shared by every provider that runs
 * commands through a host process, and the only place Holdfast starts one: the command gets
 * its stdio, its `extraPipes` and no other descriptor of the host, whatever Holdfast's own
 * parent left open.
 */
export function startHostProcess(cmd: HostCommand, options: ExecOptions, hooks: ProcessHooks): ExecProcess {
  const input = options.stdin;
  const { stdio, placeholders } = sealedStdio([
    input === undefined ? 'ignore' : 'pipe',
    'pipe',
    'pipe',
    ...Array<'pipe'>(cmd.extraPipes ?? 0).fill('pipe'),
  ]);
  const closeArgs = cmd.closeFdArgs === undefined ? [] : placeholders.flatMap(cmd.closeFdArgs);
  const child = spawn(cmd.command, [...closeArgs, ...cmd.args], {
    env: { ...cmd.env },
    detached: cmd.detached,
    stdio,
    ...(cmd.cwd === undefined ? {} : { cwd: cmd.cwd }),
  });
  const pid = child.pid;
  let tree: ProcessTree | undefined;
  if (pid !== undefined) {
    try {
      tree = hooks.start(child as ChildProcess & { pid: number });
    } catch (error) {
      child.kill('SIGKILL');
      throw error;
    }
  }
  let running = tree !== undefined;
  const kill = (signal?: ExecSignal): void => {
    const checked = checkedSignal(signal);
    if (running) tree?.kill(checked);
  };
  const armed = armKill(options, () => kill('SIGKILL'));

  const stdin = feedStdin(child.stdin, input);
  const exit = new Promise<ExecExit>((resolve, reject) => {
    const finish = (): void => {
      running = false;
      armed.disarm();
      if (typeof input === 'object' && !(input instanceof Uint8Array) && child.stdin !== null) input.unpipe(child.stdin);
    };
    child.once('exit', (code, sig) => {
      finish();
      tree?.exited();
      resolve({ code, signal: sig, timedOut: armed.timedOut });
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      if (pid !== undefined) return; // errors after a successful spawn (a failed kill) change nothing about the exit
      finish();
      if (error.code === 'ENOENT') resolve({ code: EXIT_NOT_FOUND, signal: null, timedOut: false });
      else if (error.code === 'EACCES' || error.code === 'EPERM') resolve({ code: EXIT_NOT_EXECUTABLE, signal: null, timedOut: false });
      else reject(error);
    });
  });

  // Both are pipes by construction; the assertion documents that for the type checker.
  const { stdout, stderr } = child as { stdout: NonNullable<typeof child.stdout>; stderr: NonNullable<typeof child.stderr> };
  return { stdout, stderr, stdin, exit, kill, pid: tree?.pid ?? Promise.resolve(pid) };
}

/** Connects the requested input to the child's stdin; returns it only for `'pipe'`. */
function feedStdin(childStdin: Writable | null, input: ExecOptions['stdin']): Writable | undefined {
  if (childStdin === null) return undefined;
  // A command may exit without reading all its input (EPIPE); its exit status tells that story.
  childStdin.on('error', () => undefined);
  if (input === 'pipe') return childStdin;
  if (typeof input === 'string' || input instanceof Uint8Array) childStdin.end(input);
  else if (input !== undefined) input.pipe(childStdin);
  return undefined;
}
