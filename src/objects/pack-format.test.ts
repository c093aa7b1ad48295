import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../core/hash.js';
import {
  decodeFooter,
  decodeTrailer,
  encodeTrailer,
  MAX_BLOCK_RAW_BYTES,
  MAX_TRAILER_BYTES,
  PACK_FOOTER_BYTES,
  PACK_FOOTER_MAGIC,
  type PackTrailer,
  PLAIN_FOOTER_MAGIC,
} from './pack-format.js';
import { PackWriter } from './pack-writer.js';
import { zstdCompress } from './zstd-bounded.js';

const PACK = 'f'.repeat(64);
const id = (n: number): string => sha256Hex(`object ${n}`);

/** Encodes `trailer` as a pack ending and decodes it back the way a reader does. */
function roundTrip(trailer: unknown): PackTrailer {
  const bytes = encodeTrailer(trailer as PackTrailer);
  const footer = bytes.subarray(bytes.length - PACK_FOOTER_BYTES);
  const length = decodeFooter(PACK, footer, bytes.length + 8);
  return decodeTrailer(PACK, bytes.subarray(0, length), footer);
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

const block = (n: number, blockOffset: number, rawLength = 10) => ({
  id: id(n),
  kind: 'data',
  offset: 8,
  length: 40,
  rawLength,
  codec: 'zstd',
  blockOffset,
});

describe('pack trailer', () => {
  it('round-trips a v2 trailer whose block members share one range, beside lone objects', () => {
    const trailer = {
      v: 2,
      kind: 'data',
      objects: [
        block(1, 0),
        block(2, 10),
        { id: id(3), kind: 'data', offset: 48, length: 5, rawLength: 5, codec: 'none' },
        { ...block(4, 0), offset: 53 },
      ],
    };
    expect(roundTrip(trailer)).toEqual(trailer);
  });

  it('still decodes v1 trailers, which have no blocks', () => {
    const trailer = { v: 1, kind: 'tree', objects: [{ id: id(1), kind: 'tree', offset: 8, length: 3, rawLength: 9, codec: 'zstd' }] };
    expect(roundTrip(trailer)).toEqual(trailer);
  });

  it.each([
    ['a block member in a v1 trailer', { v: 1, kind: 'data', objects: [block(1, 0)] }],
    ['a block slice past the largest block', { v: 2, kind: 'data', objects: [block(1, MAX_BLOCK_RAW_BYTES - 5, 10)] }],
    ['a negative block offset', { v: 2, kind: 'data', objects: [block(1, -1)] }],
    ['a fractional block offset', { v: 2, kind: 'data', objects: [block(1, 0.5)] }],
    ['a raw block', { v: 2, kind: 'data', objects: [{ ...block(1, 0), codec: 'none' }] }],
    ['a block member overlapping the block before it', { v: 2, kind: 'data', objects: [block(1, 0), { ...block(2, 0), offset: 20 }] }],
    [
      'a lone object inside the block before it',
      { v: 2, kind: 'data', objects: [block(1, 0), { id: id(2), kind: 'data', offset: 8, length: 40, rawLength: 40, codec: 'none' }] },
    ],
    ['an unknown version', { v: 3, kind: 'data', objects: [] }],
  ])('refuses %s with INTEGRITY', (_name, trailer) => {
    expect(codeOf(() => roundTrip(trailer))).toBe('INTEGRITY');
  });
});

describe('PackWriter', () => {
  it('lists every block member at the block range, and its bytes hash to the pack id', () => {
    const writer = new PackWriter('data');
    writer.add(id(0), Buffer.from('lone'), 4, 'none');
    const frame = Buffer.from('pretend zstd frame');
    writer.addBlock(
      [
        { id: id(1), rawLength: 3, blockOffset: 0 },
        { id: id(0), rawLength: 4, blockOffset: 3 },
        { id: id(2), rawLength: 5, blockOffset: 7 },
      ],
      frame,
    );
    const pack = writer.seal();
    const bytes = Buffer.concat(pack.parts);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(pack.id);
    expect(bytes.subarray(12, 12 + frame.length)).toEqual(frame);
    // id(0) is already in the pack as a lone object, so the block does not list it again.
    expect(pack.objects.map((o) => [o.id, o.offset, o.length, o.blockOffset])).toEqual([
      [id(0), 8, 4, undefined],
      [id(1), 12, frame.length, 0],
      [id(2), 12, frame.length, 7],
    ]);
    const footer = bytes.subarray(bytes.length - PACK_FOOTER_BYTES);
    const length = decodeFooter(pack.id, footer, bytes.length);
    const start = bytes.length - PACK_FOOTER_BYTES - length;
    expect(decodeTrailer(pack.id, bytes.subarray(start, start + length), footer).objects).toEqual(pack.objects);
  });
});

/** A pack ending as written before trailers were compressed: plain JSON under the old footer magic. */
function plainEnding(json: Buffer, magic: Buffer): { trailer: Buffer; footer: Buffer } {
  const footer = Buffer.alloc(PACK_FOOTER_BYTES);
  footer.writeUInt32BE(json.length, 0);
  createHash('sha256').update(json).digest().copy(footer, 4);
  magic.copy(footer, 36);
  return { trailer: json, footer };
}

describe('compressed pack trailers', () => {
  const trailer = { v: 2, kind: 'data', objects: [{ id: id(1), kind: 'data', offset: 8, length: 5, rawLength: 5, codec: 'none' }] };

  it('are written compressed under the new footer magic, and packs with a plain JSON trailer still read', () => {
    const bytes = encodeTrailer(trailer as PackTrailer);
    expect(bytes.subarray(bytes.length - PLAIN_FOOTER_MAGIC.length).equals(PACK_FOOTER_MAGIC)).toBe(true);
    const length = bytes.readUInt32BE(bytes.length - PACK_FOOTER_BYTES);
    expect(length).toBeLessThan(Buffer.byteLength(JSON.stringify(trailer)));
    const old = plainEnding(Buffer.from(JSON.stringify(trailer)), PLAIN_FOOTER_MAGIC);
    expect(decodeFooter(PACK, old.footer, 4096)).toBe(old.trailer.length);
    expect(decodeTrailer(PACK, old.trailer, old.footer)).toEqual(roundTrip(trailer));
  });

  it('refuse a compressed trailer that declares more than the bound, or is plain JSON under the new magic', () => {
    // A frame that declares 65 MiB: refused before anything that size is allocated.
    const bomb = zstdCompress(Buffer.alloc(MAX_TRAILER_BYTES + 1024 * 1024, 0x20), 1);
    const big = plainEnding(bomb, PACK_FOOTER_MAGIC);
    expect(codeOf(() => decodeTrailer(PACK, big.trailer, big.footer))).toBe('INTEGRITY');
    const mislabelled = plainEnding(Buffer.from(JSON.stringify(trailer)), PACK_FOOTER_MAGIC);
    expect(codeOf(() => decodeTrailer(PACK, mislabelled.trailer, mislabelled.footer))).toBe('INTEGRITY');
    const unknown = plainEnding(Buffer.from(JSON.stringify(trailer)), Buffer.from('HFPEND9\n'));
    expect(codeOf(() => decodeFooter(PACK, unknown.footer, 4096))).toBe('INTEGRITY');
  });
});
