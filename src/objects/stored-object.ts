import { sha256Hex } from '../core/hash.js';
import { MAX_BLOCK_RAW_BYTES, type PackEntry, validBlockSlice } from './pack-format.js';
import { decodeBounded } from './zstd-bounded.js';

/** The parts of an index row or trailer entry that say how to turn stored bytes into an object. */
export type StoredLocation = Pick<PackEntry, 'offset' | 'length' | 'rawLength' | 'codec'> & {
  readonly blockOffset?: number | null | undefined;
};

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
