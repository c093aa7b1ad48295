import type { Selectable } from 'kysely';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { CheckpointReason, CheckpointStatus, CheckpointsTable } from '../schema.js';
import {
  afterNewest,
  fromJsonText,
  isForeignKeyViolation,
  type JsonObject,
  newId,
  type RecordedError,
  type RepoContext,
  recordedErrorFromText,
  requireCount,
  requireText,
  startsWith,
  toJsonText,
} from './repo-context.js';

export type { JsonObject, RecordedError } from './repo-context.js';

/** One capture of a workspace. */
export interface Checkpoint {
  readonly id: string;
  readonly workspaceId: string;
  /** The checkpoint this one was taken on top of, if any (not a foreign key: retention may drop it). */
  readonly parentId: string | null;
  /** Root tree object id; set exactly when the checkpoint is ready. */
  readonly rootTree: string | null;
  readonly status: CheckpointStatus;
  readonly reason: CheckpointReason;
  readonly stats: JsonObject | null;
  /** Why it failed (typically `HoldfastError#toJSON()`); set exactly when failed. */
  readonly error: RecordedError | null;
  readonly createdAt: number;
  /** When it left `pending`; `null` while pending. */
  readonly finishedAt: number | null;
  /** The caller's label, if one was given (`snapshot/checkpoint-note.ts` holds the rules). */
  readonly label: string | null;
  /** The caller's flat metadata object, if any was given. */
  readonly meta: Readonly<Record<string, string | number | boolean | null>> | null;
  /** For a fork's first checkpoint: the checkpoint whose tree it shares (same tenant); else `null`. */
  readonly forkedFrom: string | null;
  /**
   * What a ready checkpoint lost to packs missing from the blob store, as last assessed;
   * `null` while it is whole. It stays listed and `ready` (its other files still restore), but
   * a restore of it fails `RESTORE_INCOMPLETE` naming a missing pack until a later checkpoint
   * writes the lost objects again.
   */
  readonly damage: CheckpointDamage | null;
}

/** What one checkpoint lost, as a damage assessment found it. */
export interface CheckpointDamage {
  /** Missing packs holding objects it references, ascending. */
  readonly packs: readonly string[];
  /** The first damaged paths (`''` is the root), at most a few hundred, sorted. */
  readonly paths: readonly string[];
  /** Damaged paths in all (files and directories whose object is lost), at least `paths.length`. */
  readonly pathCount: number;
  /** When the assessment ran (epoch ms). */
  readonly assessedAt: number;
}

/** Input of {@link CheckpointsRepo.createPending}. */
export interface CreateCheckpointInput {
  /** Defaults to a new UUID. */
  readonly id?: string;
  readonly workspaceId: string;
  readonly parentId?: string | null;
  readonly reason: CheckpointReason;
  /** Checked by the caller (`checkedCheckpointNote`); the column's CHECK bounds its length again. */
  readonly label?: string | null;
  readonly meta?: JsonObject | null;
  readonly forkedFrom?: string | null;
}

/** Input of {@link CheckpointsRepo.markReady}. */
export interface ReadyCheckpointInput {
  readonly rootTree: string;
  readonly stats?: JsonObject | null;
}

/** Options of {@link CheckpointsRepo.listByWorkspace}. */
export interface ListCheckpointsOptions {
  /** At most this many, newest first. */
  readonly limit?: number;
  /** Only checkpoints in this status. */
  readonly status?: CheckpointStatus;
  /** Only checkpoints after this `[createdAt, id]` in the listing's order (a keyset page). */
  readonly after?: readonly [createdAt: number, id: string];
}

/** The `checkpoints` table. Status moves `pending` -> `ready` | `failed`, once, never back. */
export interface CheckpointsRepo {
  /**
   * Inserts a `pending` checkpoint. A taken id rejects with `ALREADY_EXISTS`, an unknown
   * workspace with `NOT_FOUND`, an unknown reason with `INVALID_INPUT`.
   */
  createPending(input: CreateCheckpointInput): Promise<Checkpoint>;
  /**
   * `pending` -> `ready` with its root tree and stats, stamping `finishedAt`. Unknown id:
   * `NOT_FOUND`; any other current status: `CONFLICT` with data `{checkpointId, status}`.
   */
  markReady(id: string, input: ReadyCheckpointInput): Promise<Checkpoint>;
  /** `pending` -> `failed`, keeping `error`. Same failure codes as {@link CheckpointsRepo.markReady}. */
  markFailed(id: string, error: RecordedError): Promise<Checkpoint>;
  /** The checkpoint with `id`; rejects with `NOT_FOUND` when there is none. */
  get(id: string): Promise<Checkpoint>;
  /** The checkpoint with `id`, or `undefined`. */
  find(id: string): Promise<Checkpoint | undefined>;
  /** The workspace's checkpoints, newest first (ties broken by id, descending). */
  listByWorkspace(workspaceId: string, options?: ListCheckpointsOptions): Promise<Checkpoint[]>;
  /**
   * Up to `limit` checkpoints of tenant `tenantId` (any status) whose id starts with `prefix`,
   * compared exactly; another tenant's checkpoints are never among them. Ordered by id.
   */
  findByPrefix(tenantId: string, prefix: string, limit: number): Promise<Checkpoint[]>;
  /** The tenant's newest ready checkpoint (by creation, ties by id), in any workspace, or `undefined`. */
  latestReady(tenantId: string): Promise<Checkpoint | undefined>;
  /** Every checkpoint of every workspace (optionally only one status), ordered by workspace, then newest first. */
  listAll(options?: Pick<ListCheckpointsOptions, 'status'>): Promise<Checkpoint[]>;
  /**
   * Deletes checkpoint rows (retention forgetting them). A checkpoint that is currently the
   * head of its workspace is never deleted, checked in the same statement, so a head that
   * moved onto a listed id meanwhile is kept. Unknown ids are ignored. Resolves with how many
   * rows were deleted.
   */
  deleteMany(ids: readonly string[]): Promise<number>;
  /**
   * Records (or, with `null`, clears) what ready checkpoint `id` lost to missing packs; status
   * and everything else stay as they are. Unknown ids are ignored.
   */
  setDamage(id: string, damage: CheckpointDamage | null): Promise<void>;
  /** Every checkpoint with a damage mark, ordered by id (an indexed lookup; usually none). */
  listDamaged(): Promise<Checkpoint[]>;
  /**
   * The writer of pending checkpoint `id` is alive: stamps its heartbeat now. Resolves false
   * when the checkpoint is no longer pending (finished, or failed by GC as abandoned).
   */
  heartbeat(id: string): Promise<boolean>;
  /**
   * Pending checkpoints whose writer's last heartbeat is older than `before` (epoch ms): their
   * writer is gone. Rows without a heartbeat (made before migration 15) are not listed: their
   * age alone decides (`MAX_CHECKPOINT_MS`).
   */
  listAbandoned(before: number): Promise<Checkpoint[]>;
}

/** Builds the checkpoints repository over `context.db` (a store or a transaction). */
export function createCheckpointsRepo({ db, dialect, now }: RepoContext): CheckpointsRepo {
  const find = async (id: string): Promise<Checkpoint | undefined> => {
    const row = await db.selectFrom('checkpoints').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toCheckpoint(row);
  };

  const finish = async (id: string, values: Partial<Selectable<CheckpointsTable>>): Promise<Checkpoint> => {
    const row = await db
      .updateTable('checkpoints')
      .set({ ...values, finished_at: now() })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst();
    if (row !== undefined) return toCheckpoint(row);
    const current = await find(id);
    if (current === undefined) throw new NotFoundError(`checkpoint ${id} not found`, { data: { checkpointId: id } });
    throw new ConflictError('CONFLICT', `checkpoint ${id} is already ${current.status}; only a pending checkpoint can finish`, {
      data: { checkpointId: id, status: current.status },
    });
  };

  return {
    async createPending(input) {
      const row = {
        id: input.id === undefined ? newId() : requireText(input.id, 'id'),
        workspace_id: requireText(input.workspaceId, 'workspaceId'),
        parent_id: input.parentId ?? null,
        root_tree: null,
        status: 'pending' as const,
        reason: input.reason,
        stats: null,
        error: null,
        created_at: now(),
        finished_at: null,
        label: input.label ?? null,
        meta: input.meta === undefined || input.meta === null ? null : toJsonText(input.meta, 'meta'),
        forked_from: input.forkedFrom ?? null,
        damage: null,
        writer_heartbeat_at: now(),
      };
      try {
        await db.insertInto('checkpoints').values(row).execute();
      } catch (error) {
        if (!isForeignKeyViolation(error)) throw error;
        throw new NotFoundError(`workspace ${row.workspace_id} not found`, { data: { workspaceId: row.workspace_id }, cause: error });
      }
      return toCheckpoint(row);
    },
    markReady(id, input) {
      const stats = input.stats === undefined || input.stats === null ? null : toJsonText(input.stats, 'stats');
      return finish(id, { status: 'ready', root_tree: requireText(input.rootTree, 'rootTree'), stats });
    },
    markFailed(id, error) {
      return finish(id, { status: 'failed', error: toJsonText(error, 'error') });
    },
    async get(id) {
      const checkpoint = await find(id);
      if (checkpoint === undefined) throw new NotFoundError(`checkpoint ${id} not found`, { data: { checkpointId: id } });
      return checkpoint;
    },
    find,
    async heartbeat(id) {
      const rows = await db
        .updateTable('checkpoints')
        .set({ writer_heartbeat_at: now() })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      return Number(rows.numUpdatedRows) > 0;
    },
    async listAbandoned(before) {
      const rows = await db
        .selectFrom('checkpoints')
        .selectAll()
        .where('status', '=', 'pending')
        .where('writer_heartbeat_at', 'is not', null)
        .where('writer_heartbeat_at', '<', before)
        .orderBy('created_at')
        .execute();
      return rows.map(toCheckpoint);
    },
    async listByWorkspace(workspaceId, options = {}) {
      let query = db.selectFrom('checkpoints').selectAll().where('workspace_id', '=', workspaceId);
      if (options.status !== undefined) query = query.where('status', '=', options.status);
      if (options.after !== undefined) query = query.where(afterNewest(options.after, 'desc'));
      if (options.limit !== undefined) query = query.limit(requireCount(options.limit, 'limit'));
      const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
      return rows.map(toCheckpoint);
    },
    async findByPrefix(tenantId, prefix, limit) {
      const rows = await db
        .selectFrom('checkpoints')
        .innerJoin('workspaces', 'workspaces.id', 'checkpoints.workspace_id')
        .selectAll('checkpoints')
        .where('workspaces.tenant_id', '=', requireText(tenantId, 'tenantId'))
        .where(startsWith(dialect, 'checkpoints.id', requireText(prefix, 'prefix')))
        .orderBy('checkpoints.id')
        .limit(requireCount(limit, 'limit'))
        .execute();
      return rows.map(toCheckpoint);
    },
    async latestReady(tenantId) {
      const row = await db
        .selectFrom('checkpoints')
        .innerJoin('workspaces', 'workspaces.id', 'checkpoints.workspace_id')
        .selectAll('checkpoints')
        .where('workspaces.tenant_id', '=', requireText(tenantId, 'tenantId'))
        .where('checkpoints.status', '=', 'ready')
        .orderBy('checkpoints.created_at', 'desc')
        .orderBy('checkpoints.id', 'desc')
        .limit(1)
        .executeTakeFirst();
      return row === undefined ? undefined : toCheckpoint(row);
    },
    async listAll(options = {}) {
      let query = db.selectFrom('checkpoints').selectAll();
      if (options.status !== undefined) query = query.where('status', '=', options.status);
      const rows = await query.orderBy('workspace_id').orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
      return rows.map(toCheckpoint);
    },
    async deleteMany(ids) {
      let deleted = 0;
      const unique = [...new Set(ids)];
      for (let start = 0; start < unique.length; start += DELETE_BATCH_IDS) {
        const result = await db
          .deleteFrom('checkpoints')
          .where('id', 'in', unique.slice(start, start + DELETE_BATCH_IDS))
          .where(({ not, exists, selectFrom }) =>
            not(exists(selectFrom('workspaces').select('workspaces.id').whereRef('workspaces.head_checkpoint_id', '=', 'checkpoints.id'))),
          )
          .executeTakeFirst();
        deleted += Number(result.numDeletedRows);
      }
      return deleted;
    },
    async setDamage(id, damage) {
      const text = damage === null ? null : toJsonText(damage as unknown as JsonObject, 'damage');
      await db.updateTable('checkpoints').set({ damage: text }).where('id', '=', id).execute();
    },
    async listDamaged() {
      const rows = await db.selectFrom('checkpoints').selectAll().where('damage', 'is not', null).orderBy('id').execute();
      return rows.map(toCheckpoint);
    },
  };
}

/** Ids per DELETE in {@link CheckpointsRepo.deleteMany} (one bound parameter each). */
const DELETE_BATCH_IDS = 1000;

function toCheckpoint(row: Selectable<CheckpointsTable>): Checkpoint {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    parentId: row.parent_id,
    rootTree: row.root_tree,
    status: row.status,
    reason: row.reason,
    stats: fromJsonText(row.stats),
    error: recordedErrorFromText(row.error),
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    label: row.label ?? null,
    // Written only through `createPending` from a checked note: a flat object.
    meta: fromJsonText(row.meta ?? null) as Checkpoint['meta'],
    forkedFrom: row.forked_from ?? null,
    damage: fromJsonText(row.damage) as CheckpointDamage | null,
  };
}
