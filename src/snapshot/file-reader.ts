import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { CDC_MAX_BYTES, nextChunkLength } from '../core/fastcdc.js';
import type { Sha256Hex } from '../core/hash.js';
import { createSecretScanner, type SecretFinding } from '../core/secrets.js';

/** Files up to this size are read whole; larger ones are read twice (secret scan, then chunking). */
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
  | { readonly kind: 'secret'; readonly finding: SecretFinding };

/**
 * Reads a file too large to hold whole: first scans it for secrets (so no chunk of a file with
 * a secret is ever handed on), then hashes it and cuts it into content-defined chunks, passing
 * each to `onChunk` (which may apply backpressure). `size` is what was actually read.
 */
export async function readLargeFile(absPath: string, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
  const finding = scanLargeFile(absPath);
  if (finding !== undefined) return { kind: 'secret', finding };
  return chunkLargeFile(absPath, onChunk);
}

/** Scans a large file for secrets block by block; the scanner handles secrets cut by a block edge. */
function scanLargeFile(absPath: string): SecretFinding | undefined {
  const scanner = createSecretScanner();
  const fd = fs.openSync(absPath, 'r');
  try {
    const block = Buffer.allocUnsafe(READ_BLOCK_BYTES);
    for (;;) {
      const n = fs.readSync(fd, block, 0, READ_BLOCK_BYTES, null);
      if (n === 0) return scanner.end();
      const finding = scanner.push(block.subarray(0, n));
      if (finding !== undefined) return finding;
    }
  } finally {
    fs.closeSync(fd);
  }
}

async function chunkLargeFile(absPath: string, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
  const whole = createHash('sha256');
  const chunkIds: Sha256Hex[] = [];
  const fd = fs.openSync(absPath, 'r');
  let size = 0;
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
          whole.update(got);
          size += n;
          pending = pending.length === 0 ? got : Buffer.concat([pending, got]);
        }
      }
      if (pending.length === 0) break;
      const n = nextChunkLength(pending, 0, pending.length);
      const piece = pending.subarray(0, n);
      const id = createHash('sha256').update(piece).digest('hex');
      chunkIds.push(id);
      await onChunk({ id, bytes: piece });
      pending = pending.subarray(n);
    }
  } finally {
    fs.closeSync(fd);
  }
  return { kind: 'ok', sha256: whole.digest('hex'), size, chunkIds };
}
