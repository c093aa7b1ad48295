import { createHash, randomUUID } from 'node:crypto';
import type { BlobStore } from '../blob-store/blob-store.js';
import { type Sha256Hex, sha256Hex } from '../core/hash.js';
import { ConflictError, InputError } from '../errors.js';
import type { FolderChunk, MetadataStore } from '../metadata/metadata-store.js';
import type { ContentWorkers } from '../objects/content-workers.js';
import { ObjectWriter, type WrittenObjects } from '../objects/object-writer.js';
import { ContentSink } from '../snapshot/content-sink.js';
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

/**
 * Streams `body` into the object store: hashed whole and per chunk as it arrives, chunked as a
 * checkpoint chunks the same bytes, chunks the index already has skipped (dedup with
 * checkpoints), the rest packed and uploaded under upload intents. Never holds the whole body.
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
  const abort = new AbortController();
  const writer = new ObjectWriter(
    deps.blobs,
    deps.workers,
    (packId) => deps.meta.gc.recordIntent({ packId, writerId, checkpointId: null }),
    abort.signal,
  );
  const sink = new ContentSink(deps.meta, writer);
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
      await sink.offerRaw(id, chunk);
    }
    const sha256 = whole.digest('hex');
    if (options.expectedSha256 !== undefined && options.expectedSha256 !== sha256) {
      throw new ConflictError('CONFLICT', `${options.path} arrived with SHA-256 ${sha256}, not the expected ${options.expectedSha256}`, {
        data: { path: options.path, expected: options.expectedSha256, actual: sha256 },
      });
    }
    await sink.flush();
    const written = await writer.finish();
    return { sha256, size, chunks, written, writerId };
  } catch (error) {
    abort.abort(error);
    await writer.finish().catch(() => undefined);
    await deps.meta.gc.releaseIntents(writerId).catch(() => undefined);
    throw error;
  }
}
