import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../core/hash.js';
import { type FileChunk, readLargeFile } from './file-reader.js';

// Both passes over a large file, against a real file: what is handed on is exactly what the
// secret scan read, whatever happens to the file in between.

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-file-reader-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** 12 MiB of seeded pseudo-random bytes: several content-defined chunks. */
function content(seed: number): Buffer {
  const out = Buffer.alloc(12 * 1024 * 1024);
  let s = seed;
  for (let i = 0; i < out.length; i += 4) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    out.writeUInt32LE(s, i);
  }
  return out;
}

async function read(
  file: string,
  afterScan?: () => void,
): Promise<{ result: Awaited<ReturnType<typeof readLargeFile>>; chunks: FileChunk[] }> {
  const chunks: FileChunk[] = [];
  const result = await readLargeFile(file, async (c) => void chunks.push(c), afterScan === undefined ? {} : { afterScan });
  return { result, chunks };
}

describe('readLargeFile', () => {
  it('hands on every chunk of an unchanged file, with ids and a whole-file hash that match its bytes', async () => {
    const file = path.join(dir, 'big.bin');
    const bytes = content(1);
    fs.writeFileSync(file, bytes);
    const { result, chunks } = await read(file);
    expect(result).toEqual({ kind: 'ok', sha256: sha256Hex(bytes), size: bytes.length, chunkIds: chunks.map((c) => c.id) });
    expect(chunks.length).toBeGreaterThan(2);
    expect(Buffer.concat(chunks.map((c) => c.bytes)).equals(bytes)).toBe(true);
    for (const c of chunks) expect(sha256Hex(c.bytes)).toBe(c.id);
  });

  it.each([
    [
      'rewritten in the middle',
      (f: string) => fs.writeFileSync(f, Buffer.concat([content(1).subarray(0, 6 << 20), content(2).subarray(6 << 20)])),
    ],
    ['grown', (f: string) => fs.appendFileSync(f, 'tail never scanned')],
    ['truncated', (f: string) => fs.truncateSync(f, 5 << 20)],
    ['replaced by another file', (f: string) => fs.writeFileSync(f, content(3))],
  ])('reads a file %s between the passes as changed, handing on only chunks the scan saw', async (_what, change) => {
    const file = path.join(dir, 'big.bin');
    const scanned = content(1);
    fs.writeFileSync(file, scanned);
    const { result, chunks } = await read(file, () => change(file));
    expect(result).toEqual({ kind: 'changed' });
    // What was handed on is a prefix of the scanned bytes, chunk for chunk.
    const offered = Buffer.concat(chunks.map((c) => c.bytes));
    expect(offered.equals(scanned.subarray(0, offered.length))).toBe(true);
  });

  it('hands on nothing of a file that holds a secret, and never calls afterScan for it', async () => {
    const file = path.join(dir, 'big.bin');
    const bytes = content(4);
    Buffer.from(`\ngh${'p'}_${'aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6'}\n`).copy(bytes, 9 << 20);
    fs.writeFileSync(file, bytes);
    let called = false;
    const { result, chunks } = await read(file, () => {
      called = true;
    });
    expect(result).toEqual({ kind: 'secret', finding: { rule: 'github-token', offset: (9 << 20) + 1 } });
    expect(chunks).toEqual([]);
    expect(called).toBe(false);
  });
});
