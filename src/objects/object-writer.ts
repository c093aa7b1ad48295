import type { BlobStore } from '../blob-store/blob-store.js';
import type { Sha256Hex } from '../core/hash.js';
import type { ObjectRecord, PackRecord } from '../metadata/metadata-store.js';
import { type ContentWorkers, MIN_COMPRESS_BYTES, SOLID_BLOCK_RAW_BYTES, type StoredForm } from './content-workers.js';
import type { ObjectKind } from './pack-format.js';
import { uploadPack } from './pack-uploader.js';
import { PackWriter, type SealedPack } from './pack-writer.js';

/** Pack uploads in flight at once (each holds one ~16 MiB pack in memory). */
export const UPLOAD_CONCURRENCY = 3;
/** Compression batches in flight at once, so reading and compressing overlap. */
const COMPRESS_IN_FLIGHT = 3;
/** Raw objects are sent to the workers in batches of about this many bytes. */
const COMPRESS_BATCH_BYTES = 4 * 1024 * 1024;
/** Solid blocks sent to a worker in one message (about 1 MiB): one round trip per block would queue each behind file digests. */
const BLOCKS_PER_MESSAGE = 8;
/** Block messages in flight at once (about 8 MiB of raw bytes). */
const BLOCK_MESSAGES_IN_FLIGHT = 8;

/** Counts an ObjectWriter reports. */
export interface WriteStats {
  objectsWritten: number;
  rawBytesWritten: number;
  storedBytesWritten: number;
  packsWritten: number;
  blobWrites: number;
}

/** What a checkpoint commits to the index once everything is durable. */
export interface WrittenObjects {
  readonly packs: PackRecord[];
  readonly objects: ObjectRecord[];
  /** Packs whose blob already existed: the commit must make sure GC is not deleting them. */
  readonly preexistingPacks: string[];
  readonly stats: WriteStats;
}

/**
 * Records durably that the pack `packId` is about to be uploaded (an upload intent), so GC
 * leaves its blob alone until the writer commits or fails. Resolves once the record is durable.
 */
export type RecordUploadIntent = (packId: Sha256Hex) => Promise<void>;

/** Small objects waiting to be compressed together as one solid block. */
interface PendingBlock {
  readonly ids: Sha256Hex[];
  readonly raws: Uint8Array[];
  bytes: number;
}

interface Batch {
  readonly kind: ObjectKind;
  readonly ids: Sha256Hex[];
  readonly raws: Uint8Array[];
  bytes: number;
}

/**
 * Collects new objects for one checkpoint: compresses them in worker threads (objects under
 * {@link MIN_COMPRESS_BYTES} together, as solid blocks of about {@link SOLID_BLOCK_RAW_BYTES}),
 * appends them to data or tree packs of about 16 MiB, and uploads full packs with bounded concurrency.
 * Nothing is registered in the index here; `finish()` returns the pack and object rows for
 * the checkpoint's single commit transaction, after every pack is durable. Each pack's upload
 * intent is recorded (`recordIntent`) before its blob is written: the committer releases the
 * intents with the commit, or when it fails.
 */
export class ObjectWriter {
  private readonly added = new Set<Sha256Hex>();
  private readonly packs: Record<ObjectKind, PackWriter>;
  private readonly batches: Record<ObjectKind, Batch>;
  private readonly blocks: Record<ObjectKind, PendingBlock>;
  /** Full blocks not yet sent to a worker. */
  private readonly closed: Record<ObjectKind, PendingBlock[]> = { data: [], tree: [] };
  private readonly blockJobs: Array<Promise<void>> = [];
  private readonly compressing: Array<Promise<void>> = [];
  private readonly uploading = new Set<Promise<void>>();
  private readonly preexisting: string[] = [];
  /** Packs handed to the uploader; only their listings are kept, the bytes go with the upload. */
  private readonly sealed: Array<Omit<SealedPack, 'parts'>> = [];
  private failure: unknown;
  readonly stats: WriteStats = { objectsWritten: 0, rawBytesWritten: 0, storedBytesWritten: 0, packsWritten: 0, blobWrites: 0 };

  constructor(
    private readonly blobs: BlobStore,
    private readonly workers: ContentWorkers,
    private readonly recordIntent: RecordUploadIntent,
    private readonly signal?: AbortSignal,
  ) {
    this.packs = { data: new PackWriter('data'), tree: new PackWriter('tree') };
    this.batches = { data: emptyBatch('data'), tree: emptyBatch('tree') };
    this.blocks = { data: emptyBlock(), tree: emptyBlock() };
  }

  /** True if `id` was already added to this writer. */
  has(id: Sha256Hex): boolean {
    return this.added.has(id);
  }

  /**
   * Appends an object that is already in its stored form (digested and compressed by the
   * content workers); waits when uploads are saturated.
   */
  async addStored(id: Sha256Hex, kind: ObjectKind, form: StoredForm, rawLength: number): Promise<void> {
    this.throwIfFailed();
    if (this.added.has(id)) return;
    this.added.add(id);
    if (form.codec === 'none' && rawLength < MIN_COMPRESS_BYTES) {
      // Taken as they are: such bytes view only a buffer of tiny files or are their own copy
      // (`ContentWorkers`), so a pending block never holds a whole large file.
      await this.addToBlock(kind, id, form.bytes);
      return;
    }
    this.append(kind, [id], [form], [rawLength]);
    while (this.uploading.size >= UPLOAD_CONCURRENCY) await Promise.race(this.uploading);
    this.throwIfFailed();
  }

  /** Queues a new raw object for compression; waits when compression or uploads are saturated. */
  async add(id: Sha256Hex, kind: ObjectKind, raw: Uint8Array): Promise<void> {
    this.throwIfFailed();
    if (this.added.has(id)) return;
    this.added.add(id);
    if (raw.byteLength < MIN_COMPRESS_BYTES) {
      await this.addToBlock(kind, id, raw);
      return;
    }
    const batch = this.batches[kind];
    batch.ids.push(id);
    batch.raws.push(raw);
    batch.bytes += raw.byteLength;
    if (batch.bytes >= COMPRESS_BATCH_BYTES) await this.dispatch(kind);
  }

  /** Compresses and packs what is queued, uploads every pack, and returns the index rows. */
  async finish(): Promise<WrittenObjects> {
    for (const kind of ['data', 'tree'] as const) {
      await this.dispatch(kind);
      this.closeBlock(kind);
      await this.sendBlocks(kind);
    }
    await Promise.all([...this.compressing.splice(0), ...this.blockJobs.splice(0)]);
    this.throwIfFailed();
    for (const kind of ['data', 'tree'] as const) {
      if (this.packs[kind].count > 0) this.startUpload(this.packs[kind].seal());
    }
    await Promise.all([...this.uploading]);
    this.throwIfFailed();
    const packs = this.sealed.map((p) => ({ id: p.id, kind: p.kind, size: p.size, objectCount: p.objects.length }));
    const objects = this.sealed.flatMap((p) =>
      p.objects.map(({ id, kind, offset, length, rawLength, codec, blockOffset }) => {
        const row = { id, packId: p.id, kind, offset, length, rawLength, codec };
        return blockOffset === undefined ? row : { ...row, blockOffset };
      }),
    );
    return { packs, objects, preexistingPacks: [...this.preexisting], stats: { ...this.stats } };
  }

  private async addToBlock(kind: ObjectKind, id: Sha256Hex, raw: Uint8Array): Promise<void> {
    const block = this.blocks[kind];
    block.ids.push(id);
    block.raws.push(raw);
    block.bytes += raw.byteLength;
    if (block.bytes < SOLID_BLOCK_RAW_BYTES) return;
    this.closeBlock(kind);
    if (this.closed[kind].length >= BLOCKS_PER_MESSAGE) await this.sendBlocks(kind);
  }

  private closeBlock(kind: ObjectKind): void {
    if (this.blocks[kind].ids.length === 0) return;
    this.closed[kind].push(this.blocks[kind]);
    this.blocks[kind] = emptyBlock();
  }

  /**
   * Compresses the closed blocks in a worker and appends them; a block that does not shrink
   * is appended as its members, raw. Waits while too many block messages are in flight.
   */
  private async sendBlocks(kind: ObjectKind): Promise<void> {
    const blocks = this.closed[kind].splice(0);
    if (blocks.length === 0) return;
    const job = this.workers.compressBlocks(blocks.map((b) => Buffer.concat(b.raws, b.bytes))).then(
      (frames) =>
        blocks.forEach((block, i) => {
          const z = frames[i];
          if (z !== null && z !== undefined) this.appendBlock(kind, block, z);
          else
            this.append(
              kind,
              block.ids,
              block.raws.map((bytes) => ({ bytes, codec: 'none' })),
              block.raws.map((r) => r.byteLength),
            );
        }),
      (error: unknown) => {
        this.failure ??= error;
      },
    );
    await this.throttle(this.blockJobs, job, BLOCK_MESSAGES_IN_FLIGHT);
  }

  private async dispatch(kind: ObjectKind): Promise<void> {
    const batch = this.batches[kind];
    if (batch.ids.length === 0) return;
    this.batches[kind] = emptyBatch(kind);
    const job = this.workers.compress(batch.raws).then(
      (forms) =>
        this.append(
          kind,
          batch.ids,
          forms,
          batch.raws.map((r) => r.byteLength),
        ),
      (error: unknown) => {
        this.failure ??= error;
      },
    );
    await this.throttle(this.compressing, job, COMPRESS_IN_FLIGHT);
  }

  /**
   * Queues `job` and waits until fewer than `limit` jobs of its queue and fewer than
   * {@link UPLOAD_CONCURRENCY} uploads are in flight. Appending happens in completion order;
   * waiting on the oldest bounds the memory in flight.
   */
  private async throttle(queue: Array<Promise<void>>, job: Promise<void>, limit: number): Promise<void> {
    queue.push(job);
    while (queue.length >= limit) await queue.shift();
    while (this.uploading.size >= UPLOAD_CONCURRENCY) await Promise.race(this.uploading);
    this.throwIfFailed();
  }

  private appendBlock(kind: ObjectKind, block: PendingBlock, stored: Uint8Array): void {
    const pack = this.packs[kind];
    let at = 0;
    const members = block.ids.map((id, i) => {
      const rawLength = (block.raws[i] as Uint8Array).byteLength;
      const member = { id, rawLength, blockOffset: at };
      at += rawLength;
      return member;
    });
    pack.addBlock(members, stored);
    this.stats.objectsWritten += members.length;
    this.stats.rawBytesWritten += block.bytes;
    this.stats.storedBytesWritten += stored.byteLength;
    this.sealIfFull(kind);
  }

  private sealIfFull(kind: ObjectKind): void {
    const pack = this.packs[kind];
    if (pack.full) {
      this.startUpload(pack.seal());
      this.packs[kind] = new PackWriter(kind);
    }
  }

  private append(kind: ObjectKind, ids: readonly Sha256Hex[], forms: readonly StoredForm[], rawLengths: readonly number[]): void {
    forms.forEach((form, i) => {
      const pack = this.packs[kind];
      const rawLength = rawLengths[i] as number;
      pack.add(ids[i] as Sha256Hex, form.bytes, rawLength, form.codec);
      this.stats.objectsWritten += 1;
      this.stats.rawBytesWritten += rawLength;
      this.stats.storedBytesWritten += form.bytes.byteLength;
      this.sealIfFull(kind);
    });
  }

  private startUpload(pack: SealedPack): void {
    this.sealed.push({ id: pack.id, kind: pack.kind, objects: pack.objects, size: pack.size });
    this.stats.packsWritten += 1;
    const upload = async () => {
      await this.recordIntent(pack.id);
      return uploadPack(this.blobs, pack, this.signal);
    };
    const job: Promise<void> = upload().then(
      ({ writes, created }) => {
        this.stats.blobWrites += writes;
        if (!created) this.preexisting.push(pack.id);
        this.uploading.delete(job);
      },
      (error: unknown) => {
        this.failure ??= error;
        this.uploading.delete(job);
      },
    );
    this.uploading.add(job);
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }
}

function emptyBatch(kind: ObjectKind): Batch {
  return { kind, ids: [], raws: [], bytes: 0 };
}

function emptyBlock(): PendingBlock {
  return { ids: [], raws: [], bytes: 0 };
}
