import { createHash, randomUUID } from 'node:crypto';
import type { BlobStore } from '../blob-store/blob-store.js';
import { type Sha256Hex, sha256Hex } from '../core/hash.js';
import { ConflictError, InputError } from '../errors.js';
import type { FolderChunk, MetadataStore } from '../metadata/metadata-store.js';
import type { ContentWorkers } from '../objects/content-workers.js';
import { ObjectWriter, type WrittenObjects } from '../objects/object-writer.js';
import { ContentSink } from '../snapshot/checkpoint/content-sink.js';
import { contentChunks } from './content-chunker.js';

/** What streaming one body into the object store produced; nothing of it is published yet. */
export interface IngestedContent {
  readonly sha256: Sha256Hex;
  readonly size: number;
  readonly chunks: readonly FolderChunk[];
  /** The packs and object rows to register in the publishing transaction. */
  readonly written: WrittenObjects;
  /** The upload-intent writer id: released by the publishing transaction, or on failure. */
  readonly writerId: string;
}

/** The stores ingestion uses. */
export interface IngestDeps {
  readonly meta: MetadataStore;
  readonly blobs: BlobStore;
  readonly workers: ContentWorkers;
}

/** A body that ends within this many bytes is small: it is held (never more) and its chunks join a {@link PackGroup}. */
export const GROUP_FILE_MAX_BYTES = 1024 * 1024;
/**
 * The longest a group stays open for writes still reading their bodies: it closes as soon as
 * no other write is ingesting (so a write with no concurrent company never waits), or when
 * full, or after this long (a slow body does not hold the others back).
 */
export const GROUP_WINDOW_MS = 3;
/** A group closes early once its writes hold this many bytes (half a target pack: it seals as one pack). */
export const GROUP_MAX_BYTES = 8 * 1024 * 1024;
/** A group closes early at this many writes (each gets its own upload-intent row per pack). */
export const GROUP_MAX_WRITES = 256;

/**
 * Streams `body` into the object store: hashed whole and per chunk as it arrives, chunked as a
 * checkpoint chunks the same bytes, chunks the index already has skipped (dedup with
 * checkpoints), the rest packed and uploaded under upload intents. Never holds more of the body
 * than {@link GROUP_FILE_MAX_BYTES}: a body that ends within it is a small file whose chunks are
 * packed together with those of concurrent small writes (see {@link PackGroup}); a larger one
 * gets its own ObjectWriter and streams. Either way the result's packs are durable when this
 * resolves, and they are protected by intents of this write's own `writerId`.
 * Rejects with `LIMIT_EXCEEDED` as soon as more than `maxBytes` arrived, with `CONFLICT` when
 * the whole content's SHA-256 is not `expectedSha256`, and with the body's own error when the
 * body fails (an interrupted upload). On any rejection nothing is registered: packs already
 * uploaded are unindexed blobs that GC removes after its grace.
 */
export async function ingestContent(
  deps: IngestDeps,
  body: AsyncIterable<Uint8Array>,
  options: { readonly maxBytes: number; readonly expectedSha256?: string; readonly path: string },
): Promise<IngestedContent> {
  const writerId = `folder-write:${randomUUID()}`;
  const groups = packGroups(deps);
  // Until it joins a group, turns out large, or fails, this write may still join the open group.
  let ingesting = true;
  const leave = (): void => {
    if (ingesting) groups.depart();
    ingesting = false;
  };
  groups.arrive();
  const abort = new AbortController();
  let own: { writer: ObjectWriter; sink: ContentSink } | undefined;
  const held: Array<[Sha256Hex, Buffer]> = [];
  let heldBytes = 0;
  const whole = createHash('sha256');
  let size = 0;
  const onPiece = (piece: Uint8Array): void => {
    size += piece.byteLength;
    if (size > options.maxBytes) {
      throw new InputError('LIMIT_EXCEEDED', `${options.path} is larger than the ${options.maxBytes}-byte limit of a folder file`, {
        data: { path: options.path, limit: options.maxBytes },
      });
    }
    whole.update(piece);
  };
  try {
    const chunks: FolderChunk[] = [];
    for await (const chunk of contentChunks(body, onPiece)) {
      const id = sha256Hex(chunk);
      chunks.push([id, chunk.byteLength]);
      if (own === undefined && heldBytes + chunk.byteLength <= GROUP_FILE_MAX_BYTES) {
        held.push([id, chunk]);
        heldBytes += chunk.byteLength;
        continue;
      }
      if (own === undefined) {
        leave();
        // Not a small file after all: it streams through a writer of its own, starting with what was held.
        const writer = new ObjectWriter(
          deps.blobs,
          deps.workers,
          (packId) => deps.meta.gc.recordIntent({ packId, writerId, checkpointId: null }),
          abort.signal,
        );
        own = { writer, sink: new ContentSink(deps.meta, writer) };
        for (const [heldId, heldChunk] of held.splice(0)) await own.sink.offerRaw(heldId, heldChunk);
      }
      await own.sink.offerRaw(id, chunk);
    }
    const sha256 = whole.digest('hex');
    if (options.expectedSha256 !== undefined && options.expectedSha256 !== sha256) {
      throw new ConflictError('CONFLICT', `${options.path} arrived with SHA-256 ${sha256}, not the expected ${options.expectedSha256}`, {
        data: { path: options.path, expected: options.expectedSha256, actual: sha256 },
      });
    }
    let written: WrittenObjects;
    if (own === undefined && held.length === 0) {
      leave();
      written = NOTHING_WRITTEN;
    } else if (own === undefined) {
      ingesting = false;
      written = await groups.join(writerId, held, heldBytes);
    } else {
      await own.sink.flush();
      written = await own.writer.finish();
    }
    return { sha256, size, chunks, written, writerId };
  } catch (error) {
    leave();
    abort.abort(error);
    await own?.writer.finish().catch(() => undefined);
    await deps.meta.gc.releaseIntents(writerId).catch(() => undefined);
    throw error;
  }
}

/** What an empty file writes: no pack, no object. */
const NOTHING_WRITTEN: WrittenObjects = {
  packs: [],
  objects: [],
  preexistingPacks: [],
  stats: { objectsWritten: 0, rawBytesWritten: 0, storedBytesWritten: 0, packsWritten: 0, blobWrites: 0 },
};

/** One {@link PackGroups} per set of stores (a `Folders` passes the same deps object to every call). */
const groupsByDeps = new WeakMap<IngestDeps, PackGroups>();

function packGroups(deps: IngestDeps): PackGroups {
  let groups = groupsByDeps.get(deps);
  if (groups === undefined) {
    groups = new PackGroups(deps);
    groupsByDeps.set(deps, groups);
  }
  return groups;
}

/** A small write waiting in a {@link PackGroup}. */
interface Member {
  readonly writerId: string;
  readonly chunks: ReadonlyArray<readonly [Sha256Hex, Buffer]>;
  readonly resolve: (written: WrittenObjects) => void;
  readonly reject: (error: unknown) => void;
}

/** Small writes packed together: open while other writes are ingesting, for {@link GROUP_WINDOW_MS} at most, or until full. */
interface PackGroup {
  readonly members: Member[];
  bytes: number;
  readonly timer: NodeJS.Timeout;
}

/**
 * Group commit of small folder writes: the chunks of concurrent small writes go through one
 * ObjectWriter, so they share a pack (one blob write, one pack for GC to keep) instead of one
 * pack each. Every member gets the same result, the whole group's packs and object rows, and
 * each member's publishing transaction registers all of it (registration is idempotent, so the
 * index always agrees with the pack trailers; a member that fails leaves its objects as
 * garbage). Before any blob is written, one transaction records an upload intent for every
 * member's own `writerId`, so the shared pack stays protected until the last member has
 * committed or failed, each releasing only its own intents. A member resolves only once the
 * group's packs are durable; if the upload fails, every member rejects and none publishes.
 */
class PackGroups {
  private open: PackGroup | undefined;
  /** Writes reading their bodies that may still turn out small and join. */
  private ingesting = 0;

  constructor(private readonly deps: IngestDeps) {}

  /** A write starts reading its body. */
  arrive(): void {
    this.ingesting += 1;
  }

  /** A write that arrived will not join (it is large, empty or failed): the open group waits for one fewer. */
  depart(): void {
    this.ingesting -= 1;
    if (this.open !== undefined && this.ingesting === 0) this.close(this.open);
  }

  /**
   * Adds a small write's chunks (it arrived and has not departed) to the open group, opening
   * one if needed, and waits for the group's packs.
   */
  join(writerId: string, chunks: ReadonlyArray<readonly [Sha256Hex, Buffer]>, bytes: number): Promise<WrittenObjects> {
    this.ingesting -= 1;
    const group = this.open ?? this.start();
    const done = new Promise<WrittenObjects>((resolve, reject) => group.members.push({ writerId, chunks, resolve, reject }));
    group.bytes += bytes;
    if (this.ingesting === 0 || group.bytes >= GROUP_MAX_BYTES || group.members.length >= GROUP_MAX_WRITES) this.close(group);
    return done;
  }

  private start(): PackGroup {
    const group: PackGroup = { members: [], bytes: 0, timer: setTimeout(() => this.close(group), GROUP_WINDOW_MS) };
    this.open = group;
    return group;
  }

  private close(group: PackGroup): void {
    clearTimeout(group.timer);
    if (this.open === group) this.open = undefined;
    this.write(group.members).then(
      (written) => {
        for (const m of group.members) m.resolve(written);
      },
      (error: unknown) => {
        for (const m of group.members) m.reject(error);
      },
    );
  }

  private async write(members: readonly Member[]): Promise<WrittenObjects> {
    const { meta } = this.deps;
    const writer = new ObjectWriter(this.deps.blobs, this.deps.workers, (packId) =>
      meta.transaction(async (tx) => {
        for (const m of members) await tx.gc.recordIntent({ packId, writerId: m.writerId, checkpointId: null });
      }),
    );
    const sink = new ContentSink(meta, writer);
    try {
      for (const m of members) for (const [id, chunk] of m.chunks) await sink.offerRaw(id, chunk);
      await sink.flush();
    } catch (error) {
      await writer.finish().catch(() => undefined);
      throw error;
    }
    return writer.finish();
  }
}
