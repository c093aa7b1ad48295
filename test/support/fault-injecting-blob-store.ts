import { type Readable, Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BlobBody, BlobStat, BlobStore, ByteRange, PutOptions, PutResult } from '../../src/blob-store/blob-store.js';
import { StoreError } from '../../src/errors.js';

/** The BlobStore operations a rule can target. */
export type BlobOp = 'put' | 'get' | 'getStream' | 'stat' | 'list' | 'delete';

/** What happens when a rule fires. */
export type Fault =
  /** The call rejects without reaching the store (default: a transient STORE_UNAVAILABLE). */
  | { readonly kind: 'error'; readonly error?: () => Error }
  /** The call is delayed, then proceeds. */
  | { readonly kind: 'latency'; readonly ms: number }
  /** The call waits until `until` settles, then proceeds: held for exactly as long as the test needs, no wall-clock guess. */
  | { readonly kind: 'hold'; readonly until: Promise<unknown> }
  /** `put` reaches the store and succeeds, but the caller sees an error (a lost response). */
  | { readonly kind: 'lost-ack'; readonly error?: () => Error }
  /** Reads (`get`, `getStream`) return only their first `keepBytes` bytes. */
  | { readonly kind: 'truncate'; readonly keepBytes: number }
  /** Reads return data with bit `bit` of byte `offset` (relative to the read) flipped. */
  | { readonly kind: 'bitflip'; readonly offset?: number; readonly bit?: number };

/** When a fault fires. Counting is per rule, over the calls the rule matches. */
export interface FaultRule {
  /** Operations the rule applies to; all when omitted. */
  readonly ops?: readonly BlobOp[];
  /** Keys (or list prefixes) the rule applies to; all when omitted. */
  readonly key?: string | RegExp;
  /** First matching call (1-based) that fires; default 1. */
  readonly nth?: number;
  /** How many matching calls fire from `nth` on; default 1. Use `Infinity` for "always". */
  readonly times?: number;
  readonly fault: Fault;
}

/** One call as seen by the wrapper, in order. */
export interface RecordedCall {
  readonly op: BlobOp;
  readonly key: string;
  /** The fault that fired on this call, if any. */
  readonly fault?: Fault['kind'];
}

interface ActiveRule {
  readonly rule: FaultRule;
  seen: number;
  fired: number;
}

function transientError(op: BlobOp, key: string): Error {
  return new StoreError(`[faulty] injected failure in ${op} ${key}`, { transient: true, data: { injected: true } });
}

/**
 * Wraps any BlobStore and injects faults by rule: errors, latency, lost acknowledgements,
 * truncated or bit-flipped reads, on the Nth matching call. Every call is recorded, so tests
 * can also assert how many writes an operation made.
 */
export class FaultInjectingBlobStore implements BlobStore {
  readonly name: string;
  readonly calls: RecordedCall[] = [];
  private rules: ActiveRule[] = [];

  constructor(readonly inner: BlobStore) {
    this.name = `faulty(${inner.name})`;
  }

  /** Adds a rule; returns a function that removes it. */
  inject(rule: FaultRule): () => void {
    const active: ActiveRule = { rule, seen: 0, fired: 0 };
    this.rules.push(active);
    return () => {
      this.rules = this.rules.filter((r) => r !== active);
    };
  }

  /** Removes every rule (the call log is kept). */
  clear(): void {
    this.rules = [];
  }

  /** Number of recorded calls of `op`. */
  count(op: BlobOp): number {
    return this.calls.filter((c) => c.op === op).length;
  }

  async put(key: string, body: BlobBody, options?: PutOptions): Promise<PutResult> {
    const fault = await this.enter('put', key);
    const result = await this.inner.put(key, body, options);
    if (fault?.kind === 'lost-ack') throw (fault.error ?? (() => transientError('put', key)))();
    return result;
  }

  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    const fault = await this.enter('get', key);
    const bytes = await this.inner.get(key, range);
    return fault === undefined ? bytes : corrupt(bytes, fault);
  }

  async getStream(key: string, range?: ByteRange): Promise<Readable> {
    const fault = await this.enter('getStream', key);
    const stream = await this.inner.getStream(key, range);
    return fault === undefined || (fault.kind !== 'truncate' && fault.kind !== 'bitflip')
      ? stream
      : stream.pipe(corruptingTransform(fault));
  }

  async stat(key: string): Promise<BlobStat | undefined> {
    await this.enter('stat', key);
    return this.inner.stat(key);
  }

  async *list(prefix: string): AsyncIterable<BlobStat> {
    await this.enter('list', prefix);
    yield* this.inner.list(prefix);
  }

  async delete(key: string): Promise<void> {
    await this.enter('delete', key);
    await this.inner.delete(key);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /** Records the call, applies error and latency faults, and returns a fault to apply after. */
  private async enter(op: BlobOp, key: string): Promise<Fault | undefined> {
    const fault = this.match(op, key);
    this.calls.push(fault === undefined ? { op, key } : { op, key, fault: fault.kind });
    if (fault?.kind === 'latency') await sleep(fault.ms);
    if (fault?.kind === 'hold') await fault.until.catch(() => undefined);
    if (fault?.kind === 'error') throw (fault.error ?? (() => transientError(op, key)))();
    return fault;
  }

  private match(op: BlobOp, key: string): Fault | undefined {
    for (const active of this.rules) {
      const { ops, key: pattern, nth = 1, times = 1 } = active.rule;
      if (ops !== undefined && !ops.includes(op)) continue;
      if (pattern !== undefined && !(typeof pattern === 'string' ? key === pattern : pattern.test(key))) continue;
      active.seen += 1;
      if (active.seen >= nth && active.fired < times) {
        active.fired += 1;
        return active.rule.fault;
      }
    }
    return undefined;
  }
}

function corrupt(bytes: Uint8Array, fault: Fault): Uint8Array {
  if (fault.kind === 'truncate') return bytes.slice(0, fault.keepBytes);
  if (fault.kind !== 'bitflip' || bytes.length === 0) return bytes;
  const copy = Uint8Array.from(bytes);
  const at = Math.min(fault.offset ?? 0, copy.length - 1);
  copy[at] = (copy[at] ?? 0) ^ (1 << (fault.bit ?? 0));
  return copy;
}

function corruptingTransform(fault: Fault): Transform {
  let position = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      let out: Buffer = chunk;
      if (fault.kind === 'truncate') {
        out = chunk.subarray(0, Math.max(0, Math.min(fault.keepBytes - position, chunk.length)));
      } else if (fault.kind === 'bitflip') {
        const at = (fault.offset ?? 0) - position;
        if (at >= 0 && at < chunk.length) {
          out = Buffer.from(chunk);
          out[at] = (out[at] ?? 0) ^ (1 << (fault.bit ?? 0));
        }
      }
      position += chunk.length;
      done(null, out);
    },
  });
}
