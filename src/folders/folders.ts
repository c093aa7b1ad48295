/**
 * `folders/`: work folders: scoped files, operations, trash and content; `sync/` keeps them in
 * sync with run sandboxes (`sandbox-sync.ts` is the run extension).
 */
/**
 * Work folders: collections of files and directories shared beyond one run's workspace
 * (DESIGN section 10). A collection is `(tenant, scope, ownerId)`, created on first use.
 * Rows live in the metadata store; content goes into the same content-addressed object
 * store as checkpoints (chunked like workspace files, deduplicated with them, verified on
 * every read). `Folders` does no authorization: its caller (the HTTP routes, the CLI, the
 * sandbox sync) decides who may do what, and passes the tenant explicitly.
 */

import type { BlobStore } from '../blob-store/blob-store.js';
import { InputError, NotFoundError } from '../errors.js';
import type { FolderFileRecord, MetadataStore } from '../metadata/metadata-store.js';
import { FOLDER_SCOPES, type FolderScope } from '../model/folder-scopes.js';
import type { ContentWorkers } from '../objects/content-workers.js';
import { readContent } from './content-read.js';
import { FolderOperations } from './folder-operations.js';
import { validateFolderPath, validateName } from './folder-paths.js';
import {
  applyStoredOperations,
  type StoredContent,
  type StoredOperation,
  type StoredOutcome,
  type StoredWriteOptions,
} from './stored-operations.js';

export {
  MAX_STORED_BATCH_OPERATIONS,
  type StoredContent,
  type StoredOperation,
  type StoredOutcome,
  type StoredWriteOptions,
} from './stored-operations.js';

/**
 * Names one work folder: a tenant's folder tree of one scope and owner (stored as a
 * "collection" row in `metadata/tables/folders-repo.ts`). `tenantId` is the tenant's id
 * (`Tenant.id`), not its name.
 */
export interface FolderRef {
  readonly tenantId: string;
  readonly scope: FolderScope;
  /** The owner (task, agent, user or project id): 1..256 characters, no control characters. */
  readonly ownerId: string;
}

/** One file or directory row of a collection, live or in the trash. */
export interface FolderEntry {
  /** The row's id: stable while the row lives (an overwrite keeps it), the handle restore and purge take. */
  readonly id: string;
  /** Relative, `/`-separated, validated (see {@link FolderLimits}). */
  readonly path: string;
  readonly kind: 'file' | 'directory';
  /** Bytes; 0 for a directory. */
  readonly size: number;
  /** SHA-256 of the content, lowercase hex; `null` for a directory. */
  readonly sha256: string | null;
  readonly executable: boolean;
  /** The content type the writer declared, `null` when none (and for directories). */
  readonly contentType: string | null;
  /** Epoch ms of the last accepted change of this row. */
  readonly updatedAt: number;
  /** Epoch ms it was moved to the trash, `null` while live. Rows trashed together share it (and a trash unit). */
  readonly deletedAt: number | null;
}

/** A live row with the ids of its content's chunks (`null` for a directory), as a sync needs it. */
export interface StoredEntry extends FolderEntry {
  readonly chunks: readonly string[] | null;
}

/** Configurable limits; every field has the default (see {@link DEFAULT_FOLDER_LIMITS}). */
export interface FolderLimits {
  /** Bytes of a path's UTF-8 form. Default 1,024. */
  readonly maxPathBytes: number;
  /** Bytes of one file's content. Default 1 GiB. */
  readonly maxFileBytes: number;
  /** Rows (live and trashed, files and directories) of one collection. Default 100,000. */
  readonly maxEntries: number;
  /** Listing page size when none is asked for. Default 200. */
  readonly defaultPageSize: number;
  /** Largest listing page. Default 1,000. */
  readonly maxPageSize: number;
  /** Bytes a preview (`open` with `maxBytes`) may be asked for at most. Default 8 MiB. */
  readonly maxPreviewBytes: number;
}

/** The defaults. */
export const DEFAULT_FOLDER_LIMITS: FolderLimits = Object.freeze({
  maxPathBytes: 1024,
  maxFileBytes: 1024 * 1024 * 1024,
  maxEntries: 100_000,
  defaultPageSize: 200,
  maxPageSize: 1000,
  maxPreviewBytes: 8 * 1024 * 1024,
});

/** Options of {@link Folders.list}. */
export interface ListOptions {
  /** List the trash instead of live rows. Default false. */
  readonly trash?: boolean;
  /** The `nextCursor` of the previous page; opaque. A malformed cursor is `INVALID_INPUT`. */
  readonly cursor?: string;
  /** Rows per page, 1..`maxPageSize`; default `defaultPageSize`. Out of range is `INVALID_INPUT`. */
  readonly limit?: number;
}

/** One page of a listing. */
export interface ListPage {
  /** Ordered by path, then id (trash may hold several rows of one path). */
  readonly files: FolderEntry[];
  /** Pass as `cursor` for the next page; `null` on the last page. */
  readonly nextCursor: string | null;
  /** Epoch ms of the collection's latest applied operation, `null` when none ever was. */
  readonly lastOperationAt: number | null;
}

/** Options of {@link Folders.open}. */
export interface OpenOptions {
  /** Bytes `[offset, offset+length)` of the content; clipped to the file's end. Out of range: `INVALID_INPUT`. */
  readonly range?: { readonly offset: number; readonly length: number };
  /**
   * A preview: the file must be at most this many bytes (itself at most `maxPreviewBytes`),
   * else `LIMIT_EXCEEDED` before any byte is read.
   */
  readonly maxBytes?: number;
}

/** What {@link Folders.open} returns. */
export interface OpenedFile {
  readonly entry: FolderEntry;
  /**
   * The content (or the range), streamed chunk by chunk; every chunk is verified against
   * its id before it is yielded, so a corrupt store rejects the iteration with `INTEGRITY`.
   */
  readonly body: AsyncIterable<Uint8Array>;
  /** The range actually served (clipped), when one was asked for. */
  readonly range?: { readonly offset: number; readonly length: number };
}

/** Options every mutation takes. */
export interface OperationOptions {
  /**
   * The caller's id for this operation (an HTTP `Idempotency-Key`): 1..256 characters. The
   * same id with the same fingerprint is answered `applied: false` and changes nothing; with
   * another fingerprint it is `CONFLICT`. Receipts are kept for the collection's life.
   */
  readonly operationId: string;
}

/** Options of {@link Folders.write}. */
export interface WriteOptions extends OperationOptions {
  /** At most 256 characters, no control characters. */
  readonly contentType?: string;
  readonly executable?: boolean;
  /** The SHA-256 the content must have (lowercase hex); a mismatch is `CONFLICT`, nothing published. */
  readonly expectedSha256?: string;
  /** Turn a directory at `path` into a file: the directory and its subtree go to the trash (one unit). */
  readonly replaceKind?: boolean;
  /** Keep a live row already at `path` as it is (answered `applied: true` with that row). */
  readonly onlyIfMissing?: boolean;
}

/** Options of {@link Folders.mkdir}. */
export interface MkdirOptions extends OperationOptions {
  /** Turn a file at `path` into a directory: the file goes to the trash. */
  readonly replaceKind?: boolean;
}

/**
 * The answer to a mutation: `applied` false when the operation id had been applied before
 * (then counts are 0, and `entry` is the row that operation produced as it is now, or `null`
 * if it has been purged since).
 */
export interface Applied {
  readonly applied: boolean;
}

/** Settings of a {@link Folders} instance. */
export interface FoldersOptions {
  readonly limits?: Partial<FolderLimits>;
  /** Clock of `updatedAt`, `deletedAt` and receipts, epoch ms; default `Date.now`. */
  readonly now?: () => number;
}

/** The stores a {@link Folders} works on (the content workers are shared with checkpoints). */
export interface FoldersDeps {
  readonly meta: MetadataStore;
  readonly blobs: BlobStore;
  readonly workers: ContentWorkers;
}

/**
 * The work-folder service over one metadata store and one blob store.
 *
 * Every mutation runs in one metadata transaction that first locks the collection row
 * (`FOR UPDATE` on PostgreSQL; SQLite serialises writers), then checks the operation
 * receipt, then applies and records the receipt: mutations of one collection are
 * serialised across processes, and a retried old operation can never overwrite a newer one.
 *
 * Errors (all `HoldfastError`s): `INVALID_PATH` for a bad path (nothing written),
 * `INVALID_INPUT` for other bad arguments, `NOT_FOUND` for a missing path or row,
 * `CONFLICT` for an operation-id reuse, a kind clash, a parent that is a file, a restore
 * onto a live path or a SHA-256 mismatch, `LIMIT_EXCEEDED` for a file or collection over
 * its limit, `INTEGRITY` for stored bytes that do not match, `STORE_UNAVAILABLE` when a
 * store is down.
 */
export class Folders {
  /** The limits in force (defaults overridden by `options.limits`). */
  readonly limits: FolderLimits;
  private readonly ops: FolderOperations;

  constructor(
    private readonly deps: FoldersDeps,
    options: FoldersOptions = {},
  ) {
    this.limits = Object.freeze({ ...DEFAULT_FOLDER_LIMITS, ...options.limits });
    this.ops = new FolderOperations(deps, this.limits, options.now ?? Date.now);
  }

  /**
   * Live rows (or the trash) of a collection, a page at a time, by a stable keyset cursor.
   * A collection never written lists empty (and is not created by listing).
   */
  async list(ref: FolderRef, options: ListOptions = {}): Promise<ListPage> {
    checkRef(ref);
    const limit = options.limit ?? this.limits.defaultPageSize;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > this.limits.maxPageSize) {
      throw new InputError('INVALID_INPUT', `limit must be an integer from 1 to ${this.limits.maxPageSize}`, { data: { field: 'limit' } });
    }
    const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    if (collection === undefined) return { files: [], nextCursor: null, lastOperationAt: null };
    const rows = await this.deps.meta.folders.listFiles(collection.id, {
      trash: options.trash === true,
      ...(after === undefined ? {} : { after }),
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      files: page.map(toEntry),
      nextCursor: rows.length > limit && last !== undefined ? encodeCursor(last.path, last.id) : null,
      lastOperationAt: collection.lastOperationAt,
    };
  }

  /**
   * Every live row of a collection with its chunk ids, ordered by path, read a page of
   * `maxPageSize` rows at a time (so a collection changing meanwhile may show a row as it was
   * when its page was read). A collection never written is empty.
   */
  async listContent(ref: FolderRef): Promise<StoredEntry[]> {
    checkRef(ref);
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    if (collection === undefined) return [];
    const out: StoredEntry[] = [];
    let after: { path: string; id: string } | undefined;
    for (;;) {
      const rows = await this.deps.meta.folders.listFiles(collection.id, {
        trash: false,
        ...(after === undefined ? {} : { after }),
        limit: this.limits.maxPageSize,
      });
      for (const row of rows) out.push({ ...toEntry(row), chunks: row.chunks === null ? null : row.chunks.map(([id]) => id) });
      const last = rows.at(-1);
      if (last === undefined || rows.length < this.limits.maxPageSize) return out;
      after = { path: last.path, id: last.id };
    }
  }

  /**
   * Opens the live file at `path` for a streamed, verified read. `NOT_FOUND` when no live
   * row is there; `INVALID_INPUT` for a directory or a bad range; `INVALID_PATH` for a bad
   * path; `LIMIT_EXCEEDED` for a preview (`maxBytes`) of a larger file.
   */
  async open(ref: FolderRef, path: string, options: OpenOptions = {}): Promise<OpenedFile> {
    checkRef(ref);
    validateFolderPath(path, this.limits.maxPathBytes);
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    const [file] = collection === undefined ? [] : await this.deps.meta.folders.liveAt(collection.id, [path]);
    if (file === undefined) throw new NotFoundError(`no file at ${path} in ${ref.scope} folder ${ref.ownerId}`, { data: { path } });
    if (file.kind !== 'file') throw new InputError('INVALID_INPUT', `${path} is a directory, not a file`, { data: { path } });
    if (options.maxBytes !== undefined) {
      const cap = Math.min(options.maxBytes, this.limits.maxPreviewBytes);
      if (file.size > cap) {
        throw new InputError('LIMIT_EXCEEDED', `${path} is ${file.size} bytes, more than a preview's ${cap}: download it instead`, {
          data: { path, size: file.size, limit: cap },
        });
      }
    }
    const range = options.range === undefined ? undefined : clipRange(options.range, file.size);
    const body = readContent(this.deps, file, range?.offset ?? 0, range?.length ?? file.size);
    return { entry: toEntry(file), body, ...(range === undefined ? {} : { range }) };
  }

  /**
   * Writes `body` to `path`, streaming: hashed and chunked as it arrives, never buffered
   * whole, stored as content-addressed chunks (dedup with checkpoints). Nothing is published
   * unless the whole body arrived, within `maxFileBytes` (`LIMIT_EXCEEDED`), and matching
   * `expectedSha256` (`CONFLICT`); what was uploaded for a refused write is garbage for GC.
   * Missing parent directories are created; a parent that is a file is `CONFLICT`; a
   * directory at `path` is `CONFLICT` unless `replaceKind`. Overwriting keeps the row's id;
   * the old content is not versioned. Idempotent by `operationId` (fingerprint: path, sha256,
   * executable, contentType, replaceKind, onlyIfMissing). Arguments are checked before the
   * first byte of `body` is read.
   */
  write(
    ref: FolderRef,
    path: string,
    body: AsyncIterable<Uint8Array>,
    options: WriteOptions,
  ): Promise<{ entry: FolderEntry | null } & Applied> {
    return this.ops.write(ref, path, body, options);
  }

  /**
   * {@link write} of content already in the object store (named by `content`: its SHA-256,
   * size and chunk ids, as a checkpoint tree records a file): no byte moves. Every chunk must
   * be a present data object of the index and their lengths must add up to `size` (a chunk
   * GC removed meanwhile is a transient `STORE_UNAVAILABLE`). The caller vouches that it holds
   * these bytes (Holdfast's own sync, from a checkpoint it made): knowing ids must never be
   * enough to publish content, so no route exposes this to a client. Same checks, receipts
   * and fingerprint as `write` (a stored and a streamed write of the same bytes under one
   * operation id are one operation).
   */
  async writeStored(
    ref: FolderRef,
    path: string,
    content: StoredContent,
    options: StoredWriteOptions,
  ): Promise<{ entry: FolderEntry | null } & Applied> {
    const [outcome] = await this.applyStored(ref, [{ op: 'write', path, content, options }]);
    if (outcome === undefined || !outcome.ok) throw outcome?.error;
    const collection = await this.deps.meta.folders.findCollection(ref.tenantId, ref.scope, ref.ownerId);
    const row =
      collection === undefined || outcome.resultId === null
        ? undefined
        : await this.deps.meta.folders.getFile(collection.id, outcome.resultId);
    return { entry: row === undefined ? null : toEntry(row), applied: outcome.applied };
  }

  /**
   * Applies up to {@link MAX_STORED_BATCH_OPERATIONS} stored writes, mode changes, mkdirs and removes to one
   * collection in one transaction (one lock), each with its own receipt, in order. An
   * operation refused on its own merits (`CONFLICT`, `NOT_FOUND`, `LIMIT_EXCEEDED`, …) is
   * answered in its outcome, changed nothing and got no receipt; the others still apply. A
   * store failure rolls the whole batch back and rejects. Bad arguments are refused before
   * anything runs.
   */
  applyStored(ref: FolderRef, operations: readonly StoredOperation[]): Promise<StoredOutcome[]> {
    checkRef(ref);
    return applyStoredOperations(this.ops, this.limits, ref, operations);
  }

  /**
   * Creates directory `path` and its missing parents. An existing live directory is kept
   * (still `applied: true`); a file there is `CONFLICT` unless `replaceKind`; a parent that is
   * a file is `CONFLICT`. Idempotent by `operationId` (fingerprint: path, replaceKind).
   */
  mkdir(ref: FolderRef, path: string, options: MkdirOptions): Promise<{ entry: FolderEntry | null } & Applied> {
    return this.ops.mkdir(ref, path, options);
  }

  /**
   * Moves `path` and its live subtree to the trash as one unit (one `deletedAt`, one trash
   * unit). `NOT_FOUND` when nothing live is at `path`. Resolves with how many rows went.
   * Idempotent by `operationId` (fingerprint: path).
   */
  remove(ref: FolderRef, path: string, options: OperationOptions): Promise<{ removed: number } & Applied> {
    return this.ops.remove(ref, path, options);
  }

  /**
   * Brings back the trash unit of row `fileId` under it (the row and, for a directory, the
   * rows trashed with it beneath it), recreating missing parents. `CONFLICT` and nothing
   * changed if any of those paths is live again or a parent is a file; `NOT_FOUND` when the
   * row is not in this collection's trash. Idempotent by `operationId` (fingerprint: fileId).
   */
  restore(ref: FolderRef, fileId: string, options: OperationOptions): Promise<{ restored: number } & Applied> {
    return this.ops.restore(ref, fileId, options);
  }

  /**
   * Removes the trashed row `fileId` (and, for a directory, its trash unit beneath it) for
   * good; its objects become garbage for GC (after the grace). `NOT_FOUND` when the row is
   * not in this collection's trash. Idempotent by `operationId` (fingerprint: fileId).
   */
  purge(ref: FolderRef, fileId: string, options: OperationOptions): Promise<{ purged: number } & Applied> {
    return this.ops.purge(ref, fileId, options);
  }

  /**
   * Removes the whole collection (live rows, trash, receipts) for good; its objects become
   * garbage for GC. Idempotent: a missing collection resolves `{purged: 0}`.
   */
  purgeCollection(ref: FolderRef): Promise<{ purged: number }> {
    return this.ops.purgeCollection(ref);
  }
}

/** Checks the scope, owner and tenant of a collection reference (`INVALID_INPUT`). */
export function checkRef(ref: FolderRef): void {
  if (!(FOLDER_SCOPES as readonly string[]).includes(ref.scope)) {
    throw new InputError('INVALID_INPUT', `scope must be one of ${FOLDER_SCOPES.join(', ')}`, { data: { field: 'scope' } });
  }
  validateName(ref.ownerId, 'ownerId');
  validateName(ref.tenantId, 'tenantId');
}

/** The public form of a row. */
export function toEntry(row: FolderFileRecord): FolderEntry {
  return {
    id: row.id,
    path: row.path,
    kind: row.kind,
    size: row.size,
    sha256: row.sha256,
    executable: row.executable,
    contentType: row.contentType,
    updatedAt: row.updatedAt,
    deletedAt: row.deletedAt,
  };
}

function encodeCursor(path: string, id: string): string {
  return Buffer.from(JSON.stringify([path, id]), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { path: string; id: string } {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== 'string' || typeof value[1] !== 'string') {
    throw new InputError('INVALID_INPUT', 'cursor is not one this listing handed out', { data: { field: 'cursor' } });
  }
  return { path: value[0], id: value[1] };
}

function clipRange(range: { offset: number; length: number }, size: number): { offset: number; length: number } {
  const { offset, length } = range;
  if (
    !Number.isSafeInteger(offset) ||
    !Number.isSafeInteger(length) ||
    offset < 0 ||
    length < 0 ||
    (offset >= size && size > 0) ||
    offset > size
  ) {
    throw new InputError('INVALID_INPUT', `range ${offset}+${length} is outside a ${size}-byte file`, {
      data: { field: 'range', size },
    });
  }
  return { offset, length: Math.min(length, size - offset) };
}

/** @deprecated Use {@link FolderRef}; the old name is kept for one release. */
export type CollectionRef = FolderRef;
