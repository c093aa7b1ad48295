import type { BlobStore } from '../blob-store/blob-store.js';
import { type Sha256Hex, sha256Hex } from '../core/hash.js';
import { IntegrityError } from '../errors.js';
import {
  decodeFooter,
  decodeTrailer,
  PACK_FOOTER_BYTES,
  PACK_HEADER_MAGIC,
  type PackEntry,
  type PackTrailer,
  packKey,
} from './pack-format.js';
import { decodeObject } from './stored-object.js';

/** A problem found inside one pack's bytes. */
export interface PackDamage {
  /** The object concerned, or the pack itself. */
  readonly id: Sha256Hex;
  readonly target: 'pack' | 'object';
  readonly detail: string;
}

/** What {@link inspectPackBytes} found. */
export interface PackInspection {
  /** The decoded trailer, when it could be read (even if other parts are damaged). */
  readonly trailer: PackTrailer | undefined;
  /** Empty when the pack hashes to its id and every object decodes to its id. */
  readonly damage: PackDamage[];
}

/** Throws `INTEGRITY` when a trailer entry reaches into the trailer (decodeTrailer checks only the lower bound). */
function checkBounds(packId: Sha256Hex, trailer: PackTrailer, objectsEnd: number): void {
  const last = trailer.objects.at(-1);
  if (last !== undefined && last.offset + last.length > objectsEnd) {
    throw new IntegrityError('INTEGRITY', `pack ${packId} is damaged: trailer entry ${last.id} reaches past the object area`, {
      data: { pack: packId },
    });
  }
}

/**
 * Reads a pack's trailer with two ranged reads (footer, then trailer) given the pack's size
 * from a listing. Throws `INTEGRITY` when the footer or trailer is damaged or an entry lies
 * outside the object area; a missing pack rejects with the store's `NOT_FOUND`.
 */
export async function readPackTrailer(blobs: BlobStore, packId: Sha256Hex, size: number): Promise<PackTrailer> {
  const key = packKey(packId);
  if (size < PACK_HEADER_MAGIC.length + PACK_FOOTER_BYTES) {
    throw new IntegrityError('INTEGRITY', `pack ${packId} is damaged: ${size} bytes is too short for a pack`, { data: { pack: packId } });
  }
  const footer = await blobs.get(key, { offset: size - PACK_FOOTER_BYTES, length: PACK_FOOTER_BYTES });
  const trailerLength = decodeFooter(packId, footer, size);
  const trailerStart = size - PACK_FOOTER_BYTES - trailerLength;
  const trailer = decodeTrailer(packId, await blobs.get(key, { offset: trailerStart, length: trailerLength }), footer);
  checkBounds(packId, trailer, trailerStart);
  return trailer;
}

/**
 * Checks a whole pack held in memory: its SHA-256 must equal `packId`, its header, footer and
 * trailer must decode, and every object must decompress to bytes that hash to its id. Every
 * problem is collected rather than thrown, so one damaged object does not hide another.
 */
export function inspectPackBytes(packId: Sha256Hex, bytes: Uint8Array): PackInspection {
  const damage: PackDamage[] = [];
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (sha256Hex(buf) !== packId) damage.push({ id: packId, target: 'pack', detail: 'pack bytes do not hash to the pack id' });
  if (!buf.subarray(0, PACK_HEADER_MAGIC.length).equals(PACK_HEADER_MAGIC))
    damage.push({ id: packId, target: 'pack', detail: 'no pack header' });
  let trailer: PackTrailer | undefined;
  try {
    const footer = buf.subarray(buf.length - PACK_FOOTER_BYTES);
    const trailerLength = decodeFooter(packId, footer, buf.length);
    const trailerStart = buf.length - PACK_FOOTER_BYTES - trailerLength;
    trailer = decodeTrailer(packId, buf.subarray(trailerStart, trailerStart + trailerLength), footer);
    checkBounds(packId, trailer, trailerStart);
  } catch (error) {
    damage.push({ id: packId, target: 'pack', detail: error instanceof Error ? error.message : String(error) });
    return { trailer: undefined, damage };
  }
  const blocks = new Map<number, Uint8Array | string>();
  for (const entry of trailer.objects) {
    const problem = objectProblem(entry, buf.subarray(entry.offset, entry.offset + entry.length), blocks);
    if (problem !== undefined) damage.push({ id: entry.id, target: 'object', detail: `in pack ${packId}: ${problem}` });
  }
  return { trailer, damage };
}

/**
 * Why a stored object does not decode to its id, or `undefined` when it does. `blocks` caches
 * decoded solid blocks by offset across calls on one pack.
 */
export function objectProblem(
  entry: Pick<PackEntry, 'id' | 'offset' | 'length' | 'rawLength' | 'codec' | 'blockOffset'>,
  stored: Uint8Array,
  blocks: Map<number, Uint8Array | string> = new Map(),
): string | undefined {
  const raw = decodeObject(entry.id, entry, stored, blocks);
  return typeof raw === 'string' ? raw : undefined;
}
