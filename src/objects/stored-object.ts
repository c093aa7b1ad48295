import { createRequire } from 'node:module';
import { sha256Hex } from '../core/hash.js';
import { type Codec, MAX_BLOCK_RAW_BYTES, type PackEntry, validBlockSlice } from './pack-format.js';

/** The parts of an index row or trailer entry that say how to turn stored bytes into an object. */
export type StoredLocation = Pick<PackEntry, 'offset' | 'length' | 'rawLength' | 'codec'> & {
  readonly blockOffset?: number | null | undefined;
};

interface ZstdBinding {
  getFrameContentSize(frame: Uint8Array): number | null;
  findFrameCompressedSize(frame: Uint8Array): number;
  DCtx: new () => { decompress(dst: Uint8Array, src: Uint8Array): number };
}

const require = createRequire(import.meta.url);
let binding: ZstdBinding | undefined;
let dctx: InstanceType<ZstdBinding['DCtx']> | undefined;

/**
 * Decodes stored bytes whose decoded length must be at most `maxRaw`. A zstd input must be
 * exactly one frame that declares its content size, no more than `maxRaw`: the output buffer
 * is allocated from that declared size, so stored data that lies about it cannot make the
 * reader allocate more than the caller's bound. Throws an `Error` saying why otherwise.
 */
export function decodeBounded(stored: Uint8Array, codec: Codec, maxRaw: number): Uint8Array {
  if (codec === 'none') {
    if (stored.length > maxRaw) throw new Error(`stored length ${stored.length} exceeds ${maxRaw}`);
    return stored;
  }
  binding ??= require('zstd-napi/binding') as ZstdBinding;
  const declared = binding.getFrameContentSize(stored);
  if (declared === null || declared > maxRaw) throw new Error(`zstd frame declares ${declared ?? 'no'} content size (at most ${maxRaw})`);
  if (binding.findFrameCompressedSize(stored) !== stored.length) throw new Error('stored bytes are not exactly one zstd frame');
  const out = Buffer.allocUnsafe(declared);
  dctx ??= new binding.DCtx();
  if (dctx.decompress(out, stored) !== declared) throw new Error('zstd frame is shorter than it declares');
  return out;
}

/**
 * Turns one object's stored range into its raw bytes, verified: decodes it (a solid block at
 * most once per `blocks` cache, keyed by the block's offset), slices a block member out, and
 * checks length and SHA-256 against `id`. Returns the raw bytes, or a string saying why the
 * stored data does not decode to `id`; never allocates beyond the recorded lengths (a block
 * beyond {@link MAX_BLOCK_RAW_BYTES}).
 */
export function decodeObject(
  id: string,
  loc: StoredLocation,
  stored: Uint8Array,
  blocks: Map<number, Uint8Array | string>,
): Uint8Array | string {
  if (stored.length !== loc.length) return 'pack is shorter than the index says';
  let raw: Uint8Array;
  if (loc.blockOffset === undefined || loc.blockOffset === null) {
    try {
      raw = decodeBounded(stored, loc.codec, loc.rawLength);
    } catch (error) {
      return `cannot decompress (${String(error)})`;
    }
  } else {
    if (loc.codec !== 'zstd' || !validBlockSlice(loc.blockOffset, loc.rawLength)) return 'block slice lies outside any block';
    let block = blocks.get(loc.offset);
    if (block === undefined) {
      try {
        block = decodeBounded(stored, 'zstd', MAX_BLOCK_RAW_BYTES);
      } catch (error) {
        block = `cannot decompress block (${String(error)})`;
      }
      blocks.set(loc.offset, block);
    }
    if (typeof block === 'string') return block;
    if (loc.blockOffset + loc.rawLength > block.length) return 'block slice reaches past the end of its block';
    raw = block.subarray(loc.blockOffset, loc.blockOffset + loc.rawLength);
  }
  if (raw.length !== loc.rawLength || sha256Hex(raw) !== id) return 'content does not match its id';
  return raw;
}
