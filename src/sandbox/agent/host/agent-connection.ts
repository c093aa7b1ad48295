import type { Readable, Writable } from 'node:stream';
import { printable } from '../../../core/paths.js';
import { type ErrorCode, type ErrorData, errorFor, HoldfastError, InputError, StoreError } from '../../../errors.js';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import type { AgentOp, ResponseHeader, WireError } from '../wire/protocol.js';

/** How an exec ended, as a sandbox provider or `child_process` reports it. */
export interface AgentExit {
  readonly code?: number | null | undefined;
  readonly signal?: string | null | undefined;
  readonly timedOut?: boolean | undefined;
}

/**
 * The slice of a running exec the client needs: `SandboxHandle.exec(argv, { stdin: 'pipe' })`
 * fits, and so does a `child_process.spawn` wrapped in a few lines.
 */
export interface AgentChannel {
  /** Present when the exec was started with `stdin: 'pipe'` (required here). */
  readonly stdin: Writable | undefined;
  readonly stdout: Readable;
  readonly stderr?: Readable | null | undefined;
  readonly exit: Promise<AgentExit>;
  kill(): void;
}

/** Runs a command in the sandbox with piped stdin. */
export type AgentExecFn = (argv: readonly string[], options: { readonly stdin: 'pipe' }) => AgentChannel | Promise<AgentChannel>;

/** A final answer: the `result` field and the payload. */
export interface AgentReply {
  readonly result: unknown;
  readonly payload: Buffer;
}

/** Called with each `more: true` part of a streamed answer. */
export type PartHandler = (header: ResponseHeader, payload: Buffer) => void;

interface Pending {
  readonly op: AgentOp;
  readonly resolve: (reply: AgentReply) => void;
  readonly reject: (error: Error) => void;
  readonly onPart: PartHandler | undefined;
}

const STDERR_TAIL_BYTES = 4096;
/** After stdout ends, wait this long for the exit status and the last stderr lines. */
const EXIT_GRACE_MS = 500;

/**
 * Requests and responses over one agent channel: ids, matching, a FIFO-fair bound on requests
 * outstanding at the agent, a watchdog (no frame for `timeoutMs` while requests are waiting
 * means the agent is stuck: `TIMEOUT`, and the channel is killed), and one failure for
 * everything once the channel is gone (`STORE_UNAVAILABLE` with the stderr tail).
 */
export class AgentConnection {
  private readonly decoder = new FrameDecoder();
  private readonly pending = new Map<number, Pending>();
  private readonly waiting: Array<() => void> = [];
  private nextId = 1;
  /** Slots held by requests sent (or about to be sent) and not yet answered. */
  private granted = 0;
  private lastActivity = Date.now();
  private stderrTail = '';
  private agentComplaint: string | undefined;
  private failure: HoldfastError | undefined;
  private closing = false;
  private inputPaused = false;
  private readonly watchdog: NodeJS.Timeout;

  private readonly stdin: Writable;

  constructor(
    private readonly channel: AgentChannel,
    private readonly timeoutMs: number,
    private readonly maxInFlight: number,
  ) {
    if (channel.stdin === undefined) throw new InputError('INVALID_INPUT', 'the agent channel has no stdin: exec it with stdin "pipe"');
    this.stdin = channel.stdin;
    channel.stdout.on('data', (chunk: Buffer) => this.receive(chunk));
    channel.stdout.on('end', () => void this.channelGone('closed its output'));
    channel.stdout.on('error', (error) => void this.channelGone(`output failed (${error.message})`));
    this.stdin.on('error', () => undefined); // EPIPE: the agent is gone; its exit says why.
    channel.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    channel.exit.then(
      (exit) => void this.channelGone(describeExit(exit)),
      (error: unknown) => void this.channelGone(`exec failed (${String(error)})`),
    );
    this.watchdog = setInterval(() => this.checkStuck(), Math.max(50, Math.floor(timeoutMs / 4)));
    this.watchdog.unref();
  }

  /** True while the channel works and `close` was not called: the connection can take requests. */
  get alive(): boolean {
    return this.failure === undefined && !this.closing;
  }

  /**
   * Sends a request once fewer than `maxInFlight` are outstanding (in call order) and returns
   * its id and its final answer. Error frames reject with the matching `HoldfastError`.
   */
  async start(
    op: AgentOp,
    fields: object,
    payload?: Uint8Array,
    onPart?: PartHandler,
  ): Promise<{ id: number; reply: Promise<AgentReply> }> {
    if (this.failure !== undefined) throw this.failure;
    await this.acquireSlot();
    if (this.failure !== undefined) throw this.failure;
    const id = this.nextId++;
    let frame: Buffer[];
    try {
      frame = encodeFrame({ ...fields, id, op }, payload);
    } catch (error) {
      this.releaseSlot();
      throw error;
    }
    const reply = new Promise<AgentReply>((resolve, reject) => this.pending.set(id, { op, resolve, reject, onPart }));
    if (this.pending.size === 1) this.lastActivity = Date.now();
    for (const buf of frame) this.stdin.write(buf);
    return { id, reply };
  }

  /** `start` and wait for the answer. */
  async call(op: AgentOp, fields: object, payload?: Uint8Array): Promise<AgentReply> {
    return (await this.start(op, fields, payload)).reply;
  }

  /** Asks the agent to stop a streamed request; it still ends with a final frame. */
  cancel(target: number): void {
    if (this.failure !== undefined) return;
    const id = this.nextId++;
    for (const buf of encodeFrame({ id, op: 'cancel', target })) this.stdin.write(buf);
  }

  /** Stops reading the agent's output (a streamed answer's consumer is behind); the agent then blocks on its writes. */
  pauseInput(): void {
    this.inputPaused = true;
    this.channel.stdout.pause();
  }

  resumeInput(): void {
    this.inputPaused = false;
    this.channel.stdout.resume();
  }

  /** Ends stdin (the agent finishes what it has and exits) and waits for the exit; kills it after `timeoutMs`. */
  async close(): Promise<AgentExit> {
    this.closing = true;
    clearInterval(this.watchdog);
    this.stdin.end();
    const timer = setTimeout(() => this.channel.kill(), this.timeoutMs);
    try {
      return await this.channel.exit;
    } finally {
      clearTimeout(timer);
    }
  }

  private receive(chunk: Buffer): void {
    this.lastActivity = Date.now();
    for (const d of this.decoder.push(chunk)) {
      if (d.kind === 'fatal') {
        this.fail(new StoreError(`[agent] sent a frame that cannot be read: ${d.error.message}`, { cause: d.error }));
        this.channel.kill();
        return;
      }
      if (d.kind === 'malformed') continue;
      const header = d.frame.header as unknown as ResponseHeader;
      // An error without an id answers a frame the agent could not read; it explains a death that may follow.
      if (header.id === null && header.error !== undefined) this.agentComplaint = agentText(header.error?.message);
      const p = typeof header.id === 'number' ? this.pending.get(header.id) : undefined;
      if (p === undefined) continue;
      if (header.more === true) {
        p.onPart?.(header, d.frame.payload);
        continue;
      }
      this.pending.delete(header.id as number);
      this.releaseSlot();
      if (header.error !== undefined) p.reject(fromWire(header.error, p.op));
      else p.resolve({ result: header.result, payload: d.frame.payload });
    }
  }

  /** Takes a slot, or queues for one; slots pass to waiters in arrival order, so frames go out in call order. */
  private acquireSlot(): Promise<void> {
    if (this.granted < this.maxInFlight && this.waiting.length === 0) {
      this.granted += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private releaseSlot(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.granted -= 1;
    else next();
  }

  private checkStuck(): void {
    if (this.pending.size === 0 || this.inputPaused || Date.now() - this.lastActivity < this.timeoutMs) return;
    this.fail(
      new HoldfastError('TIMEOUT', `[agent] no answer for ${this.timeoutMs} ms; the agent was stopped`, {
        data: { timeoutMs: this.timeoutMs },
      }),
    );
    this.channel.kill();
  }

  private async channelGone(why: string): Promise<void> {
    if (this.failure !== undefined) return;
    // Let the exit status and the last stderr lines arrive before explaining the failure.
    await Promise.race([this.channel.exit.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, EXIT_GRACE_MS))]);
    const tail = this.stderrTail.trim();
    const complaint = this.agentComplaint === undefined ? '' : `; it reported: ${this.agentComplaint}`;
    const message = `[agent] ${why}${this.closing ? '' : ' unexpectedly'}${complaint}${tail === '' ? '' : `; stderr: ${tail}`}`;
    this.fail(new StoreError(message, { transient: true, data: { stderr: tail } }));
  }

  private fail(error: HoldfastError): void {
    if (this.failure !== undefined) return;
    this.failure = error;
    clearInterval(this.watchdog);
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
    for (const wake of this.waiting.splice(0)) wake();
  }
}

function describeExit(exit: AgentExit): string {
  if (exit.timedOut === true) return 'timed out';
  if (exit.signal !== undefined && exit.signal !== null) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code ?? 'unknown'}`;
}

/**
 * Codes an agent may answer with: the ones its own ops raise. Any other code (`STALE_LEASE`,
 * `UNAUTHORIZED`, `SETUP_FAILED`, …) speaks for the host, and an agent is not the host: it
 * arrives as `INTERNAL`, so a sandbox cannot make Holdfast believe it lost a lease or a store.
 */
export const AGENT_ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'CONFLICT',
  'INTEGRITY',
  'LIMIT_EXCEEDED',
  'INVALID_PATH',
  'INVALID_INPUT',
  'FORBIDDEN',
  'CANCELLED',
  'STORE_UNAVAILABLE',
  'INTERNAL',
]);
/** Longest agent error message kept (it is the sandbox's text, stored with failed checkpoints). */
const MAX_AGENT_MESSAGE_CHARS = 1000;
/** Largest agent error `data` kept, as JSON text; bigger data is dropped. */
const MAX_AGENT_DATA_CHARS = 4096;

/** An agent's text as it may appear in an error message: printable and bounded. */
export function agentText(raw: unknown): string {
  return printable(String(raw)).slice(0, MAX_AGENT_MESSAGE_CHARS);
}

/**
 * An error frame as the `HoldfastError` subclass its code belongs to. The frame is the
 * sandbox's: a code outside {@link AGENT_ERROR_CODES} becomes `INTERNAL`, the message is made
 * printable and bounded, and `data` is kept only when it is a small JSON object.
 */
export function fromWire(wire: WireError, op: AgentOp): HoldfastError {
  const code: ErrorCode = AGENT_ERROR_CODES.has(wire?.code) ? wire.code : 'INTERNAL';
  const text = agentText(wire?.message ?? 'agent error');
  const message = text.startsWith('[agent]') ? text : `[agent] ${text}`;
  const options = { data: { ...agentData(wire?.data), op } };
  return errorFor(code, message, options);
}

function agentData(raw: unknown): ErrorData {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return {};
  try {
    return JSON.stringify(raw).length <= MAX_AGENT_DATA_CHARS ? (raw as ErrorData) : {};
  } catch {
    return {};
  }
}
