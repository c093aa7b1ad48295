import { createHash } from 'node:crypto';
import type { Sha256Hex } from '../core/hash.js';
import { type Codec, encodeTrailer, type ObjectKind, PACK_HEADER_MAGIC, type PackEntry } from './pack-format.js';

/** Packs close once they reach about this size. */
export const TARGET_PACK_BYTES = 16 * 1024 * 1024;

/**
 * A finished pack: its id (SHA-256 of all its bytes), its bytes as the parts they were
 * appended in (never joined into one buffer: a 16 MiB copy per pack is pure overhead), its
 * size, and what it holds.
 */
export interface SealedPack {
  readonly id: Sha256Hex;
  readonly kind: ObjectKind;
  readonly parts: readonly Uint8Array[];
  readonly size: number;
  readonly objects: readonly PackEntry[];
}

/**
 * Assembles one pack in memory: objects are appended (already compressed or not) and
 * `seal()` adds the trailer and computes the pack id. The same object id is stored once.
 */
export class PackWriter {
  private readonly parts: Buffer[] = [PACK_HEADER_MAGIC];
  private readonly entries: PackEntry[] = [];
  private readonly ids = new Set<Sha256Hex>();
  private offset = PACK_HEADER_MAGIC.length;

  constructor(readonly kind: ObjectKind) {}

  /** Bytes appended so far (without the trailer). */
  get size(): number {
    return this.offset;
  }

  /** Number of objects appended so far. */
  get count(): number {
    return this.entries.length;
  }

  /** True once the pack has reached {@link TARGET_PACK_BYTES}. */
  get full(): boolean {
    return this.offset >= TARGET_PACK_BYTES;
  }

  /** Whether `id` is already in this pack. */
  has(id: Sha256Hex): boolean {
    return this.ids.has(id);
  }

  /** Appends an object's stored bytes. Duplicate ids are ignored. */
  add(id: Sha256Hex, stored: Uint8Array, rawLength: number, codec: Codec): void {
    if (this.ids.has(id)) return;
    this.ids.add(id);
    this.parts.push(Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength));
    this.entries.push({ id, kind: this.kind, offset: this.offset, length: stored.byteLength, rawLength, codec });
    this.offset += stored.byteLength;
  }

  /**
   * Appends a solid block: `stored` is one zstd frame whose decompressed bytes hold every
   * member at its `blockOffset`. Members whose id is already in the pack are not listed
   * again (their bytes in the block are simply unused).
   */
  addBlock(
    members: ReadonlyArray<{ readonly id: Sha256Hex; readonly rawLength: number; readonly blockOffset: number }>,
    stored: Uint8Array,
  ): void {
    const fresh = members.filter((m) => !this.ids.has(m.id));
    if (fresh.length === 0) return;
    this.parts.push(Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength));
    for (const m of fresh) {
      this.ids.add(m.id);
      this.entries.push({
        id: m.id,
        kind: this.kind,
        offset: this.offset,
        length: stored.byteLength,
        rawLength: m.rawLength,
        codec: 'zstd',
        blockOffset: m.blockOffset,
      });
    }
    this.offset += stored.byteLength;
  }

  /** Adds the trailer and returns the finished pack. The writer must not be used afterwards. */
  seal(): SealedPack {
    const trailer = encodeTrailer({ v: 2, kind: this.kind, objects: this.entries });
    this.parts.push(trailer);
    const parts = coalesce(this.parts);
    const hash = createHash('sha256');
    for (const part of parts) hash.update(part);
    return { id: hash.digest('hex'), kind: this.kind, parts, size: this.offset + trailer.length, objects: [...this.entries] };
  }
}

/** Parts below this are gathered into blocks, so a pack of many tiny objects is a few writes, not thousands. */
const COALESCE_BYTES = 1024 * 1024;

/** Joins runs of small parts into ~1 MiB blocks; large parts pass through uncopied. */
function coalesce(parts: readonly Uint8Array[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let run: Uint8Array[] = [];
  let runBytes = 0;
  const flush = (): void => {
    if (run.length > 0) out.push(run.length === 1 ? (run[0] as Uint8Array) : Buffer.concat(run, runBytes));
    run = [];
    runBytes = 0;
  };
  for (const part of parts) {
    if (part.byteLength >= COALESCE_BYTES) {
      flush();
      out.push(part);
      continue;
    }
    run.push(part);
    runBytes += part.byteLength;
    if (runBytes >= COALESCE_BYTES) flush();
  }
  flush();
  return out;
}
