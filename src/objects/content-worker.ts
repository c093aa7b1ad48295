/**
 * The content worker thread: reads files, refuses those holding a secret, hashes them, cuts
 * them into content-defined chunks and zstd-compresses the chunks. Doing the whole job here
 * (not just compression) keeps the main thread free to scan, deduplicate and pack, and means
 * a file's bytes are scanned for secrets before they leave the thread that read them.
 *
 * Messages: `{ seq, op: 'paths', items: [{ path }] }` or `{ seq, op: 'buffers', items: Uint8Array[] }`
 * (bytes read elsewhere, e.g. from a sandbox) -> `{ seq, results: DigestReply[] }`;
 * `{ seq, op: 'compress', items: Uint8Array[] }` -> `{ seq, results: Array<Uint8Array | null> }`;
 * `{ seq, op: 'block', items: Uint8Array[] }` (solid blocks: compressed whatever their size) -> the same.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { CUT_POINT_PARAMS, cutPoint, GEAR_TABLE } from '../core/fastcdc.js';
import { findSecret } from '../rules/secrets.js';

/** Settings the parent passes in `workerData`. */
export interface ContentWorkerSettings {
  readonly level: number;
  readonly blockLevel: number;
  readonly maxRatio: number;
  readonly minCompress: number;
  readonly singleChunk: number;
  readonly probeMin: number;
  readonly probeBytes: number;
  readonly probeSlices: number;
}

/**
 * One file's outcome, as posted back. Chunk bytes that stay raw are views into `raw`; when
 * every chunk was compressed `raw` is empty (the file's bytes are not moved to the parent
 * only to wait there for its garbage collector).
 */
export type DigestReply =
  | {
      readonly kind: 'ok';
      readonly sha256: string;
      readonly size: number;
      readonly raw: Uint8Array;
      readonly chunks: ReadonlyArray<{ id: string; offset: number; length: number; zstd: Uint8Array | null }>;
    }
  | { readonly kind: 'secret'; readonly rule: string }
  | { readonly kind: 'error'; readonly errno: string; readonly message: string };

const zstd = createRequire(import.meta.url)('zstd-napi') as { compress(input: Uint8Array, options: { compressionLevel: number }): Buffer };
const settings = workerData as ContentWorkerSettings;
const [MIN, AVG, MAX, MASK_STRICT, MASK_LOOSE] = CUT_POINT_PARAMS;
const gear = GEAR_TABLE as Uint32Array;
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** zstd form of `raw`, or null when it is small (a solid block takes it) or does not shrink by 10%. */
function pack(raw: Uint8Array, transfer: ArrayBuffer[]): Uint8Array | null {
  if (raw.length < settings.minCompress) return null;
  // Large objects are probed first: if a sample spread over the whole object does not shrink
  // by 5% at the fastest level (media, archives, random data), compressing it at level 3 is
  // wasted work. The sample is several slices, so an object that starts with random bytes
  // and goes on with text is still compressed.
  if (raw.length >= settings.probeMin && !probeShrinks(raw)) return null;
  return compressWhole(raw, transfer);
}

function probeShrinks(raw: Uint8Array): boolean {
  const slices = settings.probeSlices;
  const sliceBytes = Math.floor(settings.probeBytes / slices);
  const sample = Buffer.allocUnsafe(sliceBytes * slices);
  const stride = (raw.length - sliceBytes) / (slices - 1);
  for (let i = 0; i < slices; i += 1) {
    const at = Math.floor(i * stride);
    sample.set(raw.subarray(at, at + sliceBytes), i * sliceBytes);
  }
  return zstd.compress(sample, { compressionLevel: 1 }).length <= sample.length * 0.95;
}

function compressWhole(raw: Uint8Array, transfer: ArrayBuffer[], level = settings.level): Uint8Array | null {
  const z = zstd.compress(raw, { compressionLevel: level });
  if (z.length > raw.length * settings.maxRatio) return null;
  const copy = new Uint8Array(z);
  transfer.push(copy.buffer);
  return copy;
}

function digestPath(path: string, transfer: ArrayBuffer[]): DigestReply {
  let raw: Buffer;
  try {
    raw = fs.readFileSync(path);
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return { kind: 'error', errno: e.code ?? 'EIO', message: e.message };
  }
  return digest(raw, transfer);
}

function digest(raw: Buffer, transfer: ArrayBuffer[]): DigestReply {
  const secret = findSecret(raw);
  if (secret !== undefined) return { kind: 'secret', rule: secret.rule };
  const sha256 = sha(raw);
  const chunks: Array<{ id: string; offset: number; length: number; zstd: Uint8Array | null }> = [];
  if (raw.length > 0 && raw.length < settings.singleChunk)
    chunks.push({ id: sha256, offset: 0, length: raw.length, zstd: pack(raw, transfer) });
  else {
    for (let at = 0; at < raw.length; ) {
      const n = cutPoint(raw, at, raw.length, gear, MIN, AVG, MAX, MASK_STRICT, MASK_LOOSE);
      const piece = raw.subarray(at, at + n);
      chunks.push({ id: sha(piece), offset: at, length: n, zstd: pack(piece, transfer) });
      at += n;
    }
  }
  if (chunks.every((c) => c.zstd !== null)) return { kind: 'ok', sha256, size: raw.length, raw: new Uint8Array(0), chunks };
  // Moved (or gathered with other small files) by `sendRaws` once the batch is done.
  return { kind: 'ok', sha256, size: raw.length, raw, chunks };
}

/**
 * Makes the raw bytes of a batch's replies sendable. Files under `minCompress` (stored raw, in
 * solid blocks) are gathered into one buffer per batch, which the replies view: 100k tiny files
 * were 100k transferred ArrayBuffers, each a backing store to allocate, clone and collect on
 * the main thread. Larger raws move whole; small reads from Node's shared pool are copied out
 * rather than moving the pool.
 */
function sendRaws(results: DigestReply[], transfer: ArrayBuffer[]): DigestReply[] {
  const isTiny = (r: DigestReply): boolean => r.kind === 'ok' && r.raw.byteLength > 0 && r.raw.byteLength < settings.minCompress;
  let tinyBytes = 0;
  for (const r of results) if (isTiny(r) && r.kind === 'ok') tinyBytes += r.raw.byteLength;
  const shared = new Uint8Array(tinyBytes);
  if (tinyBytes > 0) transfer.push(shared.buffer);
  let at = 0;
  return results.map((r) => {
    if (r.kind !== 'ok' || r.raw.byteLength === 0) return r;
    if (isTiny(r)) {
      shared.set(r.raw, at);
      at += r.raw.byteLength;
      return { ...r, raw: shared.subarray(at - r.raw.byteLength, at) };
    }
    const { raw } = r;
    const owned = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : Uint8Array.from(raw);
    transfer.push(owned.buffer as ArrayBuffer);
    return { ...r, raw: owned };
  });
}

parentPort?.on('message', (msg: { seq: number; op: 'paths' | 'buffers' | 'compress' | 'block'; items: unknown[] }) => {
  const transfer: ArrayBuffer[] = [];
  const results =
    msg.op === 'paths'
      ? sendRaws(
          (msg.items as Array<{ path: string }>).map((item) => digestPath(item.path, transfer)),
          transfer,
        )
      : msg.op === 'buffers'
        ? sendRaws(
            (msg.items as Uint8Array[]).map((item) => digest(Buffer.from(item.buffer, item.byteOffset, item.byteLength), transfer)),
            transfer,
          )
        : msg.op === 'block'
          ? (msg.items as Uint8Array[]).map((item) => compressWhole(item, transfer, settings.blockLevel))
          : (msg.items as Uint8Array[]).map((item) => pack(item, transfer));
  parentPort?.postMessage({ seq: msg.seq, results }, transfer);
});
