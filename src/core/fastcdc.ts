import { createHash } from 'node:crypto';

/**
 * Content-defined chunking (FastCDC with normalised chunking). Boundaries depend only on the
 * bytes around them, so an edit inside a large file changes only the chunks it touches.
 *
 * The parameters and the gear table are part of the storage format: changing either moves
 * every boundary and defeats dedup against existing data. They are fixed here.
 */
export const CDC_MIN_BYTES = 256 * 1024;
export const CDC_AVG_BYTES = 1024 * 1024;
export const CDC_MAX_BYTES = 4 * 1024 * 1024;

/** 256 pseudo-random 32-bit values derived from SHA-256, so the table never depends on a PRNG's version. */
const GEAR: Uint32Array = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i += 1) table[i] = createHash('sha256').update(`holdfast-gear-${i}`).digest().readUInt32BE(0);
  return table;
})();

/**
 * Masks for normalised chunking around a 2^20 average: a stricter mask (22 bits) before the
 * average size and a looser one (18 bits) after it. Bits sit in the high half of the 32-bit
 * gear hash, which mixes in the most recent 32 bytes.
 */
const MASK_STRICT = 0xfffffc00 >>> 0;
const MASK_LOOSE = 0xffffc000 >>> 0;

/** The gear table, for code that runs the cut-point search elsewhere (worker threads). */
export const GEAR_TABLE: Readonly<Uint32Array> = GEAR;

/**
 * The cut-point search itself, with every parameter passed in and no free variables, so its
 * source can also be shipped to worker threads (`cutPoint.toString()`). Returns the length of
 * the next chunk of `data[start, end)`.
 */
export function cutPoint(
  data: Uint8Array,
  start: number,
  end: number,
  gear: Uint32Array,
  min: number,
  avg: number,
  max: number,
  maskStrict: number,
  maskLoose: number,
): number {
  const available = end - start;
  if (available <= min) return available;
  const limit = Math.min(available, max);
  const normal = Math.min(limit, avg);
  let hash = 0;
  let i = min;
  for (; i < normal; i += 1) {
    hash = ((hash << 1) + (gear[data[start + i] as number] as number)) | 0;
    if ((hash & maskStrict) === 0) return i + 1;
  }
  for (; i < limit; i += 1) {
    hash = ((hash << 1) + (gear[data[start + i] as number] as number)) | 0;
    if ((hash & maskLoose) === 0) return i + 1;
  }
  return limit;
}

/** Parameters of {@link cutPoint} after the data range, in order. */
export const CUT_POINT_PARAMS = [CDC_MIN_BYTES, CDC_AVG_BYTES, CDC_MAX_BYTES, MASK_STRICT | 0, MASK_LOOSE | 0] as const;

/**
 * Length of the next chunk of `data[start, end)`. `end - start` must be at least
 * {@link CDC_MAX_BYTES} unless the data ends at `end` (`eof`); with less data and no `eof`
 * the caller must supply more bytes first.
 */
export function nextChunkLength(data: Uint8Array, start: number, end: number): number {
  return cutPoint(data, start, end, GEAR, CDC_MIN_BYTES, CDC_AVG_BYTES, CDC_MAX_BYTES, MASK_STRICT | 0, MASK_LOOSE | 0);
}

/** Splits a buffer held in memory into chunk lengths. */
export function chunkLengths(data: Uint8Array): number[] {
  const lengths: number[] = [];
  for (let at = 0; at < data.length; ) {
    const n = nextChunkLength(data, at, data.length);
    lengths.push(n);
    at += n;
  }
  return lengths;
}

/**
 * Splits a stream of byte pieces into content-defined chunks, holding at most about
 * 2 × {@link CDC_MAX_BYTES} in memory. Yields each chunk as its own buffer.
 */
export async function* chunkStream(pieces: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  let buffer = Buffer.alloc(0);
  for await (const piece of pieces) {
    buffer = buffer.length === 0 ? Buffer.from(piece) : Buffer.concat([buffer, piece]);
    let at = 0;
    while (buffer.length - at >= CDC_MAX_BYTES) {
      const n = nextChunkLength(buffer, at, buffer.length);
      yield buffer.subarray(at, at + n);
      at += n;
    }
    buffer = at === 0 ? buffer : Buffer.from(buffer.subarray(at));
  }
  for (let at = 0; at < buffer.length; ) {
    const n = nextChunkLength(buffer, at, buffer.length);
    yield buffer.subarray(at, at + n);
    at += n;
  }
}
