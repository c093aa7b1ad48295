import { type Duplex, PassThrough, type Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { NotFoundError } from '../../../errors.js';
import { armKill } from '../../exec-deadline.js';
import type { ExecExit, ExecOptions, ExecProcess, ExecSignal } from '../../sandbox-provider.js';
import { checkedSignal } from '../../sandbox-spec.js';
import { type EngineClient, engineError } from './engine-client.js';
import { commandPidArgv, EXEC_TAG_VARIABLE, killArgv, newExecTag, signalArgv, wrappedArgv } from './exec-scripts.js';
import { StreamDemux } from './stream-demux.js';

/** How long after a kill sweep the exec must have ended before the sweep runs again (it may have started after the first). */
const KILL_RETRY_MS = 300;
/** Sweeps per kill before giving up (the exec is then left to `destroy`). */
const MAX_KILL_SWEEPS = 20;
/** Polling of exec inspect once the stream has closed, until the daemon reports the exit. */
const EXIT_POLL_FIRST_MS = 5;
const EXIT_POLL_MAX_MS = 250;
/** Lookups of a started command's pid, and the wait between two (the wrapper may not have forked it yet). */
const PID_LOOKUPS = 10;
const PID_LOOKUP_WAIT_MS = 50;
/** Output a provider-internal command may print to {@link runCaptured}; what is past it is dropped. */
const MAX_CAPTURED_BYTES = 4096;
/** Exit status the kernel's SIGKILL gives a process, as the runtime reports it. */
const EXIT_SIGKILL = 128 + 9;

/** One exec as the provider describes it. */
export interface DockerExecRequest {
  readonly engine: EngineClient;
  /** Container id or name. */
  readonly container: string;
  readonly sandboxId: string;
  readonly argv: readonly string[];
  /** Absolute working directory inside the container. */
  readonly cwd: string;
  /** The exec's own variables (over the container's environment, which holds the spec's). */
  readonly env: Readonly<Record<string, string>>;
  /** `uid:gid` the command runs as. */
  readonly user: string;
}

/**
 * Runs one command in a container and wraps it as an {@link ExecProcess}: exec create, then
 * exec start over a hijacked connection carrying stdin one way (half-closed for EOF) and the
 * multiplexed stdout/stderr the other; the exit code comes from exec inspect once the stream
 * closes. The command runs under the wrapper of `exec-scripts.ts`, so `kill()`, `timeoutMs`
 * and `signal` take down its whole process tree with a sweep exec.
 *
 * Because creating an exec is asynchronous, a container found gone at that point makes `exit`
 * reject with `NOT_FOUND` (and the streams end empty); a container removed while the command
 * runs ends it as killed (`signal: 'SIGKILL'`).
 */
export function startDockerExec(request: DockerExecRequest, options: ExecOptions): ExecProcess {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const input = options.stdin;
  const stdinPipe = input === 'pipe' ? new PassThrough() : undefined;
  const tag = newExecTag();
  let started = false;
  let finished = false;
  let killRequested = false;
  let sweeping = false;

  const sweep = async (): Promise<void> => {
    if (sweeping) return;
    sweeping = true;
    try {
      for (let i = 0; i < MAX_KILL_SWEEPS && !finished; i += 1) {
        await runDetached(request.engine, request.container, killArgv(tag), request.user).catch(() => undefined);
        await sleep(KILL_RETRY_MS);
      }
    } finally {
      sweeping = false;
    }
  };
  /** Signals other than SIGKILL asked for before the exec started, delivered once it has. */
  const held: ExecSignal[] = [];
  const deliver = (signal: ExecSignal): void => {
    const argv = signalArgv(tag, signal.replace(/^SIG/, ''));
    void runDetached(request.engine, request.container, argv, request.user).catch(() => undefined);
  };
  const kill = (signal?: ExecSignal): void => {
    const checked = checkedSignal(signal);
    if (finished) return;
    if (checked !== 'SIGKILL') {
      if (started) deliver(checked);
      else held.push(checked);
      return;
    }
    killRequested = true;
    if (started) void sweep();
  };

  const armed = armKill(options, () => kill('SIGKILL'));
  let learnPid: (pid: number | undefined) => void = () => undefined;
  const pid = new Promise<number | undefined>((resolve) => {
    learnPid = resolve;
  });

  const run = async (): Promise<ExecExit> => {
    const killedExit = (): ExecExit => ({ code: null, signal: 'SIGKILL', timedOut: armed.timedOut });
    if (killRequested) return killedExit();
    const execId = await createExec(request, tag, input !== undefined);
    if (killRequested) return killedExit();
    const { socket, head } = await request.engine.hijack(`/exec/${execId}/start`, { Detach: false, Tty: false });
    started = true;
    if (killRequested) void sweep();
    void findCommandPid().then(learnPid, () => learnPid(undefined));
    for (const signal of held.splice(0)) deliver(signal);
    const streamDone = pump(socket, head, stdout, stderr);
    feedStdin(socket, input, stdinPipe);
    await streamDone;
    const code = await exitCode(request.engine, execId);
    if (code === undefined) return killedExit(); // the container went away under the command
    if (killRequested && code === EXIT_SIGKILL) return killedExit();
    return { code, signal: null, timedOut: armed.timedOut };
  };

  /** Asks the container, a few times while the command may still be starting, for the command's pid. */
  async function findCommandPid(): Promise<number | undefined> {
    for (let i = 0; i < PID_LOOKUPS && !finished; i += 1) {
      const out = await runCaptured(request.engine, request.container, commandPidArgv(tag), request.user);
      const found = Number.parseInt(out.trim(), 10);
      if (Number.isSafeInteger(found) && found > 0) return found;
      await sleep(PID_LOOKUP_WAIT_MS);
    }
    return undefined;
  }

  const exit = run().finally(() => {
    finished = true;
    learnPid(undefined);
    armed.disarm();
    // Once started, the demultiplexer ends the streams after the last byte; before, nothing will.
    if (!started) {
      stdout.end();
      stderr.end();
    }
  });
  exit.catch(() => undefined); // the caller sees the rejection through `exit`; this keeps it from being unhandled meanwhile
  return { stdout, stderr, stdin: stdinPipe, exit, kill, pid };

  async function createExec(req: DockerExecRequest, execTag: string, attachStdin: boolean): Promise<string> {
    const answer = await req.engine.request('POST', `/containers/${encodeURIComponent(req.container)}/exec`, {
      AttachStdin: attachStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      User: req.user,
      Env: Object.entries({ ...req.env, [EXEC_TAG_VARIABLE]: execTag }).map(([k, v]) => `${k}=${v}`),
      Cmd: wrappedArgv(req.cwd, req.argv),
    });
    if (answer.status === 404) {
      throw new NotFoundError(`[docker] sandbox ${req.sandboxId} is gone`, {
        data: { provider: 'docker', id: req.sandboxId },
      });
    }
    const id = (answer.body as { Id?: unknown } | undefined)?.Id;
    if (answer.status !== 201 || typeof id !== 'string') throw engineError(answer.status, 'exec create', answer.body);
    return id;
  }
}

/**
 * Demultiplexes the socket into stdout/stderr (which the demultiplexer ends once it has
 * forwarded everything); resolves when the daemon has closed the stream, that is when the
 * command's output is complete, whether or not the caller has read it yet.
 */
function pump(socket: Duplex, head: Buffer, stdout: PassThrough, stderr: PassThrough): Promise<void> {
  const demux = new StreamDemux(stdout, stderr);
  return new Promise((resolve) => {
    const closed = (): void => {
      if (!demux.writableEnded) demux.end();
      resolve();
    };
    demux.once('error', () => {
      socket.destroy();
      stdout.end();
      stderr.end();
    });
    socket.on('error', () => socket.destroy());
    socket.once('close', closed);
    if (head.length > 0) demux.write(head);
    socket.pipe(demux);
  });
}

/** Connects the requested input to the hijacked socket; ending the input half-closes it (EOF). */
function feedStdin(socket: Writable, input: ExecOptions['stdin'], stdinPipe: PassThrough | undefined): void {
  if (input === undefined) return;
  if (stdinPipe !== undefined) stdinPipe.pipe(socket);
  else if (typeof input === 'string' || input instanceof Uint8Array) socket.end(input);
  else input.pipe(socket);
}

/** The exit code of a finished exec, or undefined when the exec (its container) is gone. */
async function exitCode(engine: EngineClient, execId: string): Promise<number | undefined> {
  let wait = EXIT_POLL_FIRST_MS;
  for (;;) {
    const answer = await engine.request('GET', `/exec/${execId}/json`);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw engineError(answer.status, 'exec inspect', answer.body);
    const state = answer.body as { Running?: unknown; ExitCode?: unknown };
    if (state.Running !== true && typeof state.ExitCode === 'number') return state.ExitCode;
    await sleep(wait);
    wait = Math.min(wait * 2, EXIT_POLL_MAX_MS);
  }
}

/**
 * Runs a provider-internal command (the kill sweep, the workspace setup) to completion and
 * returns its exit code; its output is discarded.
 */
export async function runDetached(
  engine: EngineClient,
  container: string,
  argv: readonly string[],
  user: string,
): Promise<number | undefined> {
  const created = await engine.request('POST', `/containers/${encodeURIComponent(container)}/exec`, {
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: user,
    Cmd: argv,
  });
  const id = (created.body as { Id?: unknown } | undefined)?.Id;
  if (created.status !== 201 || typeof id !== 'string') throw engineError(created.status, 'exec create', created.body);
  const { socket, head } = await engine.hijack(`/exec/${id}/start`, { Detach: false, Tty: false });
  void head;
  await new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.resume();
  });
  return exitCode(engine, id);
}

/**
 * Runs a provider-internal command (the pid lookup) to completion and resolves with the first
 * {@link MAX_CAPTURED_BYTES} of its stdout, as UTF-8; stderr is discarded.
 */
export async function runCaptured(engine: EngineClient, container: string, argv: readonly string[], user: string): Promise<string> {
  const created = await engine.request('POST', `/containers/${encodeURIComponent(container)}/exec`, {
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: user,
    Cmd: argv,
  });
  const id = (created.body as { Id?: unknown } | undefined)?.Id;
  if (created.status !== 201 || typeof id !== 'string') throw engineError(created.status, 'exec create', created.body);
  const { socket, head } = await engine.hijack(`/exec/${id}/start`, { Detach: false, Tty: false });
  const out = new PassThrough();
  const err = new PassThrough();
  err.resume();
  const parts: Buffer[] = [];
  let kept = 0;
  out.on('data', (chunk: Buffer) => {
    if (kept < MAX_CAPTURED_BYTES) parts.push(chunk.subarray(0, MAX_CAPTURED_BYTES - kept));
    kept += chunk.length;
  });
  const ended = new Promise<void>((resolve) => out.once('end', () => resolve()));
  await pump(socket, head, out, err);
  await ended;
  return Buffer.concat(parts).toString('utf8');
}
