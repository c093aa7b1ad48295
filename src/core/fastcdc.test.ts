import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CDC_MAX_BYTES, CDC_MIN_BYTES, chunkLengths, chunkStream } from './fastcdc.js';

function pseudoRandom(size: number, seed: string): Buffer {
  const out = Buffer.alloc(size);
  let block = createHash('sha256').update(seed).digest();
  for (let at = 0; at < size; at += 32) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

function boundaries(lengths: number[]): number[] {
  let at = 0;
  return lengths.map((n) => {
    at += n;
    return at;
  });
}

describe('FastCDC', () => {
  it('keeps every chunk within [min, max] except the last, and covers the input exactly', () => {
    const data = pseudoRandom(40 * 1024 * 1024, 'bounds');
    const lengths = chunkLengths(data);
    expect(lengths.reduce((a, b) => a + b, 0)).toBe(data.length);
    for (const n of lengths.slice(0, -1)) {
      expect(n).toBeGreaterThanOrEqual(CDC_MIN_BYTES);
      expect(n).toBeLessThanOrEqual(CDC_MAX_BYTES);
    }
    // Normalised chunking keeps the average near 1 MiB.
    const avg = data.length / lengths.length;
    expect(avg).toBeGreaterThan(700 * 1024);
    expect(avg).toBeLessThan(1600 * 1024);
  });

  it('is deterministic: fixed boundaries for fixed input (the storage format depends on it)', () => {
    const data = pseudoRandom(8 * 1024 * 1024, 'golden');
    expect(
      createHash('sha256')
        .update(JSON.stringify(chunkLengths(data)))
        .digest('hex')
        .slice(0, 16),
    ).toBe('1794a404144af9d4');
  });

  it('an insertion moves only the boundaries next to it', () => {
    const data = pseudoRandom(32 * 1024 * 1024, 'shift');
    const before = new Set(boundaries(chunkLengths(data)));
    const at = 17 * 1024 * 1024 + 123;
    const edited = Buffer.concat([data.subarray(0, at), Buffer.from('inserted bytes'), data.subarray(at)]);
    const after = boundaries(chunkLengths(edited));
    const moved = after.filter((b) => !(b < at ? before.has(b) : before.has(b - 14)));
    expect(moved.length).toBeLessThanOrEqual(2);
  });

  it('small inputs are a single chunk; zero bytes give no chunk', () => {
    expect(chunkLengths(Buffer.alloc(0))).toEqual([]);
    expect(chunkLengths(Buffer.alloc(CDC_MIN_BYTES))).toEqual([CDC_MIN_BYTES]);
  });

  it('the streaming chunker cuts exactly where the in-memory one does, whatever the piece sizes', async () => {
    const data = randomBytes(21 * 1024 * 1024 + 5);
    async function* pieces(): AsyncGenerator<Uint8Array> {
      for (let at = 0, step = 1; at < data.length; at += step, step = (step * 7 + 13) % 3_000_000) yield data.subarray(at, at + step);
    }
    const streamed: number[] = [];
    for await (const chunk of chunkStream(pieces())) streamed.push(chunk.length);
    expect(streamed).toEqual(chunkLengths(data));
  });
});
