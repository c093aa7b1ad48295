import type { BlobStore } from '../blob-store/blob-store.js';
import type { Sha256Hex } from '../core/hash.js';
import { decodeTree, type TreeEntry } from '../core/tree.js';
import { IntegrityError, isHoldfastError } from '../errors.js';
import type { MetadataStore, ObjectLocation } from '../metadata/metadata-store.js';
import { packKey } from './pack-format.js';
import { decodeObject } from './stored-object.js';

/** Neighbouring objects of one pack closer than this are fetched in a single ranged read. */
export const COALESCE_GAP_BYTES = 256 * 1024;
/** Largest single ranged read. */
export const MAX_READ_BYTES = 16 * 1024 * 1024;
/** Ranged reads in flight at once. */
export const READ_CONCURRENCY = 4;

interface Span {
  readonly packId: string;
  readonly offset: number;
  end: number;
  readonly members: Array<{ id: Sha256Hex; loc: ObjectLocation }>;
}

/**
 * Reads objects back from packs: looks them up in the index, merges neighbours into ranged
 * reads, decompresses (each solid block once per call), and checks every object's SHA-256 and length. Missing objects fail
 * with `RESTORE_INCOMPLETE`, damaged ones with `INTEGRITY`; nothing unverified is returned.
 * A pack the blob store answers `NOT_FOUND` for is recorded missing in the index before the
 * read fails (data `{pack}`): from then on dedup no longer hands out its objects, so the next
 * checkpoint that has their bytes writes them again (restore, verify, cat, GC: every reader).
 */
export class ObjectReader {
  constructor(
    private readonly blobs: BlobStore,
    private readonly meta: Pick<MetadataStore, 'objects'>,
  ) {}

  /** Reads and verifies `ids` (duplicates allowed); returns raw bytes by id. */
  async readMany(ids: Iterable<Sha256Hex>): Promise<Map<Sha256Hex, Uint8Array>> {
    const wanted = [...new Set(ids)];
    // Condemned packs are still readable during GC's grace period; a reader never needs to fail on them.
    const locations = await this.meta.objects.locate(wanted, { includeCondemned: true });
    const missing = wanted.filter((id) => !locations.has(id));
    if (missing.length > 0) {
      throw new IntegrityError('RESTORE_INCOMPLETE', `${missing.length} object(s) are not in the index, e.g. ${missing[0]}`, {
        data: { missing: missing.slice(0, 20), missingCount: missing.length },
      });
    }
    const spans = planSpans(wanted.map((id) => ({ id, loc: locations.get(id) as ObjectLocation })));
    const out = new Map<Sha256Hex, Uint8Array>();
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let span = spans[next++]; span !== undefined; span = spans[next++]) await this.readSpan(span, out);
    };
    await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, spans.length) }, worker));
    return out;
  }

  /** Reads and verifies one object. */
  async read(id: Sha256Hex): Promise<Uint8Array> {
    return (await this.readMany([id])).get(id) as Uint8Array;
  }

  /** Reads, verifies and decodes one tree object. */
  async readTree(id: Sha256Hex): Promise<TreeEntry[]> {
    return decodeTree(id, await this.read(id));
  }

  private async readSpan(span: Span, out: Map<Sha256Hex, Uint8Array>): Promise<void> {
    let bytes: Uint8Array;
    try {
      bytes = await this.blobs.get(packKey(span.packId), { offset: span.offset, length: span.end - span.offset });
    } catch (error) {
      if (isHoldfastError(error, 'NOT_FOUND')) {
        // Best effort: the read fails with the pack named either way; an index that cannot be
        // written now learns of the loss from the next presence sweep.
        await this.meta.objects.markPacksMissing([span.packId]).catch(() => undefined);
        throw new IntegrityError('RESTORE_INCOMPLETE', `pack ${span.packId} is missing from the ${this.blobs.name} store`, {
          data: { pack: span.packId },
          cause: error,
        });
      }
      throw error;
    }
    // Members of one solid block share its range: the block is decompressed once per span.
    const blocks = new Map<number, Uint8Array | string>();
    for (const { id, loc } of span.members) {
      const start = loc.offset - span.offset;
      const raw = decodeObject(id, loc, bytes.subarray(start, start + loc.length), blocks);
      if (typeof raw === 'string') throw damaged(id, loc, raw);
      out.set(id, raw);
    }
  }
}

function damaged(id: string, loc: ObjectLocation, why: string): IntegrityError {
  return new IntegrityError('INTEGRITY', `object ${id} in pack ${loc.packId} is damaged: ${why}`, {
    data: { object: id, pack: loc.packId },
  });
}

/** Groups objects by pack and merges near neighbours into spans no longer than MAX_READ_BYTES. */
export function planSpans(items: ReadonlyArray<{ id: Sha256Hex; loc: ObjectLocation }>): Span[] {
  const sorted = [...items].sort((a, b) =>
    a.loc.packId < b.loc.packId ? -1 : a.loc.packId > b.loc.packId ? 1 : a.loc.offset - b.loc.offset,
  );
  const spans: Span[] = [];
  let current: Span | undefined;
  for (const item of sorted) {
    const end = item.loc.offset + item.loc.length;
    if (
      current !== undefined &&
      current.packId === item.loc.packId &&
      item.loc.offset - current.end <= COALESCE_GAP_BYTES &&
      Math.max(end, current.end) - current.offset <= MAX_READ_BYTES
    ) {
      current.end = Math.max(current.end, end);
      current.members.push(item);
      continue;
    }
    current = { packId: item.loc.packId, offset: item.loc.offset, end, members: [item] };
    spans.push(current);
  }
  return spans;
}
