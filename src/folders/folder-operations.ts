import { randomUUID } from 'node:crypto';
import { sha256Hex } from '../core/hash.js';
import { ConflictError, type HoldfastError, InputError, isHoldfastError, NotFoundError, StoreError } from '../errors.js';
import type { FolderCollection, FolderFileRecord, MetadataTransaction } from '../metadata/metadata-store.js';
import { type IngestedContent, ingestContent } from './content-ingest.js';
import { parentPaths, validateFolderPath, validateName } from './folder-paths.js';
import {
  type Applied,
  checkRef,
  type FolderEntry,
  type FolderLimits,
  type FolderRef,
  type FoldersDeps,
  type MkdirOptions,
  type OperationOptions,
  toEntry,
  type WriteOptions,
} from './folders.js';

/** What an applied operation did: its answer and the row a replay reports (`result_id`). */
export interface Outcome<T> {
  readonly answer: T;
  readonly resultId: string | null;
}

/** A live row by path. */
export type Live = Map<string, FolderFileRecord>;

/** One operation of {@link FolderOperations.mutateMany}: its id, its fingerprint, and what applying it does. */
export interface MutationItem<T> {
  readonly operationId: string;
  readonly fingerprint: readonly unknown[];
  readonly apply: (tx: MetadataTransaction, collection: FolderCollection, at: number) => Promise<Outcome<T>>;
}

/** What one operation of {@link FolderOperations.mutateMany} did: applied (or replayed), or refused with `error`. */
export type MutationResult<T> = { applied: boolean; answer: T | undefined; resultId: string | null } | { error: HoldfastError };

/**
 * The mutations behind {@link Folders}: each runs {@link FolderOperations.mutate}'s one
 * transaction (collection lock, receipt check, apply, receipt), and a write streams its body
 * into the object store before that transaction, so the lock is never held during a transfer.
 */
export class FolderOperations {
  constructor(
    private readonly deps: FoldersDeps,
    private readonly limits: FolderLimits,
    private readonly now: () => number,
  ) {}

  async write(
    ref: FolderRef,
    path: string,
    body: AsyncIterable<Uint8Array>,
    options: WriteOptions,
  ): Promise<{ entry: FolderEntry | null } & Applied> {
    checkRef(ref);
    validateFolderPath(path, this.limits.maxPathBytes);
    validateName(options.operationId, 'operationId');
    if (options.contentType !== undefined) validateName(options.contentType, 'contentType');
    if (options.expectedSha256 !== undefined && !/^[0-9a-f]{64}$/.test(options.expectedSha256)) {
      throw new InputError('INVALID_INPUT', 'expectedSha256 must be 64 lowercase hex characters', { data: { field: 'expectedSha256' } });
    }
    const startedAt = Date.now();
    const content = await ingestContent(this.deps, body, {
      maxBytes: this.limits.maxFileBytes,
      path,
      ...(options.expectedSha256 === undefined ? {} : { expectedSha256: options.expectedSha256 }),
    });
    const fingerprint = writeFingerprint(path, content.sha256, options);
    try {
      const result = await this.mutate(ref, options.operationId, fingerprint, async (tx, collection, at) => {
        const live = await this.liveWithParents(tx, collection, path);
        let existing = live.get(path);
        if (existing !== undefined && options.onlyIfMissing === true) return { answer: existing, resultId: existing.id };
        if (existing?.kind === 'directory') {
          if (options.replaceKind !== true) throw kindClash(path, 'directory');
          await this.trashSubtree(tx, collection, path, at);
          existing = undefined;
        }
        await this.createParents(tx, collection, path, live, at, existing === undefined ? 1 : 0);
        await publishObjects(tx, content, startedAt);
        return putFileRow(tx, collection, path, existing, { ...content, options, at });
      });
      return result.applied
        ? { entry: toEntry(result.answer as FolderFileRecord), applied: true }
        : { entry: await this.replayedEntry(ref, result.resultId), applied: false };
    } finally {
      // Registered by the commit, or garbage for GC after a failure: the intents protect nothing now.
      await this.deps.meta.gc.releaseIntents(content.writerId).catch(() => undefined);
    }
  }

  async mkdir(ref: FolderRef, path: string, options: MkdirOptions): Promise<{ entry: FolderEntry | null } & Applied> {
    checkRef(ref);
    validateFolderPath(path, this.limits.maxPathBytes);
    validateName(options.operationId, 'operationId');
    const result = await this.mutate(
      ref,
      options.operationId,
      ['mkdir', path, options.replaceKind === true],
      async (tx, collection, at) => {
        const live = await this.liveWithParents(tx, collection, path);
        let existing = live.get(path);
        if (existing?.kind === 'directory') return { answer: existing, resultId: existing.id };
        if (existing !== undefined) {
          if (options.replaceKind !== true) throw kindClash(path, 'file');
          await this.trashSubtree(tx, collection, path, at);
          existing = undefined;
        }
        await this.createParents(tx, collection, path, live, at, 1);
        const row = await tx.folders.insertFile(collection.id, directoryRow(collection, path, at));
        return { answer: row, resultId: row.id };
      },
    );
    return result.applied
      ? { entry: toEntry(result.answer as FolderFileRecord), applied: true }
      : { entry: await this.replayedEntry(ref, result.resultId), applied: false };
  }

  async remove(ref: FolderRef, path: string, options: OperationOptions): Promise<{ removed: number } & Applied> {
    checkRef(ref);
    validateFolderPath(path, this.limits.maxPathBytes);
    validateName(options.operationId, 'operationId');
    const result = await this.mutate(ref, options.operationId, ['delete', path], async (tx, collection, at) => {
      const removed = await this.trashSubtree(tx, collection, path, at);
      if (removed === 0) throw new NotFoundError(`nothing live at ${path} to delete`, { data: { path } });
      return { answer: removed, resultId: null };
    });
    return { removed: result.applied ? (result.answer as number) : 0, applied: result.applied };
  }

  async restore(ref: FolderRef, fileId: string, options: OperationOptions): Promise<{ restored: number } & Applied> {
    checkRef(ref);
    validateName(fileId, 'fileId');
    validateName(options.operationId, 'operationId');
    const result = await this.mutate(ref, options.operationId, ['restore', fileId], async (tx, collection, at) => {
      const unit = await trashedUnit(tx, collection, fileId);
      const top = unit[0] as FolderFileRecord;
      const clash = await tx.folders.liveAt(
        collection.id,
        unit.map((r) => r.path),
      );
      if (clash.length > 0) {
        throw new ConflictError('CONFLICT', `${clash[0]?.path} is live again: delete it before restoring this deleted copy`, {
          data: { path: clash[0]?.path, fileId },
        });
      }
      const live = await this.liveWithParents(tx, collection, top.path);
      await this.createParents(tx, collection, top.path, live, at, 0);
      await tx.folders.untrashFiles(
        unit.map((r) => r.id),
        at,
      );
      return { answer: unit.length, resultId: top.id };
    });
    return { restored: result.applied ? (result.answer as number) : 0, applied: result.applied };
  }

  async purge(ref: FolderRef, fileId: string, options: OperationOptions): Promise<{ purged: number } & Applied> {
    checkRef(ref);
    validateName(fileId, 'fileId');
    validateName(options.operationId, 'operationId');
    const result = await this.mutate(ref, options.operationId, ['purge', fileId], async (tx, collection) => {
      const unit = await trashedUnit(tx, collection, fileId);
      await tx.folders.deleteFiles(unit.map((r) => r.id));
      return { answer: unit.length, resultId: null };
    });
    return { purged: result.applied ? (result.answer as number) : 0, applied: result.applied };
  }

  async purgeCollection(ref: FolderRef): Promise<{ purged: number }> {
    checkRef(ref);
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    if (collection === undefined) return { purged: 0 };
    const purged = await this.deps.meta.transaction(async (tx) => {
      if ((await tx.folders.lockCollection(collection.id)) === undefined) return 0;
      return tx.folders.deleteCollection(collection.id);
    });
    return { purged };
  }

  /**
   * The one transaction of a mutation: lock the collection (created on first use), then the
   * receipt decides: the same id and fingerprint is a replay (`applied: false`, nothing
   * done), another fingerprint `CONFLICT`; otherwise `apply` runs and the receipt and the
   * collection's `lastOperationAt` are recorded with it. A collection purged between its
   * lookup and the lock is created afresh on the retry.
   */
  private async mutate<T>(
    ref: FolderRef,
    operationId: string,
    fingerprint: readonly unknown[],
    apply: (tx: MetadataTransaction, collection: FolderCollection, at: number) => Promise<Outcome<T>>,
  ): Promise<{ applied: boolean; answer: T | undefined; resultId: string | null }> {
    const [result] = await this.mutateMany(ref, [{ operationId, fingerprint, apply }], false);
    const only = result as MutationResult<T>;
    if ('error' in only) throw only.error;
    return only;
  }

  /**
   * {@link mutate} for several operations in one transaction (one collection lock): each is
   * checked against its own receipt and, unless replayed, applied and given its receipt, in
   * order. With `isolate`, an operation whose `apply` rejects with a `HoldfastError` other than
   * `STORE_UNAVAILABLE` is answered with that error and the others still apply; `apply` must
   * then make its checks before its first write, so a refused operation changed nothing.
   * Anything else rolls the whole transaction back and rejects.
   */
  async mutateMany<T>(ref: FolderRef, items: ReadonlyArray<MutationItem<T>>, isolate: boolean): Promise<Array<MutationResult<T>>> {
    const prints = items.map((item) => sha256Hex(JSON.stringify(item.fingerprint)));
    for (let attempt = 0; ; attempt += 1) {
      const collection = await this.deps.meta.folders.ensureCollection(ref.tenantId, ref.scope, ref.ownerId);
      const results = await this.deps.meta.transaction(async (tx) => {
        const locked = await tx.folders.lockCollection(collection.id);
        if (locked === undefined) return undefined;
        const out: Array<MutationResult<T>> = [];
        let last = locked.lastOperationAt ?? 0;
        let touched = false;
        for (const [i, item] of items.entries()) {
          const receipt = await tx.folders.findReceipt(locked.id, item.operationId);
          if (receipt !== undefined) {
            const error =
              receipt.fingerprint === prints[i]
                ? undefined
                : new ConflictError('CONFLICT', `operation id ${item.operationId} was already used for a different operation`, {
                    data: { operationId: item.operationId },
                  });
            if (error !== undefined && !isolate) throw error;
            out.push(error === undefined ? { applied: false, answer: undefined, resultId: receipt.resultId } : { error });
            continue;
          }
          // Never behind the last operation, so updatedAt and lastOperationAt only move forward.
          const at = Math.max(this.now(), last);
          let outcome: Outcome<T>;
          try {
            outcome = await item.apply(tx, { ...locked, lastOperationAt: last }, at);
          } catch (error) {
            if (!isolate || !isHoldfastError(error) || error.code === 'STORE_UNAVAILABLE') throw error;
            out.push({ error });
            continue;
          }
          await tx.folders.insertReceipt(locked.id, item.operationId, prints[i] as string, outcome.resultId, at);
          last = at;
          touched = true;
          out.push({ applied: true, answer: outcome.answer, resultId: outcome.resultId });
        }
        if (touched) await tx.folders.touchCollection(locked.id, last);
        return out;
      });
      if (results !== undefined) return results;
      if (attempt >= 2) throw new StoreError(`${ref.scope} folder ${ref.ownerId} kept being purged while written to`, { transient: true });
    }
  }

  /** Live rows at `path` and at each of its parents, by path; `CONFLICT` if a parent is a file. */
  async liveWithParents(tx: MetadataTransaction, collection: FolderCollection, path: string): Promise<Live> {
    const parents = parentPaths(path);
    const live: Live = new Map((await tx.folders.liveAt(collection.id, [...parents, path])).map((r) => [r.path, r]));
    for (const parent of parents) {
      if (live.get(parent)?.kind === 'file') {
        throw new ConflictError('CONFLICT', `${parent} is a file, so ${path} cannot be created under it`, { data: { path, parent } });
      }
    }
    return live;
  }

  /** Creates the missing parent directories of `path`, after checking the entry limit for them and `extra` more rows. */
  async createParents(tx: MetadataTransaction, collection: FolderCollection, path: string, live: Live, at: number, extra: number) {
    const missing = parentPaths(path).filter((p) => !live.has(p));
    const adding = missing.length + extra;
    if (adding > 0) {
      const count = await tx.folders.countFiles(collection.id);
      if (count + adding > this.limits.maxEntries) {
        throw new InputError(
          'LIMIT_EXCEEDED',
          `${collection.scope} folder ${collection.ownerId} would hold more than ${this.limits.maxEntries} entries`,
          {
            data: { limit: this.limits.maxEntries, entries: count },
          },
        );
      }
    }
    for (const parent of missing) await tx.folders.insertFile(collection.id, directoryRow(collection, parent, at));
  }

  /** Moves `path` and its live subtree to the trash as one new unit; resolves with how many rows went. */
  async trashSubtree(tx: MetadataTransaction, collection: FolderCollection, path: string, at: number): Promise<number> {
    const rows = await tx.folders.liveSubtree(collection.id, path);
    if (rows.length > 0)
      await tx.folders.trashFiles(
        rows.map((r) => r.id),
        at,
        randomUUID(),
      );
    return rows.length;
  }

  /** The row an earlier, replayed operation produced, as it is now (`null` if purged since). */
  private async replayedEntry(ref: FolderRef, resultId: string | null): Promise<FolderEntry | null> {
    if (resultId === null) return null;
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    const row = collection === undefined ? undefined : await this.deps.meta.folders.getFile(collection.id, resultId);
    return row === undefined ? null : toEntry(row);
  }
}

export function directoryRow(collection: FolderCollection, path: string, at: number) {
  return {
    collectionId: collection.id,
    path,
    kind: 'directory' as const,
    size: 0,
    sha256: null,
    chunks: null,
    executable: false,
    contentType: null,
    updatedAt: at,
  };
}

/**
 * The receipt fingerprint of a write: the same for a streamed write and one of stored content,
 * so either may replay the other's operation id.
 */
export function writeFingerprint(path: string, sha256: string, options: Omit<WriteOptions, 'operationId' | 'expectedSha256'>): unknown[] {
  return [
    'write',
    path,
    sha256,
    options.executable === true,
    options.contentType ?? null,
    options.replaceKind === true,
    options.onlyIfMissing === true,
  ];
}

/**
 * Writes the live file row at `path`: overwrites `existing` in place (its id stays) or inserts
 * a new row. Resolves with the row as it now is and its id, as a mutation's answer.
 */
export async function putFileRow(
  tx: MetadataTransaction,
  collection: FolderCollection,
  path: string,
  existing: FolderFileRecord | undefined,
  content: Pick<FolderFileRecord, 'size' | 'sha256' | 'chunks'> & {
    readonly options: { readonly executable?: boolean; readonly contentType?: string };
    readonly at: number;
  },
): Promise<{ answer: FolderFileRecord; resultId: string }> {
  const fields = {
    size: content.size,
    sha256: content.sha256,
    chunks: content.chunks,
    executable: content.options.executable === true,
    contentType: content.options.contentType ?? null,
    updatedAt: content.at,
  };
  if (existing !== undefined) {
    await tx.folders.updateContent(existing.id, fields);
    return { answer: { ...existing, ...fields }, resultId: existing.id };
  }
  const row = await tx.folders.insertFile(collection.id, { collectionId: collection.id, path, kind: 'file', ...fields });
  return { answer: row, resultId: row.id };
}

/** The receipt fingerprint of a mode change: the path and the executable bit it sets. */
export function modeFingerprint(path: string, executable: boolean): unknown[] {
  return ['mode', path, executable];
}

/**
 * Sets the executable bit of the live file at `path`, its content kept exactly as the row holds
 * it now (`updatedAt` moves). `NOT_FOUND` when no live file is there (none, a directory, or a
 * path under a file): a mode change never brings content back. Only reads before its write.
 */
export async function putFileMode(
  tx: MetadataTransaction,
  collection: FolderCollection,
  path: string,
  executable: boolean,
  at: number,
): Promise<{ answer: FolderFileRecord; resultId: string }> {
  const [existing] = await tx.folders.liveAt(collection.id, [path]);
  if (existing === undefined || existing.kind !== 'file') {
    throw new NotFoundError(`no live file at ${path} to change the mode of`, { data: { path } });
  }
  const fields = {
    size: existing.size,
    sha256: existing.sha256,
    chunks: existing.chunks,
    executable,
    contentType: existing.contentType,
    updatedAt: at,
  };
  await tx.folders.updateContent(existing.id, fields);
  return { answer: { ...existing, ...fields }, resultId: existing.id };
}

export function kindClash(path: string, kind: 'file' | 'directory'): ConflictError {
  return new ConflictError('CONFLICT', `${path} is a ${kind}: pass replaceKind to replace it (the old one goes to the trash)`, {
    data: { path, kind },
  });
}

/** Row `fileId` of the trash and, for a directory, the rows of its trash unit beneath it; `NOT_FOUND` otherwise. */
async function trashedUnit(tx: MetadataTransaction, collection: FolderCollection, fileId: string): Promise<FolderFileRecord[]> {
  const row = await tx.folders.getFile(collection.id, fileId);
  if (row === undefined || row.deletedAt === null || row.trashUnit === null) {
    throw new NotFoundError(`no deleted file ${fileId} in ${collection.scope} folder ${collection.ownerId}`, { data: { fileId } });
  }
  if (row.kind === 'file') return [row];
  const unit = await tx.folders.trashUnitSubtree(collection.id, row.trashUnit, row.path);
  return [row, ...unit.filter((r) => r.id !== row.id)];
}

/**
 * Registers the packs and objects a write uploaded, in the publishing transaction: a pack
 * whose blob was already there may be one GC is deleting (refused, as checkpoints refuse it),
 * and every chunk the row names must be present, not condemned, once the transaction ends.
 * Either failure is a transient `STORE_UNAVAILABLE`: a retry uploads afresh.
 */
async function publishObjects(tx: MetadataTransaction, content: IngestedContent, startedAt: number): Promise<void> {
  const { written } = content;
  if (written.preexistingPacks.length > 0) {
    await tx.objects.lockPacks(written.preexistingPacks);
    const doomed = await tx.gc.deletionsSince(written.preexistingPacks, startedAt);
    if (doomed.length > 0) {
      throw new StoreError(`pack ${doomed[0]} was being garbage-collected while this write reused it; retry the write`, {
        transient: true,
        data: { packs: doomed },
      });
    }
  }
  await tx.objects.insertPacksAndObjects(written.packs, written.objects);
  if (content.chunks.length === 0) return;
  const missing = await tx.objects.findMissing(content.chunks.map(([id]) => id));
  if (missing.size > 0) {
    throw new StoreError(`${missing.size} chunk(s) of this write were garbage-collected meanwhile; retry the write`, {
      transient: true,
      data: { missing: [...missing].slice(0, 5) },
    });
  }
}
