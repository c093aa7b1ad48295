import type { Selectable } from 'kysely';
import { ConflictError, InputError, NotFoundError } from '../../errors.js';
import type { WorkspacesTable } from '../schema.js';
import { isForeignKeyViolation, newId, type RepoContext, requireCount, requireText } from './repo-context.js';

/** A durable workspace and its head: the checkpoint a restore starts from. */
export interface Workspace {
  readonly id: string;
  readonly tenantId: string;
  /** Unique within the tenant. */
  readonly name: string;
  /** The newest ready checkpoint published as head, or `null` before the first one. */
  readonly headCheckpointId: string | null;
  /** Starts at 0; every successful {@link WorkspacesRepo.casHead} adds 1. */
  readonly headVersion: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input of {@link WorkspacesRepo.create}. */
export interface CreateWorkspaceInput {
  /** Defaults to a new UUID. */
  readonly id?: string;
  readonly tenantId: string;
  readonly name: string;
}

/** The `workspaces` table. */
export interface WorkspacesRepo {
  /**
   * Inserts a workspace with no head (version 0). A name already used in the same tenant,
   * or a taken id, rejects with `ALREADY_EXISTS`; an unknown tenant with `NOT_FOUND`.
   */
  create(input: CreateWorkspaceInput): Promise<Workspace>;
  /** The workspace with `id`; rejects with `NOT_FOUND` when there is none. */
  get(id: string): Promise<Workspace>;
  /** The workspace with `id`, or `undefined`. */
  find(id: string): Promise<Workspace | undefined>;
  /** The workspace named `name` in `tenantId`; rejects with `NOT_FOUND` when there is none. */
  getByName(tenantId: string, name: string): Promise<Workspace>;
  /** The workspace named `name` in `tenantId`, or `undefined`. */
  findByName(tenantId: string, name: string): Promise<Workspace | undefined>;
  /** The tenant's workspaces ordered by name (empty for an unknown tenant). */
  listByTenant(tenantId: string): Promise<Workspace[]>;
  /** Every workspace of every tenant, ordered by id (GC and verify work store-wide). */
  listAll(): Promise<Workspace[]>;
  /**
   * Compare-and-swap of the head: one `UPDATE … WHERE head_version = expectedVersion` that
   * sets the head and increments the version, resolving with the updated workspace.
   *
   * - Another writer moved the head first: `CONFLICT` with data
   *   `{workspaceId, expectedVersion, actualVersion}`; nothing changes.
   * - Unknown workspace, or unknown checkpoint: `NOT_FOUND`.
   * - A checkpoint of another workspace, or one that is not `ready`: `INVALID_INPUT` (the head
   *   only ever names a ready checkpoint of its own workspace). `null` clears the head.
   */
  casHead(workspaceId: string, expectedVersion: number, newHeadCheckpointId: string | null): Promise<Workspace>;
}

/** Builds the workspaces repository over `context.db` (a store or a transaction). */
export function createWorkspacesRepo({ db, now }: RepoContext): WorkspacesRepo {
  const find = async (id: string): Promise<Workspace | undefined> => {
    const row = await db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toWorkspace(row);
  };
  const findByName = async (tenantId: string, name: string): Promise<Workspace | undefined> => {
    const row = await db.selectFrom('workspaces').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
    return row === undefined ? undefined : toWorkspace(row);
  };

  const assertHeadCandidate = async (workspaceId: string, checkpointId: string): Promise<void> => {
    const checkpoint = await db
      .selectFrom('checkpoints')
      .select(['workspace_id', 'status'])
      .where('id', '=', checkpointId)
      .executeTakeFirst();
    if (checkpoint === undefined) throw new NotFoundError(`checkpoint ${checkpointId} not found`, { data: { checkpointId } });
    if (checkpoint.workspace_id !== workspaceId || checkpoint.status !== 'ready') {
      throw new InputError(
        'INVALID_INPUT',
        `checkpoint ${checkpointId} cannot become the head of workspace ${workspaceId}: it must be a ready checkpoint of that workspace`,
        {
          data: { workspaceId, checkpointId, checkpointWorkspaceId: checkpoint.workspace_id, status: checkpoint.status },
        },
      );
    }
  };

  return {
    async create(input) {
      const at = now();
      const row = {
        id: input.id === undefined ? newId() : requireText(input.id, 'id'),
        tenant_id: requireText(input.tenantId, 'tenantId'),
        name: requireText(input.name, 'name'),
        head_checkpoint_id: null,
        head_version: 0,
        created_at: at,
        updated_at: at,
      };
      try {
        await db.insertInto('workspaces').values(row).execute();
      } catch (error) {
        if (!isForeignKeyViolation(error)) throw error;
        throw new NotFoundError(`tenant ${row.tenant_id} not found`, { data: { tenantId: row.tenant_id }, cause: error });
      }
      return toWorkspace(row);
    },
    async get(id) {
      const workspace = await find(id);
      if (workspace === undefined) throw workspaceNotFound(id);
      return workspace;
    },
    find,
    async getByName(tenantId, name) {
      const workspace = await findByName(tenantId, name);
      if (workspace === undefined)
        throw new NotFoundError(`workspace ${name} not found in tenant ${tenantId}`, { data: { tenantId, name } });
      return workspace;
    },
    findByName,
    async listByTenant(tenantId) {
      const rows = await db.selectFrom('workspaces').selectAll().where('tenant_id', '=', tenantId).orderBy('name').execute();
      return rows.map(toWorkspace);
    },
    async listAll() {
      const rows = await db.selectFrom('workspaces').selectAll().orderBy('id').execute();
      return rows.map(toWorkspace);
    },
    async casHead(workspaceId, expectedVersion, newHeadCheckpointId) {
      requireCount(expectedVersion, 'expectedVersion');
      if (newHeadCheckpointId !== null) await assertHeadCandidate(workspaceId, newHeadCheckpointId);
      const row = await db
        .updateTable('workspaces')
        .set((eb) => ({ head_checkpoint_id: newHeadCheckpointId, head_version: eb('head_version', '+', 1), updated_at: now() }))
        .where('id', '=', workspaceId)
        .where('head_version', '=', expectedVersion)
        .returningAll()
        .executeTakeFirst();
      if (row !== undefined) return toWorkspace(row);
      const current = await db.selectFrom('workspaces').select('head_version').where('id', '=', workspaceId).executeTakeFirst();
      if (current === undefined) throw workspaceNotFound(workspaceId);
      throw new ConflictError(
        'CONFLICT',
        `workspace ${workspaceId} head moved: expected version ${expectedVersion}, found ${current.head_version}; re-read the workspace and retry`,
        { data: { workspaceId, expectedVersion, actualVersion: current.head_version } },
      );
    },
  };
}

function workspaceNotFound(id: string): NotFoundError {
  return new NotFoundError(`workspace ${id} not found`, { data: { workspaceId: id } });
}

function toWorkspace(row: Selectable<WorkspacesTable>): Workspace {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    headCheckpointId: row.head_checkpoint_id,
    headVersion: row.head_version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
