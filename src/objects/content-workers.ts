import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { CUT_POINT_PARAMS, cutPoint, GEAR_TABLE } from '../core/fastcdc.js';
import type { Sha256Hex } from '../core/hash.js';
import type { Codec } from './pack-format.js';

/** Objects smaller than this are stored raw: compression rarely pays for itself there. */
export const MIN_COMPRESS_BYTES = 4 * 1024;
/** zstd output is kept only when it is at most this fraction of the input (saves at least 10%). */
export const MAX_COMPRESSED_RATIO = 0.9;
export const ZSTD_LEVEL = 3;
/** Files below this are one chunk (DESIGN section 2). */
export const SINGLE_CHUNK_BYTES = 1024 * 1024;

/** An object as it will be stored: raw bytes or zstd frames. */
export interface StoredForm {
  readonly bytes: Uint8Array;
  readonly codec: Codec;
}

/** One chunk of a digested file, ready for a pack. */
export interface DigestedChunk {
  readonly id: Sha256Hex;
  readonly rawLength: number;
  readonly form: StoredForm;
}

/** A file's whole-content hash and its chunks. */
export interface DigestedFile {
  readonly sha256: Sha256Hex;
  readonly size: number;
  readonly chunks: DigestedChunk[];
}

const require = createRequire(import.meta.url);

/**
 * Worker source. It is kept inline (the cut-point search is shipped as its own source text,
 * see `cutPoint`) so the same code runs from `src/` under the test runner, from `dist/`, and
 * from the bundled CLI, without a separate worker file to locate.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const zstd = require(workerData.zstdPath);
const cutPoint = ${cutPoint.toString()};
const gear = new Uint32Array(workerData.gear);
const [MIN, AVG, MAX, MS, ML] = workerData.cdc;
const { level, maxRatio, minCompress, singleChunk } = workerData;
const sha = (b) => createHash('sha256').update(b).digest('hex');
function pack(raw, transfer) {
  if (raw.length < minCompress) return null;
  const z = zstd.compress(raw, { compressionLevel: level });
  if (z.length > raw.length * maxRatio) return null;
  const copy = new Uint8Array(z);
  transfer.push(copy.buffer);
  return copy;
}
parentPort.on('message', ({ seq, op, items }) => {
  const results = [];
  const transfer = [];
  for (const item of items) {
    const buf = Buffer.from(item.buffer, item.byteOffset, item.byteLength);
    if (op === 'compress') {
      results.push(pack(buf, transfer));
      continue;
    }
    const sha256 = sha(buf);
    const chunks = [];
    if (buf.length > 0 && buf.length < singleChunk) chunks.push({ id: sha256, offset: 0, length: buf.length, zstd: pack(buf, transfer) });
    else for (let at = 0; at < buf.length; ) {
      const n = cutPoint(buf, at, buf.length, gear, MIN, AVG, MAX, MS, ML);
      const piece = buf.subarray(at, at + n);
      chunks.push({ id: sha(piece), offset: at, length: n, zstd: pack(piece, transfer) });
      at += n;
    }
    results.push({ sha256, chunks, raw: item });
    transfer.push(item.buffer);
  }
  parentPort.postMessage({ seq, results }, transfer);
});
`;

interface FileReply {
  sha256: string;
  chunks: Array<{ id: string; offset: number; length: number; zstd: Uint8Array | null }>;
  raw: Uint8Array;
}

/**
 * Worker threads that hash, chunk (FastCDC) and zstd-compress content, so the main thread
 * only reads files and orchestrates. Inputs are transferred, not copied, when the caller owns
 * the whole underlying buffer; the bytes come back with the result.
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
   * Hashes and chunks whole files and compresses their chunks. The buffers are handed over:
   * the caller must not use them afterwards (chunks that stay raw are views into them).
   */
  async digestFiles(files: Uint8Array[]): Promise<DigestedFile[]> {
    const replies = (await this.send('file', files)) as FileReply[];
    return replies.map((r) => {
      const raw = Buffer.from(r.raw.buffer, r.raw.byteOffset, r.raw.byteLength);
      return {
        sha256: r.sha256,
        size: raw.length,
        chunks: r.chunks.map((c) => ({
          id: c.id,
          rawLength: c.length,
          form: c.zstd === null ? { bytes: raw.subarray(c.offset, c.offset + c.length), codec: 'none' } : { bytes: c.zstd, codec: 'zstd' },
        })),
      };
    });
  }

  /** Compresses objects whose ids are already known; one stored form per input, in order. */
  async compress(items: readonly Uint8Array[]): Promise<StoredForm[]> {
    const sendable = items.map((bytes) => (bytes.byteLength >= MIN_COMPRESS_BYTES ? bytes : new Uint8Array(0)));
    const replies = (await this.send('compress', sendable, true)) as Array<Uint8Array | null>;
    return items.map((bytes, i) => {
      const z = replies[i];
      return z === null || z === undefined || bytes.byteLength < MIN_COMPRESS_BYTES
        ? { bytes, codec: 'none' }
        : { bytes: z, codec: 'zstd' };
    });
  }

  /** Stops the workers; pending work rejects. */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.fail(new Error('content workers closed'));
  }

  private send(op: 'file' | 'compress', items: readonly Uint8Array[], copy = false): Promise<unknown[]> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.workers.length === 0) this.start();
    const transfer: ArrayBuffer[] = [];
    const payload = items.map((item) => {
      // Only a buffer that is exactly one whole ArrayBuffer can be moved; others are copied.
      const owned =
        !copy && item.byteOffset === 0 && item.byteLength === item.buffer.byteLength && !(item.buffer instanceof SharedArrayBuffer);
      const sendable = owned ? item : Uint8Array.from(item);
      transfer.push(sendable.buffer as ArrayBuffer);
      return sendable;
    });
    const seq = this.seq++;
    const worker = this.workers[this.next++ % this.workers.length] as Worker;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      worker.postMessage({ seq, op, items: payload }, transfer);
    });
  }

  private start(): void {
    const workerData = {
      zstdPath: require.resolve('zstd-napi'),
      gear: Array.from(GEAR_TABLE),
      cdc: CUT_POINT_PARAMS,
      level: ZSTD_LEVEL,
      maxRatio: MAX_COMPRESSED_RATIO,
      minCompress: MIN_COMPRESS_BYTES,
      singleChunk: SINGLE_CHUNK_BYTES,
    };
    for (let i = 0; i < this.threads; i += 1) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, workerData });
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

/** Decompresses one stored object (main thread: zstd decompresses at over 1 GB/s). */
export function decompress(stored: Uint8Array, codec: Codec): Uint8Array {
  if (codec === 'none') return stored;
  const zstd = require('zstd-napi') as { decompress(input: Uint8Array): Buffer };
  return zstd.decompress(stored);
}
