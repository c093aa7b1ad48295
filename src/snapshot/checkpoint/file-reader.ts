import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { CDC_MAX_BYTES, nextChunkLength } from '../../core/fastcdc.js';
import type { Sha256Hex } from '../../core/hash.js';
import { createSecretScanner, type SecretFinding } from '../../rules/secrets.js';

/** Files up to this size are read whole; larger ones are read in two streaming passes (see {@link readLargeFile}). */
export const WHOLE_READ_BYTES = 64 * 1024 * 1024;
const READ_BLOCK_BYTES = 8 * 1024 * 1024;

/** One content-defined chunk of a file. */
export interface FileChunk {
  readonly id: Sha256Hex;
  readonly bytes: Uint8Array;
}

/** What reading one file produced. */
export type FileContent =
  | { readonly kind: 'ok'; readonly sha256: Sha256Hex; readonly size: number; readonly chunkIds: Sha256Hex[] }
  | { readonly kind: 'secret'; readonly finding: SecretFinding }
  /** The bytes differed between the two passes; no chunk from the first difference on was handed on. */
  | { readonly kind: 'changed' };

/** Hooks into {@link readLargeFile}. */
export interface ReadLargeOptions {
  /** Called between the passes, once the file has been scanned and found clean (progress, fault injection in tests). */
  readonly afterScan?: () => void | Promise<void>;
}

/** One chunk as the scanning pass saw it. */
interface PlannedChunk {
  readonly id: Sha256Hex;
  readonly length: number;
}

/**
 * Reads a file too large to hold whole (`absPath` as `fs` takes it: a string, or the bytes of
 * a name that is not UTF-8), so that only bytes the secret scan saw are ever
 * handed on. Pass 1 scans the file for secrets and cuts it into content-defined chunks,
 * keeping only their ids. Pass 2 re-reads it chunk by chunk at the same lengths and hands a
 * chunk to `onChunk` (which may apply backpressure) only if its SHA-256 equals pass 1's id
 * at that index: equal hashes mean equal bytes, so a file rewritten between or during the
 * passes yields `changed` (the checkpoint then looks again) and never an unscanned byte.
 */
export async function readLargeFile(
  absPath: string | Buffer,
  onChunk: (chunk: FileChunk) => Promise<void>,
  options: ReadLargeOptions = {},
): Promise<FileContent> {
  const scanned = scanAndPlan(absPath);
  if ('finding' in scanned) return { kind: 'secret', finding: scanned.finding };
  await options.afterScan?.();
  return offerPlanned(absPath, scanned.plan, onChunk);
}

const sha256 = (bytes: Uint8Array): Sha256Hex => createHash('sha256').update(bytes).digest('hex');

/** Pass 1: the secret scan and the chunk ids, block by block; the scanner handles secrets cut by a block edge. */
function scanAndPlan(absPath: string | Buffer): { readonly finding: SecretFinding } | { readonly plan: PlannedChunk[] } {
  const scanner = createSecretScanner();
  const plan: PlannedChunk[] = [];
  const fd = fs.openSync(absPath, 'r');
  try {
    let pending = Buffer.alloc(0);
    let eof = false;
    while (!eof || pending.length > 0) {
      while (!eof && pending.length < CDC_MAX_BYTES) {
        const block = Buffer.allocUnsafe(READ_BLOCK_BYTES);
        const n = fs.readSync(fd, block, 0, READ_BLOCK_BYTES, null);
        if (n === 0) eof = true;
        else {
          const got = block.subarray(0, n);
          const finding = scanner.push(got);
          if (finding !== undefined) return { finding };
          pending = pending.length === 0 ? got : Buffer.concat([pending, got]);
        }
      }
      if (pending.length === 0) break;
      const n = nextChunkLength(pending, 0, pending.length);
      plan.push({ id: sha256(pending.subarray(0, n)), length: n });
      pending = pending.subarray(n);
    }
  } finally {
    fs.closeSync(fd);
  }
  const finding = scanner.end();
  return finding === undefined ? { plan } : { finding };
}

/** Reads up to `length` bytes at the file position; fewer only at the end of the file. */
function readFull(fd: number, length: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const n = fs.readSync(fd, out, got, length - got, null);
    if (n === 0) break;
    got += n;
  }
  return got === length ? out : out.subarray(0, got);
}

/** Pass 2: re-reads the planned chunks and hands on each only while it is byte for byte what pass 1 scanned. */
async function offerPlanned(
  absPath: string | Buffer,
  plan: readonly PlannedChunk[],
  onChunk: (chunk: FileChunk) => Promise<void>,
): Promise<FileContent> {
  const whole = createHash('sha256');
  const fd = fs.openSync(absPath, 'r');
  let size = 0;
  try {
    for (const planned of plan) {
      const bytes = readFull(fd, planned.length);
      if (bytes.length !== planned.length || sha256(bytes) !== planned.id) return { kind: 'changed' };
      whole.update(bytes);
      size += bytes.length;
      await onChunk({ id: planned.id, bytes });
    }
    // Grown since pass 1: the tail was never scanned.
    if (readFull(fd, 1).length !== 0) return { kind: 'changed' };
  } finally {
    fs.closeSync(fd);
  }
  return { kind: 'ok', sha256: whole.digest('hex'), size, chunkIds: plan.map((c) => c.id) };
}
