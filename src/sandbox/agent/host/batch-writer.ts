import { createHash } from 'node:crypto';
import type { Sha256Hex } from '../../../core/hash.js';
import { InputError } from '../../../errors.js';
import { HEADER_BUDGET_BYTES, WRITE_BATCH_MAX_BYTES, WRITE_BATCH_MAX_OPS, type WriteOp, type WriteResult } from '../wire/protocol.js';
import type { WriteBatch } from './agent-client.js';

/** What a restore knows about a file it writes (its tree entry and path). */
export interface FileMeta {
  readonly path: string;
  readonly size: number;
  readonly sha256: Sha256Hex;
  readonly mode: number;
  readonly mtimeMs: number;
  /** Chunk ids, recorded in the agent's stat cache at publish. */
  readonly chunks?: readonly Sha256Hex[];
}

/** Where batches go: `AgentClient.write`. */
export interface WriteSink {
  write(batch: WriteBatch): Promise<WriteResult>;
}

/** Options of a {@link BatchWriter}. */
export interface BatchWriterOptions {
  /** Batch ids the staging already completed (`stageBegin().completedBatchIds`): not sent again. */
  readonly completed?: Iterable<string>;
  /** Batches sent before waiting for the oldest answer (default 4). */
  readonly maxInFlight?: number;
}

/** Figures of one writer. */
export interface BatchWriterStats {
  batches: number;
  /** Batches the agent applied now. */
  applied: number;
  /** Batches skipped (completed before) or acknowledged by the agent as already applied. */
  skipped: number;
  payloadBytes: number;
}

/**
 * The id of a write batch: a hash of the staging id and the ops. Ops describe their bytes
 * completely (a file piece is bytes `[at, at+length)` of the file with that SHA-256), so equal
 * ids mean equal effects, and a restore replanned after a crash can tell which batches are done
 * from the tree alone.
 */
export function writeBatchId(stagingId: string, ops: readonly WriteOp[]): string {
  return `b${createHash('sha256')
    .update(`${stagingId}\n${JSON.stringify(ops)}`)
    .digest('hex')
    .slice(0, 40)}`;
}

/**
 * Packs a restore's operations into protocol-sized write batches (at most 256 ops, 4 MiB of
 * payload, a bounded header), splitting big files into pieces across batches, and sends them
 * pipelined. Order is preserved: send directories parent-first, then files and symlinks, then
 * `dir` ops child-first (a directory's mtime changes while entries are added to it). Buffers
 * passed in must not change until `flush` resolves.
 */
export class BatchWriter {
  private ops: WriteOp[] = [];
  private pieces: Uint8Array[] = [];
  private payloadBytes = 0;
  private headerBytes = 0;
  private readonly inFlight: Array<Promise<WriteResult>> = [];
  private readonly completed: ReadonlySet<string>;
  private readonly maxInFlight: number;
  private failure: { error: unknown } | undefined;
  /** Running figures. */
  readonly stats: BatchWriterStats = { batches: 0, applied: 0, skipped: 0, payloadBytes: 0 };

  constructor(
    private readonly sink: WriteSink,
    readonly stagingId: string,
    options: BatchWriterOptions = {},
  ) {
    this.completed = new Set(options.completed ?? []);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 4);
  }

  /** A directory (created 0700 until its `dir` op). */
  mkdir(path: string): Promise<void> {
    return this.add({ op: 'mkdir', path });
  }

  /** A symlink (its target must stay inside the workspace). */
  symlink(path: string, target: string, mtimeMs: number): Promise<void> {
    return this.add({ op: 'symlink', path, target, mtimeMs });
  }

  /**
   * A hard link of a group's member (`meta`, its tree entry) to the group's leader, which must
   * be complete in staging first: send every file, then the links.
   */
  link(meta: FileMeta, leader: string): Promise<void> {
    const { path, size, sha256, mode, mtimeMs } = meta;
    return this.add({ op: 'link', path, leader, size, sha256, mode, mtimeMs });
  }

  /** A directory's final mode and mtime (`''` = the root, mode only). */
  dir(path: string, mode: number, mtimeMs: number): Promise<void> {
    return this.add({ op: 'dir', path, mode, mtimeMs });
  }

  /** A file from its bytes, whole or as consecutive pieces; their total must equal `meta.size`. */
  async file(meta: FileMeta, content: Uint8Array | AsyncIterable<Uint8Array>): Promise<void> {
    let at = 0;
    const sizeMismatch = (): InputError =>
      new InputError('INVALID_INPUT', `content of ${meta.path} does not have the ${meta.size} bytes its entry says`, {
        data: { path: meta.path, size: meta.size },
      });
    const emit = async (bytes: Uint8Array): Promise<void> => {
      if (at + bytes.length > meta.size) throw sizeMismatch();
      for (let off = 0; off < bytes.length; ) {
        const room = WRITE_BATCH_MAX_BYTES - this.payloadBytes;
        if (room === 0) {
          await this.seal();
          continue;
        }
        const take = Math.min(room, bytes.length - off);
        await this.add(pieceOp(meta, at, take), bytes.subarray(off, off + take));
        off += take;
        at += take;
      }
    };
    if (content instanceof Uint8Array) await emit(content);
    else for await (const piece of content) await emit(piece);
    if (meta.size === 0) await this.add(pieceOp(meta, 0, 0), new Uint8Array(0));
    else if (at !== meta.size) throw sizeMismatch();
  }

  /** Sends what is left and waits for every answer. */
  async flush(): Promise<BatchWriterStats> {
    await this.seal();
    while (this.inFlight.length > 0) await this.collect(this.inFlight.shift() as Promise<WriteResult>);
    return this.stats;
  }

  private async add(op: WriteOp, payload?: Uint8Array): Promise<void> {
    if (this.failure !== undefined) throw this.failure.error;
    const opBytes = Buffer.byteLength(JSON.stringify(op)) + 1;
    const length = payload?.length ?? 0;
    if (
      this.ops.length >= WRITE_BATCH_MAX_OPS ||
      this.headerBytes + opBytes > HEADER_BUDGET_BYTES ||
      this.payloadBytes + length > WRITE_BATCH_MAX_BYTES
    ) {
      await this.seal();
    }
    const placed = op.op === 'file' ? { ...op, offset: this.payloadBytes } : op;
    this.ops.push(placed);
    this.headerBytes += opBytes;
    if (payload !== undefined && length > 0) {
      this.pieces.push(payload);
      this.payloadBytes += length;
    }
  }

  private async seal(): Promise<void> {
    if (this.ops.length === 0) return;
    const ops = this.ops;
    const payload = Buffer.concat(this.pieces);
    this.ops = [];
    this.pieces = [];
    this.payloadBytes = 0;
    this.headerBytes = 0;
    const batchId = writeBatchId(this.stagingId, ops);
    this.stats.batches += 1;
    if (this.completed.has(batchId)) {
      this.stats.skipped += 1;
      return;
    }
    this.stats.payloadBytes += payload.length;
    const sent = this.sink.write({ stagingId: this.stagingId, batchId, ops, payload });
    sent.catch(() => undefined); // collected in order below; this only marks an early failure as handled
    this.inFlight.push(sent);
    while (this.inFlight.length >= this.maxInFlight) await this.collect(this.inFlight.shift() as Promise<WriteResult>);
  }

  private async collect(sent: Promise<WriteResult>): Promise<void> {
    try {
      const result = await sent;
      if (result.applied) this.stats.applied += 1;
      else this.stats.skipped += 1;
    } catch (error) {
      this.failure ??= { error };
      throw error;
    }
  }
}

function pieceOp(meta: FileMeta, at: number, length: number): WriteOp {
  const { path, size, sha256, mode, mtimeMs } = meta;
  const op = { op: 'file' as const, path, size, sha256, at, offset: 0, length, mode, mtimeMs };
  return at + length === size && meta.chunks !== undefined ? { ...op, chunks: meta.chunks } : op;
}
