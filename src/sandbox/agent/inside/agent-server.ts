import type { Readable, Writable } from 'node:stream';
import { InputError } from '../../../errors.js';
import { type DecodedFrame, encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import { type AgentOp, type HelloResult, PROTOCOL_VERSION } from '../wire/protocol.js';
import { Fields } from './request-fields.js';
import { toHoldfastError } from './safe-fs.js';

/** Queued request bytes above which the agent stops reading stdin, and below which it resumes. */
const QUEUE_HIGH_BYTES = 32 * 1024 * 1024;
const QUEUE_LOW_BYTES = 8 * 1024 * 1024;

/** What a handler sees of one request. */
export interface RequestContext {
  readonly id: number;
  readonly fields: Fields;
  readonly payload: Buffer;
  /** Sends one part of a streamed result (`more: true`), waiting while stdout is full. */
  part(header: Record<string, unknown>, payload?: Uint8Array): Promise<void>;
  /** True once the client sent `cancel` for this request. */
  isCancelled(): boolean;
}

/** The final answer of a handler. */
export interface HandlerReply {
  readonly result: unknown;
  readonly payload?: Uint8Array;
}

/** Serves one op; anything it throws becomes an error frame. */
export type OpHandler = (ctx: RequestContext) => HandlerReply | Promise<HandlerReply>;

interface Queued {
  readonly id: number;
  readonly op: string;
  readonly header: Record<string, unknown>;
  readonly payload: Buffer;
}

/**
 * The agent's request loop: decodes frames from `input`, answers `cancel` at once and runs
 * every other request one at a time in arrival order (so write batches apply in the order they
 * were sent, while the client may pipeline). Nothing a request contains can crash the loop; a
 * framing error is reported with `id: null` and ends the session, because the stream is out
 * of step. Resolves with the exit code once input has ended and every request is answered.
 */
export class AgentServer {
  private readonly decoder = new FrameDecoder();
  private readonly queue: Queued[] = [];
  private readonly cancelled = new Set<number>();
  private queuedBytes = 0;
  private greeted = false;
  private inputDone = false;
  private running = false;
  private exitCode = 0;
  private finish: (code: number) => void = () => undefined;

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    private readonly handlers: Readonly<Partial<Record<AgentOp, OpHandler>>>,
    private readonly hello: () => HelloResult,
  ) {}

  /** Starts serving; resolves with the exit code (0 after a clean end of input). */
  run(): Promise<number> {
    const done = new Promise<number>((resolve) => {
      this.finish = resolve;
    });
    this.output.on('error', () => this.finish(1));
    this.input.on('data', (chunk: Buffer) => this.receive(chunk));
    this.input.on('end', () => this.endInput(0));
    this.input.on('error', () => this.endInput(1));
    return done;
  }

  private receive(chunk: Buffer): void {
    const decoded: DecodedFrame[] = this.decoder.push(chunk);
    for (const d of decoded) {
      if (d.kind === 'fatal') {
        // Requests framed before the bad one still run; nothing after it is read.
        this.sendQuietly({ id: null, error: d.error.toJSON() });
        this.input.pause();
        this.input.removeAllListeners('data');
        this.endInput(2);
        break;
      }
      if (d.kind === 'malformed') {
        this.sendQuietly({ id: null, error: d.error.toJSON() });
        continue;
      }
      const { header, payload } = d.frame;
      const id = header.id;
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) {
        this.sendQuietly({ id: null, error: new InputError('INVALID_INPUT', 'request id must be a non-negative integer').toJSON() });
        continue;
      }
      const op = typeof header.op === 'string' ? header.op : '';
      if (op === 'cancel') {
        this.cancel(id, header);
        continue;
      }
      this.queue.push({ id, op, header, payload });
      this.queuedBytes += payload.length;
    }
    if (this.queuedBytes > QUEUE_HIGH_BYTES) this.input.pause();
    void this.drainQueue();
  }

  private cancel(id: number, header: Record<string, unknown>): void {
    const target = header.target;
    if (typeof target === 'number') this.cancelled.add(target);
    this.sendQuietly({ id, result: {} });
  }

  private endInput(code: number): void {
    if (this.inputDone) return;
    this.inputDone = true;
    this.exitCode = code;
    void this.drainQueue();
  }

  private async drainQueue(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let next = this.queue.shift(); next !== undefined; next = this.queue.shift()) {
        this.queuedBytes -= next.payload.length;
        if (this.queuedBytes < QUEUE_LOW_BYTES && !this.inputDone) this.input.resume();
        await this.serve(next);
        this.cancelled.delete(next.id);
      }
    } finally {
      this.running = false;
    }
    if (this.inputDone) this.finish(this.exitCode);
  }

  private async serve(request: Queued): Promise<void> {
    const { id, op } = request;
    try {
      const reply = await this.dispatch(request);
      await this.send({ id, result: reply.result }, reply.payload);
    } catch (error) {
      await this.send({ id, error: toHoldfastError(error, op).toJSON() }).catch(() => undefined);
    }
  }

  private async dispatch(request: Queued): Promise<HandlerReply> {
    const { id, op, header, payload } = request;
    const fields = new Fields(header, op === '' ? 'request' : op);
    if (op === 'hello') return this.handshake(fields);
    if (!this.greeted) throw new InputError('INVALID_INPUT', `send hello before ${op === '' ? 'any request' : op}`);
    const handler = Object.hasOwn(this.handlers, op) ? this.handlers[op as AgentOp] : undefined;
    if (handler === undefined) throw new InputError('INVALID_INPUT', `unknown op "${op}"`, { data: { op } });
    return handler({
      id,
      fields,
      payload,
      part: (partHeader, partPayload) => this.send({ ...partHeader, id, more: true }, partPayload),
      isCancelled: () => this.cancelled.has(id),
    });
  }

  private handshake(fields: Fields): HandlerReply {
    const version = fields.int('version', 0);
    if (version !== PROTOCOL_VERSION) {
      throw new InputError(
        'INVALID_INPUT',
        `this agent speaks protocol v${PROTOCOL_VERSION}, the client v${version}: stage the agent that ships with the client`,
        { data: { agentVersion: PROTOCOL_VERSION, clientVersion: version } },
      );
    }
    this.greeted = true;
    return { result: this.hello() };
  }

  /** Sends a small frame from the decode path; a frame that cannot be encoded is dropped rather than thrown. */
  private sendQuietly(header: Record<string, unknown>): void {
    this.send(header).catch(() => undefined);
  }

  /** Writes one frame (all its buffers in one tick, so frames never interleave), then honours backpressure. */
  private async send(header: Record<string, unknown>, payload?: Uint8Array): Promise<void> {
    let ok = true;
    for (const buf of encodeFrame(header, payload)) ok = this.output.write(buf);
    if (!ok) await new Promise<void>((resolve) => this.output.once('drain', resolve));
  }
}
