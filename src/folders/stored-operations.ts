import { isSha256Hex } from '../core/hash.js';
import { type HoldfastError, InputError, NotFoundError, StoreError } from '../errors.js';
import type { FolderChunk, FolderCollection, FolderFileRecord, MetadataTransaction } from '../metadata/metadata-store.js';
import {
  directoryRow,
  type FolderOperations,
  kindClash,
  type MutationItem,
  modeFingerprint,
  type Outcome,
  putFileMode,
  putFileRow,
  writeFingerprint,
} from './folder-operations.js';
import { parentPaths, validateFolderPath, validateName } from './folder-paths.js';
import type { FolderLimits, FolderRef, MkdirOptions, OperationOptions, WriteOptions } from './folders.js';

/** Operations one {@link Folders.applyStored} call applies at most (one transaction, one collection lock). */
export const MAX_STORED_BATCH_OPERATIONS = 256;

/**
 * Content already in the object store, named by its ids: the whole file's SHA-256, its size
 * and the ids of its chunks in order (the chunking of a checkpoint tree, which folder rows
 * share). The caller vouches for the bytes (it holds them: a checkpoint it made recorded
 * them); `Folders` checks only that every chunk is present and that their lengths add up.
 */
export interface StoredContent {
  readonly sha256: string;
  readonly size: number;
  readonly chunks: readonly string[];
}

/** Options of a stored write: those of `write`, without `expectedSha256` (the content is named by its hash). */
export type StoredWriteOptions = Omit<WriteOptions, 'expectedSha256'>;

/**
 * One operation of {@link Folders.applyStored}. `mode` sets the executable bit of the live
 * file at `path` and keeps its content as the collection holds it now (`NOT_FOUND` when no
 * live file is there): what a change of the mode alone is sent as, so it never carries bytes.
 */
export type StoredOperation =
  | { readonly op: 'write'; readonly path: string; readonly content: StoredContent; readonly options: StoredWriteOptions }
  | { readonly op: 'mode'; readonly path: string; readonly executable: boolean; readonly options: OperationOptions }
  | { readonly op: 'mkdir'; readonly path: string; readonly options: MkdirOptions }
  | { readonly op: 'remove'; readonly path: string; readonly options: OperationOptions };

/**
 * What one operation of a batch did: applied now, or a replay of an earlier one by the same
 * id (`applied: false`); or refused with `error` (a `HoldfastError`: `CONFLICT`, `NOT_FOUND`,
 * `LIMIT_EXCEEDED`, …), in which case it changed nothing and got no receipt.
 */
export type StoredOutcome =
  | { readonly ok: true; readonly applied: boolean; readonly removed?: number; readonly resultId: string | null }
  | { readonly ok: false; readonly error: HoldfastError };

/**
 * Applies `ops` to collection `ref` in one transaction, each with its own receipt and the
 * fingerprint the streamed form of the same operation has (so a stored write and a streamed
 * write of the same bytes under one id are one operation). Arguments are checked first
 * (`INVALID_PATH`, `INVALID_INPUT`, more than {@link MAX_STORED_BATCH_OPERATIONS} ops). Every
 * operation's checks run before its first write, so a refused one is answered in its outcome
 * and the rest still apply; a store failure rolls the whole batch back and rejects.
 */
export async function applyStoredOperations(
  ops: FolderOperations,
  limits: FolderLimits,
  ref: FolderRef,
  batch: readonly StoredOperation[],
): Promise<StoredOutcome[]> {
  if (batch.length > MAX_STORED_BATCH_OPERATIONS) {
    throw new InputError('INVALID_INPUT', `a stored batch holds at most ${MAX_STORED_BATCH_OPERATIONS} operations, not ${batch.length}`, {
      data: { field: 'operations', limit: MAX_STORED_BATCH_OPERATIONS },
    });
  }
  const items = batch.map((op) => item(ops, limits, op));
  if (items.length === 0) return [];
  const results = await ops.mutateMany(ref, items, true);
  return results.map((r) => {
    if ('error' in r) return { ok: false, error: r.error };
    const removed = typeof r.answer === 'number' ? { removed: r.answer } : {};
    return { ok: true, applied: r.applied, resultId: r.resultId, ...removed };
  });
}

function item(ops: FolderOperations, limits: FolderLimits, op: StoredOperation): MutationItem<FolderFileRecord | number> {
  validateFolderPath(op.path, limits.maxPathBytes);
  validateName(op.options.operationId, 'operationId');
  const { path } = op;
  if (op.op === 'remove') {
    return {
      operationId: op.options.operationId,
      fingerprint: ['delete', path],
      apply: async (tx, collection, at) => {
        const removed = await ops.trashSubtree(tx, collection, path, at);
        if (removed === 0) throw notLive(path);
        return { answer: removed, resultId: null };
      },
    };
  }
  if (op.op === 'mode') {
    if (typeof op.executable !== 'boolean') {
      throw new InputError('INVALID_INPUT', `a mode change of ${path} needs executable true or false`, {
        data: { path, field: 'executable' },
      });
    }
    const { executable } = op;
    return {
      operationId: op.options.operationId,
      fingerprint: modeFingerprint(path, executable),
      apply: (tx, collection, at) => putFileMode(tx, collection, path, executable, at),
    };
  }
  if (op.op === 'mkdir') {
    const replace = op.options.replaceKind === true;
    return {
      operationId: op.options.operationId,
      fingerprint: ['mkdir', path, replace],
      apply: async (tx, collection, at) => {
        const live = await ops.liveWithParents(tx, collection, path);
        const existing = live.get(path);
        if (existing?.kind === 'directory') return { answer: existing, resultId: existing.id };
        if (existing !== undefined && !replace) throw kindClash(path, 'file');
        await checkRoom(tx, limits, collection, path, live, 1);
        if (existing !== undefined) await ops.trashSubtree(tx, collection, path, at);
        await ops.createParents(tx, collection, path, live, at, 1);
        const row = await tx.folders.insertFile(collection.id, directoryRow(collection, path, at));
        return { answer: row, resultId: row.id };
      },
    };
  }
  const { content, options } = op;
  checkContent(path, content, limits);
  if (options.contentType !== undefined) validateName(options.contentType, 'contentType');
  return {
    operationId: options.operationId,
    fingerprint: writeFingerprint(path, content.sha256, options),
    apply: (tx, collection, at) => applyWrite(ops, limits, tx, collection, at, op.path, content, options),
  };
}

async function applyWrite(
  ops: FolderOperations,
  limits: FolderLimits,
  tx: MetadataTransaction,
  collection: FolderCollection,
  at: number,
  path: string,
  content: StoredContent,
  options: StoredWriteOptions,
): Promise<Outcome<FolderFileRecord>> {
  const live = await ops.liveWithParents(tx, collection, path);
  const existing = live.get(path);
  if (existing !== undefined && options.onlyIfMissing === true) return { answer: existing, resultId: existing.id };
  const replacing = existing?.kind === 'directory';
  if (replacing && options.replaceKind !== true) throw kindClash(path, 'directory');
  const chunks = await presentChunks(tx, path, content);
  const kept = replacing ? undefined : existing;
  await checkRoom(tx, limits, collection, path, live, kept === undefined ? 1 : 0);
  if (replacing) await ops.trashSubtree(tx, collection, path, at);
  await ops.createParents(tx, collection, path, live, at, kept === undefined ? 1 : 0);
  return putFileRow(tx, collection, path, kept, { size: content.size, sha256: content.sha256, chunks, options, at });
}

/** The shape of stored content: hex ids, a size within the limit, and one chunk (its hash) for a small file. */
function checkContent(path: string, content: StoredContent, limits: FolderLimits): void {
  const bad = (why: string): never => {
    throw new InputError('INVALID_INPUT', `stored content for ${path} ${why}`, { data: { path, field: 'content' } });
  };
  if (!isSha256Hex(content.sha256)) bad('needs a lowercase hex sha256');
  if (!Number.isSafeInteger(content.size) || content.size < 0) bad('needs a non-negative integer size');
  if (content.size > limits.maxFileBytes) {
    throw new InputError('LIMIT_EXCEEDED', `${path} is larger than the ${limits.maxFileBytes}-byte limit of a folder file`, {
      data: { path, limit: limits.maxFileBytes },
    });
  }
  if (!content.chunks.every((c) => isSha256Hex(c))) bad('names a chunk that is not a lowercase hex id');
  if ((content.size === 0) !== (content.chunks.length === 0)) bad('has chunks that do not fit its size');
  if (content.chunks.length === 1 && content.chunks[0] !== content.sha256) bad('has one chunk that is not the whole file');
}

/**
 * The chunk list of a row, with each chunk's raw length from the object index: every chunk
 * must be a present data object and their lengths must add up to the size. A chunk GC took
 * meanwhile is a transient `STORE_UNAVAILABLE` (a retry of the caller's upload brings it
 * back); lengths that do not add up are `INVALID_INPUT`. Only reads: safe before any write.
 */
async function presentChunks(tx: MetadataTransaction, path: string, content: StoredContent): Promise<FolderChunk[]> {
  if (content.chunks.length === 0) return [];
  const found = await tx.objects.locate(content.chunks);
  const missing = content.chunks.filter((id) => found.get(id)?.kind !== 'data');
  if (missing.length > 0) {
    throw new StoreError(`${missing.length} chunk(s) of ${path} are not in the object store; upload them again`, {
      transient: true,
      data: { path, missing: missing.slice(0, 5) },
    });
  }
  const chunks = content.chunks.map((id): FolderChunk => [id, found.get(id)?.rawLength as number]);
  const total = chunks.reduce((n, [, len]) => n + len, 0);
  if (total !== content.size) {
    throw new InputError('INVALID_INPUT', `the chunks of ${path} hold ${total} bytes, not ${content.size}`, {
      data: { path, field: 'content' },
    });
  }
  return chunks;
}

/** Refuses (before any write) an operation that would take the collection over its entry limit. */
async function checkRoom(
  tx: MetadataTransaction,
  limits: FolderLimits,
  collection: FolderCollection,
  path: string,
  live: ReadonlyMap<string, unknown>,
  extra: number,
): Promise<void> {
  const missing = parentPaths(path).filter((p) => !live.has(p)).length;
  const adding = missing + extra;
  if (adding === 0) return;
  const count = await tx.folders.countFiles(collection.id);
  if (count + adding > limits.maxEntries) {
    throw new InputError(
      'LIMIT_EXCEEDED',
      `${collection.scope} folder ${collection.ownerId} would hold more than ${limits.maxEntries} entries`,
      {
        data: { limit: limits.maxEntries, entries: count },
      },
    );
  }
}

function notLive(path: string): NotFoundError {
  return new NotFoundError(`nothing live at ${path} to delete`, { data: { path } });
}
