import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import zlib from 'node:zlib';
import { InputError } from '../errors.js';

/** Bounds on what a compressed upload may expand to, checked on every chunk it inflates. */
export interface InflateBounds {
  /** Bytes the upload may expand to in all (a plain upload counts its own bytes). */
  readonly maxInflatedBytes: number;
  /** At most this many inflated bytes per compressed byte read so far ... */
  readonly maxRatio: number;
  /** ... plus this many (a small archive of text compresses well; the ratio alone would refuse it). */
  readonly ratioSlackBytes: number;
}

/** Inflated bytes per compressed byte an upload may reach (gzip of typical source trees is 3-10). */
export const MAX_INFLATE_RATIO = 100;
/** Inflated bytes an upload may reach beyond {@link MAX_INFLATE_RATIO} times what it sent. */
export const INFLATE_RATIO_SLACK_BYTES = 16 * 1024 * 1024;
/** Inflated bytes between two turns given back to the event loop (other requests run in between). */
export const INFLATE_YIELD_BYTES = 256 * 1024;
/**
 * Largest zstd window accepted (2^24 = 16 MiB of decoder memory per upload): every level up to
 * 19 stays below it; `--long` and `--ultra` archives are refused rather than given 128 MiB.
 */
const ZSTD_WINDOW_LOG_MAX = 24;
/** Bytes looked at to recognise the compression (the zstd magic number). */
const SNIFF_BYTES = 4;
/** The first four bytes of a zstd frame, read little-endian. */
const ZSTD_MAGIC = 0xfd2fb528;

interface ZstdStreamBinding {
  DCtx: new () => {
    setParameter(param: number, value: number): void;
    decompressStream(dst: Uint8Array, src: Uint8Array): [number, number, number];
  };
  DParameter: { windowLogMax: number };
  dStreamOutSize(): number;
}

const require = createRequire(import.meta.url);
let inflatedInProcess = 0;

/**
 * Bytes every bundle upload of this process has inflated so far (compressed or not): what the
 * uploads cost to read. Only grows; an upload that stops (refused, aborted) stops adding to it.
 */
export function bundleBytesInflated(): number {
  return inflatedInProcess;
}

/**
 * The plain bytes of an upload that is a gzip stream, a zstd stream or neither (recognised by
 * its magic number), inflated chunk by chunk as the consumer pulls them, never held whole.
 * Every inflated byte counts against `bounds`: past `maxInflatedBytes`, or past `maxRatio` times
 * the compressed bytes read plus `ratioSlackBytes`, the next pull throws `LIMIT_EXCEEDED`
 * (`data.reason` `inflated-limit` | `inflate-ratio`). An aborted `signal` makes the next pull
 * throw its reason, also while it waits for the source. Gzip inflates on the thread pool; zstd
 * in steps of one 128 KiB output buffer; between steps the event loop gets a turn every
 * {@link INFLATE_YIELD_BYTES}. Stopping early (a throw, a `return`) destroys the decompressor
 * and returns the source iterator. Corrupt compressed data throws the decompressor's `Error`.
 */
export async function* inflateUpload(
  source: AsyncIterable<Uint8Array>,
  bounds: InflateBounds,
  signal?: AbortSignal,
): AsyncGenerator<Uint8Array> {
  const counter = new InflateCounter(bounds, signal);
  const input = abortable(source[Symbol.asyncIterator](), signal, (n) => counter.sent(n));
  const head: Uint8Array[] = [];
  let headBytes = 0;
  try {
    while (headBytes < SNIFF_BYTES) {
      const next = await input.next();
      if (next.done === true) break;
      head.push(next.value);
      headBytes += next.value.byteLength;
    }
    const first = Buffer.concat(head);
    const rest = prepend(head, input);
    const output =
      first[0] === 0x1f && first[1] === 0x8b
        ? gunzipped(rest)
        : first.length >= SNIFF_BYTES && first.readUInt32LE(0) === ZSTD_MAGIC
          ? zstdDecoded(rest)
          : rest;
    for await (const chunk of output) {
      await counter.inflated(chunk.byteLength);
      yield chunk;
    }
  } finally {
    await input.return(undefined);
  }
}

/** Counts what an upload sent and what it inflated to, against its bounds. */
class InflateCounter {
  private compressed = 0;
  private total = 0;
  private sinceYield = 0;

  constructor(
    private readonly bounds: InflateBounds,
    private readonly signal: AbortSignal | undefined,
  ) {}

  sent(bytes: number): void {
    this.compressed += bytes;
  }

  async inflated(bytes: number): Promise<void> {
    this.signal?.throwIfAborted();
    this.total += bytes;
    inflatedInProcess += bytes;
    const { maxInflatedBytes, maxRatio, ratioSlackBytes } = this.bounds;
    const data = { inflatedBytes: this.total, compressedBytes: this.compressed };
    if (this.total > maxInflatedBytes) {
      throw new InputError('LIMIT_EXCEEDED', `the upload expands past ${maxInflatedBytes} bytes: send a smaller bundle`, {
        data: { reason: 'inflated-limit', rule: `${maxInflatedBytes} bytes inflated`, ...data },
      });
    }
    if (this.total > maxRatio * this.compressed + ratioSlackBytes) {
      throw new InputError(
        'LIMIT_EXCEEDED',
        `the upload expands more than ${maxRatio} times what was sent (+${ratioSlackBytes} bytes): a bundle compresses less than that`,
        { data: { reason: 'inflate-ratio', rule: `${maxRatio} x compressed + ${ratioSlackBytes}`, ...data } },
      );
    }
    this.sinceYield += bytes;
    if (this.sinceYield >= INFLATE_YIELD_BYTES) {
      this.sinceYield = 0;
      await nextTurn();
      this.signal?.throwIfAborted();
    }
  }
}

/** `iterator`, counting what it yields, whose pending `next()` rejects as soon as `signal` aborts. */
function abortable(
  iterator: AsyncIterator<Uint8Array>,
  signal: AbortSignal | undefined,
  count: (bytes: number) => void,
): AsyncIterator<Uint8Array, undefined> & { return(value: undefined): Promise<IteratorResult<Uint8Array, undefined>> } {
  let returned = false;
  const aborted =
    signal === undefined
      ? undefined
      : new Promise<never>((_, reject) => {
          const onAbort = () => reject(signal.reason);
          if (signal.aborted) onAbort();
          else signal.addEventListener('abort', onAbort, { once: true });
        });
  aborted?.catch(() => undefined);
  const close = () => {
    if (returned) return;
    returned = true;
    // A source still waiting for the network finishes its read in the background; it is not awaited.
    void Promise.resolve(iterator.return?.()).catch(() => undefined);
  };
  return {
    async next() {
      signal?.throwIfAborted();
      const step = iterator.next();
      const next = await (aborted === undefined ? step : Promise.race([step, aborted]));
      if (next.done === true) return { done: true, value: undefined };
      count(next.value.byteLength);
      return next;
    },
    async return() {
      close();
      return { done: true, value: undefined };
    },
  };
}

/** The chunks of `head`, then the rest of `input`. */
async function* prepend(head: readonly Uint8Array[], input: AsyncIterator<Uint8Array, undefined>): AsyncGenerator<Uint8Array> {
  yield* head;
  for (;;) {
    const next = await input.next();
    if (next.done === true) return;
    yield next.value;
  }
}

/** Gzip members inflated by node:zlib (on the thread pool); the stream is destroyed when the consumer stops. */
async function* gunzipped(compressed: AsyncGenerator<Uint8Array>): AsyncGenerator<Uint8Array> {
  const gunzip = zlib.createGunzip();
  const from = Readable.from(compressed, { objectMode: false });
  from.on('error', (error) => gunzip.destroy(error));
  from.pipe(gunzip);
  try {
    for await (const chunk of gunzip) yield chunk as Buffer;
  } finally {
    from.unpipe(gunzip);
    gunzip.destroy();
    from.destroy();
  }
}

/** zstd frames decoded one output buffer at a time (the window bounded by {@link ZSTD_WINDOW_LOG_MAX}). */
async function* zstdDecoded(compressed: AsyncGenerator<Uint8Array>): AsyncGenerator<Uint8Array> {
  const binding = require('zstd-napi/binding') as ZstdStreamBinding;
  const dctx = new binding.DCtx();
  dctx.setParameter(binding.DParameter.windowLogMax, ZSTD_WINDOW_LOG_MAX);
  const outSize = binding.dStreamOutSize();
  let inFrame = false;
  for await (const chunk of compressed) {
    let src = chunk;
    for (;;) {
      const dst = Buffer.allocUnsafe(outSize);
      const [hint, produced, consumed] = dctx.decompressStream(dst, src);
      src = src.subarray(consumed);
      inFrame = hint !== 0;
      if (produced > 0) yield dst.subarray(0, produced);
      if (src.byteLength === 0 && produced < outSize) break;
    }
  }
  if (inFrame) throw new Error('the zstd stream ends inside a frame');
}
