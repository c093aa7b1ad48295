import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Sha256Hex } from '../core/hash.js';
import { HoldfastError } from '../errors.js';
import type { ContentWorkerSettings, DigestReply } from './content-worker.js';
import type { Codec } from './pack-format.js';

/**
 * Objects smaller than this are not compressed on their own: the ObjectWriter gathers them
 * into solid blocks (see {@link SOLID_BLOCK_RAW_BYTES}), where zstd finds the redundancy
 * between files that a lone small object lacks.
 */
export const MIN_COMPRESS_BYTES = 16 * 1024;
/** A solid block is closed once its members reach this many raw bytes. */
export const SOLID_BLOCK_RAW_BYTES = 256 * 1024;
/** zstd output is kept only when it is at most this fraction of the input (saves at least 10%). */
export const MAX_COMPRESSED_RATIO = 0.9;
export const ZSTD_LEVEL = 3;
/**
 * zstd level of solid blocks: small text gains from a level above {@link ZSTD_LEVEL}, and blocks
 * are a small share of the bytes. Level 6 cost about three times the CPU of 4 for 5–10% less of
 * the blocks' bytes (100k tiny files: 273 ms against 72 ms, 4.58 MB against 5.03 MB), which on
 * two cores was ~6% of a full checkpoint for ~0.5% of the store.
 */
export const BLOCK_ZSTD_LEVEL = 4;
/** Objects at least this large are probed for compressibility before being compressed whole. */
export const PROBE_MIN_BYTES = 256 * 1024;
/** How much of an object the probe compresses, taken as {@link PROBE_SLICES} slices spread over it. */
export const PROBE_BYTES = 64 * 1024;
/** Slices the probe's sample is made of: the first, the last and evenly spaced ones between. */
export const PROBE_SLICES = 8;
/** Files below this are one chunk (DESIGN section 2). */
export const SINGLE_CHUNK_BYTES = 1024 * 1024;

/** An object as it will be stored: raw bytes or zstd frames. */
export interface StoredForm {
  readonly bytes: Uint8Array;
  readonly codec: Codec;
}

/** What digesting one path produced. */
export type DigestOutcome =
  | DigestedFile
  | { readonly kind: 'secret'; readonly rule: string }
  | { readonly kind: 'error'; readonly errno: string; readonly message: string };

/** One chunk of a digested file, ready for a pack. */
export interface DigestedChunk {
  readonly id: Sha256Hex;
  readonly rawLength: number;
  readonly form: StoredForm;
}

/** A file's whole-content hash and its chunks. */
export interface DigestedFile {
  readonly kind: 'ok';
  readonly sha256: Sha256Hex;
  readonly size: number;
  readonly chunks: DigestedChunk[];
}

/**
 * Where the compiled worker module is: beside this file in `dist/objects/`, one level over from
 * the bundled CLI in `dist/bin/`, or in `dist/` when this file runs from `src/` under the test
 * runner (which builds first).
 */
function workerUrl(): URL {
  const candidates = ['./content-worker.js', './content-worker.js', '../../dist/objects/content-worker.js'].map(
    (p) => new URL(p, import.meta.url),
  );
  const found = candidates.find((url) => existsSync(fileURLToPath(url)));
  if (found === undefined) {
    throw new HoldfastError('INTERNAL', `content worker module not found next to ${fileURLToPath(import.meta.url)}: run npm run build`);
  }
  return found;
}

/**
 * Worker threads (see `content-worker.ts`) that read, secret-scan, hash, chunk (FastCDC) and
 * zstd-compress content, so the main thread only scans, deduplicates and packs. Results
 * come back as transferred buffers, never copied twice.
 */
export class ContentWorkers {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, { resolve: (r: unknown[]) => void; reject: (e: unknown) => void }>();
  private seq = 0;
  private next = 0;
  private failure: unknown;

  /** Workers (default: one per core, at most 4) start on first use, not here. */
  constructor(readonly threads = Math.max(1, Math.min(4, availableParallelism()))) {}

  /**
   * Reads files in a worker, refuses those holding a secret (their bytes never leave the
   * worker), hashes them whole, cuts them into chunks and compresses the chunks. One outcome
   * per path, in order; a file that cannot be read reports its errno.
   */
  async digestPaths(paths: readonly string[]): Promise<DigestOutcome[]> {
    return this.outcomes(
      (await this.send(
        'paths',
        paths.map((path) => ({ path })),
      )) as DigestReply[],
    );
  }

  /**
   * Like {@link ContentWorkers.digestPaths} for bytes read elsewhere (a sandbox's files). The
   * buffers are moved to the worker when they own their memory, else copied.
   */
  async digestBuffers(buffers: readonly Uint8Array[]): Promise<DigestOutcome[]> {
    const transfer: ArrayBuffer[] = [];
    const items = buffers.map((b) => {
      const owned = ownsBuffer(b) ? b : Uint8Array.from(b);
      transfer.push(owned.buffer as ArrayBuffer);
      return owned;
    });
    return this.outcomes((await this.send('buffers', items, transfer)) as DigestReply[]);
  }

  /**
   * Outcomes from replies. A raw form under {@link MIN_COMPRESS_BYTES} (held until a solid
   * block takes it) is a view into its batch's buffer of tiny files (which holds nothing else),
   * or its own copy when it is the small tail of a larger file: it never keeps a whole file alive.
   */
  private outcomes(replies: DigestReply[]): DigestOutcome[] {
    return replies.map((r): DigestOutcome => {
      if (r.kind !== 'ok') return r;
      const raw = Buffer.from(r.raw.buffer, r.raw.byteOffset, r.raw.byteLength);
      const tinyFile = raw.byteLength < MIN_COMPRESS_BYTES;
      const rawForm = (offset: number, length: number): StoredForm => {
        const view = raw.subarray(offset, offset + length);
        return { bytes: tinyFile || length >= MIN_COMPRESS_BYTES ? view : Uint8Array.from(view), codec: 'none' };
      };
      return {
        kind: 'ok',
        sha256: r.sha256,
        size: r.size,
        chunks: r.chunks.map((c) => ({
          id: c.id,
          rawLength: c.length,
          form: c.zstd === null ? rawForm(c.offset, c.length) : { bytes: c.zstd, codec: 'zstd' },
        })),
      };
    });
  }

  /** Compresses objects whose ids are already known; one stored form per input, in order. */
  async compress(items: readonly Uint8Array[]): Promise<StoredForm[]> {
    const sendable = items.map((bytes) => (bytes.byteLength >= MIN_COMPRESS_BYTES ? bytes : new Uint8Array(0)));
    const copies = sendable.map((b) => Uint8Array.from(b));
    const replies = (await this.send(
      'compress',
      copies,
      copies.map((c) => c.buffer as ArrayBuffer),
    )) as Array<Uint8Array | null>;
    return items.map((bytes, i) => {
      const z = replies[i];
      return z === null || z === undefined || bytes.byteLength < MIN_COMPRESS_BYTES
        ? { bytes, codec: 'none' }
        : { bytes: z, codec: 'zstd' };
    });
  }

  /**
   * Compresses solid blocks (concatenated small objects) whatever their size; one result per
   * block, in order: its zstd frame, or `null` when it does not shrink by 10%.
   */
  async compressBlocks(blocks: readonly Uint8Array[]): Promise<Array<Uint8Array | null>> {
    const transfer: ArrayBuffer[] = [];
    const items = blocks.map((b) => {
      const owned = ownsBuffer(b) ? b : Uint8Array.from(b);
      transfer.push(owned.buffer as ArrayBuffer);
      return owned;
    });
    return (await this.send('block', items, transfer)) as Array<Uint8Array | null>;
  }

  /** Stops the workers; pending work rejects. */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.fail(new Error('content workers closed'));
  }

  private send(
    op: 'paths' | 'buffers' | 'compress' | 'block',
    items: readonly unknown[],
    transfer: ArrayBuffer[] = [],
  ): Promise<unknown[]> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.workers.length === 0) this.start();
    const seq = this.seq++;
    const worker = this.workers[this.next++ % this.workers.length] as Worker;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      worker.postMessage({ seq, op, items }, transfer);
    });
  }

  private start(): void {
    const url = workerUrl();
    const workerData: ContentWorkerSettings = {
      level: ZSTD_LEVEL,
      blockLevel: BLOCK_ZSTD_LEVEL,
      maxRatio: MAX_COMPRESSED_RATIO,
      minCompress: MIN_COMPRESS_BYTES,
      singleChunk: SINGLE_CHUNK_BYTES,
      probeMin: PROBE_MIN_BYTES,
      probeBytes: PROBE_BYTES,
      probeSlices: PROBE_SLICES,
    };
    for (let i = 0; i < this.threads; i += 1) {
      const worker = new Worker(url, { workerData });
      worker.on('message', (msg: { seq: number; results: unknown[] }) => {
        const p = this.pending.get(msg.seq);
        this.pending.delete(msg.seq);
        p?.resolve(msg.results);
      });
      worker.on('error', (error) => this.fail(error));
      this.workers.push(worker);
    }
  }

  private fail(error: unknown): void {
    this.failure ??= error;
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }
}

const require = createRequire(import.meta.url);

/** Whether `b` is the whole of an ordinary ArrayBuffer, so it can be moved to a worker. */
function ownsBuffer(b: Uint8Array): boolean {
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !(b.buffer instanceof SharedArrayBuffer);
}

/**
 * Decompresses one stored range whole, trusting the frame's declared size: for bytes this
 * process just wrote (tests, tools). Reading stored objects goes through `decodeObject`
 * (stored-object.ts), which bounds every allocation by the recorded lengths.
 */
export function decompress(stored: Uint8Array, codec: Codec): Uint8Array {
  if (codec === 'none') return stored;
  const zstd = require('zstd-napi') as { decompress(input: Uint8Array): Buffer };
  return zstd.decompress(stored);
}
