import type { Selectable } from 'kysely';
import { IntegrityError } from '../../errors.js';
import type { FolderCollectionsTable, FolderFilesTable } from '../schema.js';
import { newId, type RepoContext, startsWith } from './repo-context.js';

/** Ids per `IN (…)` statement (one bound parameter each, far below both dialects' limits). */
const BATCH_IDS = 1000;

/** One collection row. */
export interface FolderCollection {
  readonly id: string;
  readonly tenantId: string;
  readonly scope: FolderCollectionsTable['scope'];
  readonly ownerId: string;
  readonly createdAt: number;
  readonly lastOperationAt: number | null;
}

/** A chunk of a file's content: object id and raw length, in order. */
export type FolderChunk = readonly [id: string, rawLength: number];

/** One file or directory row, live or trashed. */
export interface FolderFileRecord {
  readonly id: string;
  readonly collectionId: string;
  readonly path: string;
  readonly kind: 'file' | 'directory';
  readonly size: number;
  readonly sha256: string | null;
  /** `null` for a directory. */
  readonly chunks: readonly FolderChunk[] | null;
  readonly executable: boolean;
  readonly contentType: string | null;
  readonly updatedAt: number;
  readonly deletedAt: number | null;
  readonly trashUnit: string | null;
}

/** What {@link FoldersRepo.insertFile} takes (a new live row). */
export type NewFolderFile = Omit<FolderFileRecord, 'id' | 'deletedAt' | 'trashUnit'> & { readonly id?: string };

/** The content fields an overwrite changes. */
export type FolderFileContent = Pick<FolderFileRecord, 'size' | 'sha256' | 'chunks' | 'executable' | 'contentType' | 'updatedAt'>;

/** A receipt of an applied operation. */
export interface FolderReceipt {
  readonly fingerprint: string;
  readonly resultId: string | null;
  readonly createdAt: number;
}

/**
 * The work-folder tables (`folder_collections`, `folder_files`, `folder_operations`). Most
 * methods are meant to run inside one transaction that first called {@link lockCollection}:
 * the lock is what serialises mutations of a collection across processes. Paths are taken
 * as given (validated by the caller) and compared bytewise on both engines.
 */
export interface FoldersRepo {
  /** The collection `(tenantId, scope, ownerId)`, created if missing (race-safe: insert-or-nothing, then select). */
  ensureCollection(tenantId: string, scope: FolderCollection['scope'], ownerId: string): Promise<FolderCollection>;
  /** The collection, or undefined when it was never created. */
  findCollection(tenantId: string, scope: FolderCollection['scope'], ownerId: string): Promise<FolderCollection | undefined>;
  /**
   * Locks the collection row until the transaction ends (`FOR UPDATE` on PostgreSQL; on SQLite
   * the `BEGIN IMMEDIATE` write transaction already excludes every other writer). Must run in a
   * transaction; resolves with the row as it is under the lock, or undefined if it is gone.
   */
  lockCollection(collectionId: string): Promise<FolderCollection | undefined>;
  /** Stamps `last_operation_at`. */
  touchCollection(collectionId: string, at: number): Promise<void>;
  /** The receipt of `operationId` in the collection, if that operation was applied. */
  findReceipt(collectionId: string, operationId: string): Promise<FolderReceipt | undefined>;
  /** Records an applied operation; a second receipt for the same id is `ALREADY_EXISTS`. */
  insertReceipt(collectionId: string, operationId: string, fingerprint: string, resultId: string | null, at: number): Promise<void>;
  /** The live rows at exactly these paths. */
  liveAt(collectionId: string, paths: readonly string[]): Promise<FolderFileRecord[]>;
  /** The live rows at `path` and beneath it (`path/…`), by path. */
  liveSubtree(collectionId: string, path: string): Promise<FolderFileRecord[]>;
  /** The row `id` of the collection, live or trashed, or undefined. */
  getFile(collectionId: string, id: string): Promise<FolderFileRecord | undefined>;
  /** The trashed rows of `trashUnit` at `path` or beneath it, by path. */
  trashUnitSubtree(collectionId: string, trashUnit: string, path: string): Promise<FolderFileRecord[]>;
  /** Rows of the collection, live and trashed. */
  countFiles(collectionId: string): Promise<number>;
  /** Inserts a live row; resolves with it. A second live row at a path is `ALREADY_EXISTS`. */
  insertFile(collectionId: string, file: NewFolderFile): Promise<FolderFileRecord>;
  /** Overwrites the content of live row `id`. */
  updateContent(id: string, content: FolderFileContent): Promise<void>;
  /** Moves live rows to the trash as one unit. */
  trashFiles(ids: readonly string[], deletedAt: number, trashUnit: string): Promise<void>;
  /** Makes trashed rows live again (`updated_at` set to `at`). */
  untrashFiles(ids: readonly string[], at: number): Promise<void>;
  /** Deletes rows for good. */
  deleteFiles(ids: readonly string[]): Promise<void>;
  /** One page of live rows (or trashed ones), ordered by `(path, id)`, strictly after `after`. */
  listFiles(
    collectionId: string,
    options: { trash: boolean; after?: { path: string; id: string }; limit: number },
  ): Promise<FolderFileRecord[]>;
  /** Deletes the collection with every row, receipt and sandbox sync state; resolves with the file rows deleted (0 if it did not exist). */
  deleteCollection(collectionId: string): Promise<number>;
  /**
   * Chunk ids of every file row of every collection, live and trashed (GC roots), a page of
   * rows at a time by row id: pass the returned `lastId` back until it is `null`.
   */
  chunkRootsPage(afterId: string | undefined, limitRows: number): Promise<{ chunks: string[]; lastId: string | null }>;
}

/** Builds the work-folders repository over `context.db` (a store or a transaction). */
export function createFoldersRepo({ db, dialect, now }: RepoContext): FoldersRepo {
  const bool = (v: boolean): boolean | number => (dialect === 'sqlite' ? (v ? 1 : 0) : v);
  const files = () => db.selectFrom('folder_files').selectAll();
  const collection = (tenantId: string, scope: FolderCollection['scope'], ownerId: string) =>
    db
      .selectFrom('folder_collections')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('scope', '=', scope)
      .where('owner_id', '=', ownerId)
      .executeTakeFirst();
  const subtree = (path: string) => startsWith(dialect, 'path', `${path}/`);
  return {
    async ensureCollection(tenantId, scope, ownerId) {
      const found = await collection(tenantId, scope, ownerId);
      if (found !== undefined) return toCollection(found);
      await db
        .insertInto('folder_collections')
        .values({ id: newId(), tenant_id: tenantId, scope, owner_id: ownerId, created_at: now(), last_operation_at: null })
        .onConflict((oc) => oc.columns(['tenant_id', 'scope', 'owner_id']).doNothing())
        .execute();
      const row = await collection(tenantId, scope, ownerId);
      if (row === undefined) throw new IntegrityError('INTEGRITY', `collection ${scope}/${ownerId} vanished right after it was created`);
      return toCollection(row);
    },
    async findCollection(tenantId, scope, ownerId) {
      const row = await collection(tenantId, scope, ownerId);
      return row === undefined ? undefined : toCollection(row);
    },
    async lockCollection(collectionId) {
      if (!db.isTransaction) throw new Error('lockCollection must run inside a transaction');
      let query = db.selectFrom('folder_collections').selectAll().where('id', '=', collectionId);
      if (dialect === 'postgres') query = query.forUpdate();
      const row = await query.executeTakeFirst();
      return row === undefined ? undefined : toCollection(row);
    },
    async touchCollection(collectionId, at) {
      await db.updateTable('folder_collections').set({ last_operation_at: at }).where('id', '=', collectionId).execute();
    },
    async findReceipt(collectionId, operationId) {
      const row = await db
        .selectFrom('folder_operations')
        .selectAll()
        .where('collection_id', '=', collectionId)
        .where('operation_id', '=', operationId)
        .executeTakeFirst();
      return row === undefined ? undefined : { fingerprint: row.fingerprint, resultId: row.result_id, createdAt: row.created_at };
    },
    async insertReceipt(collectionId, operationId, fingerprint, resultId, at) {
      await db
        .insertInto('folder_operations')
        .values({ collection_id: collectionId, operation_id: operationId, fingerprint, result_id: resultId, created_at: at })
        .execute();
    },
    async liveAt(collectionId, paths) {
      const out: FolderFileRecord[] = [];
      const unique = [...new Set(paths)];
      for (let i = 0; i < unique.length; i += BATCH_IDS) {
        const rows = await files()
          .where('collection_id', '=', collectionId)
          .where('deleted_at', 'is', null)
          .where('path', 'in', unique.slice(i, i + BATCH_IDS))
          .execute();
        out.push(...rows.map(toFile));
      }
      return out;
    },
    async liveSubtree(collectionId, path) {
      const rows = await files()
        .where('collection_id', '=', collectionId)
        .where('deleted_at', 'is', null)
        .where((eb) => eb.or([eb('path', '=', path), subtree(path)]))
        .orderBy('path')
        .execute();
      return rows.map(toFile);
    },
    async getFile(collectionId, id) {
      const row = await files().where('collection_id', '=', collectionId).where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toFile(row);
    },
    async trashUnitSubtree(collectionId, trashUnit, path) {
      const rows = await files()
        .where('collection_id', '=', collectionId)
        .where('trash_unit', '=', trashUnit)
        .where((eb) => eb.or([eb('path', '=', path), subtree(path)]))
        .orderBy('path')
        .execute();
      return rows.map(toFile);
    },
    async countFiles(collectionId) {
      const row = await db
        .selectFrom('folder_files')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('collection_id', '=', collectionId)
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    },
    async insertFile(collectionId, file) {
      const id = file.id ?? newId();
      await db
        .insertInto('folder_files')
        .values({
          id,
          collection_id: collectionId,
          path: file.path,
          kind: file.kind,
          size: file.size,
          sha256: file.sha256,
          chunks: file.chunks === null ? null : JSON.stringify(file.chunks),
          executable: bool(file.executable),
          content_type: file.contentType,
          updated_at: file.updatedAt,
          deleted_at: null,
          trash_unit: null,
        })
        .execute();
      return { ...file, id, collectionId, deletedAt: null, trashUnit: null };
    },
    async updateContent(id, content) {
      await db
        .updateTable('folder_files')
        .set({
          size: content.size,
          sha256: content.sha256,
          chunks: content.chunks === null ? null : JSON.stringify(content.chunks),
          executable: bool(content.executable),
          content_type: content.contentType,
          updated_at: content.updatedAt,
        })
        .where('id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
    },
    async trashFiles(ids, deletedAt, trashUnit) {
      for (let i = 0; i < ids.length; i += BATCH_IDS) {
        await db
          .updateTable('folder_files')
          .set({ deleted_at: deletedAt, trash_unit: trashUnit })
          .where('id', 'in', ids.slice(i, i + BATCH_IDS))
          .where('deleted_at', 'is', null)
          .execute();
      }
    },
    async untrashFiles(ids, at) {
      for (let i = 0; i < ids.length; i += BATCH_IDS) {
        await db
          .updateTable('folder_files')
          .set({ deleted_at: null, trash_unit: null, updated_at: at })
          .where('id', 'in', ids.slice(i, i + BATCH_IDS))
          .execute();
      }
    },
    async deleteFiles(ids) {
      for (let i = 0; i < ids.length; i += BATCH_IDS) {
        await db
          .deleteFrom('folder_files')
          .where('id', 'in', ids.slice(i, i + BATCH_IDS))
          .execute();
      }
    },
    async listFiles(collectionId, { trash, after, limit }) {
      let query = files()
        .where('collection_id', '=', collectionId)
        .where('deleted_at', trash ? 'is not' : 'is', null);
      if (after !== undefined) {
        query = query.where((eb) => eb.or([eb('path', '>', after.path), eb.and([eb('path', '=', after.path), eb('id', '>', after.id)])]));
      }
      const rows = await query.orderBy('path').orderBy('id').limit(limit).execute();
      return rows.map(toFile);
    },
    async deleteCollection(collectionId) {
      const deleted = await db.deleteFrom('folder_files').where('collection_id', '=', collectionId).executeTakeFirst();
      await db.deleteFrom('folder_operations').where('collection_id', '=', collectionId).execute();
      // Sandboxes' sync states of it go too: a sandbox that still holds the files starts over
      // with an empty baseline (its next save sends what it has, as for a new collection).
      await db.deleteFrom('folder_sync_states').where('collection_id', '=', collectionId).execute();
      await db.deleteFrom('folder_collections').where('id', '=', collectionId).execute();
      return Number(deleted.numDeletedRows);
    },
    async chunkRootsPage(afterId, limitRows) {
      let query = db.selectFrom('folder_files').select(['id', 'chunks']).where('chunks', 'is not', null);
      if (afterId !== undefined) query = query.where('id', '>', afterId);
      const rows = await query.orderBy('id').limit(limitRows).execute();
      const chunks: string[] = [];
      for (const row of rows) for (const [id] of parseChunks(row.id, row.chunks) ?? []) chunks.push(id);
      return { chunks, lastId: rows.length < limitRows ? null : (rows.at(-1)?.id ?? null) };
    },
  };
}

function toCollection(row: Selectable<FolderCollectionsTable>): FolderCollection {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    scope: row.scope,
    ownerId: row.owner_id,
    createdAt: row.created_at,
    lastOperationAt: row.last_operation_at,
  };
}

function toFile(row: Selectable<FolderFilesTable>): FolderFileRecord {
  return {
    id: row.id,
    collectionId: row.collection_id,
    path: row.path,
    kind: row.kind,
    size: row.size,
    sha256: row.sha256,
    chunks: parseChunks(row.id, row.chunks),
    executable: row.executable === true || row.executable === 1,
    contentType: row.content_type,
    updatedAt: row.updated_at,
    deletedAt: row.deleted_at,
    trashUnit: row.trash_unit,
  };
}

const ID64_RE = /^[0-9a-f]{64}$/;

/** The stored chunk list, checked for shape: a malformed one is `INTEGRITY`, never guessed around. */
function parseChunks(rowId: string, text: string | null): FolderChunk[] | null {
  if (text === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const ok =
    Array.isArray(value) &&
    value.every(
      (c) => Array.isArray(c) && c.length === 2 && typeof c[0] === 'string' && ID64_RE.test(c[0]) && Number.isSafeInteger(c[1]) && c[1] > 0,
    );
  if (!ok) throw new IntegrityError('INTEGRITY', `folder file ${rowId} has a malformed chunk list`, { data: { fileId: rowId } });
  return value as FolderChunk[];
}
