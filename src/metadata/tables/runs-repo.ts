import { type Selectable, sql } from 'kysely';
import { ConflictError, NotFoundError } from '../../errors.js';
import type { LeaseState, RunsTable } from '../schema.js';
import {
  afterNewest,
  fromJsonText,
  isForeignKeyViolation,
  newId,
  type RepoContext,
  requireCount,
  requireText,
  startsWith,
  toJsonText,
} from './repo-context.js';

/** A durable run: its workspace, the deployment and sandbox it runs in, and its lease. */
export interface Run {
  readonly id: string;
  readonly tenantId: string;
  readonly workspaceId: string;
  /** The channel the run follows for upgrades, or `null` when pinned to its deployment. */
  readonly channel: string | null;
  readonly deploymentId: string;
  /** The run's current sandbox, `null` before the first turn (or after a resolved recovery). */
  readonly sandbox: { readonly provider: string; readonly id: string } | null;
  readonly lease: Lease;
  readonly turnCount: number;
  /** Owner ids of the collections the run is bound to, by scope; `null` when bound to none. */
  readonly bindings: StoredRunBindings | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** When the run ended; `null` while it is active (its run tokens reach collections only then). */
  readonly endedAt: number | null;
}

/** A run's collection owners by scope as stored (validated by the runs layer before they get here). */
export interface StoredRunBindings {
  readonly task?: string;
  readonly agent?: string;
  readonly user?: string;
  readonly project?: string;
  /** Repositories with their resolved checkout names (`{name, url, ref?, branch?}`). */
  readonly repos?: readonly { readonly name: string; readonly url: string; readonly ref?: string; readonly branch?: string }[];
}

/** The lease columns of a run. */
export interface Lease {
  readonly state: LeaseState;
  /** Bumped by every claim (and by a resolution); every write for the run names the epoch it holds. */
  readonly epoch: number;
  readonly owner: string | null;
  readonly expiresAt: number | null;
  /** Set when the latest claim took over an expired lease: the owner it was taken from. */
  readonly takenFrom: string | null;
  /** Why the lease needs recovery (`release_recovery_required`). */
  readonly error: Readonly<Record<string, unknown>> | null;
}

/** Input of {@link RunsRepo.create}. */
export interface CreateRunInput {
  readonly id?: string;
  readonly tenantId: string;
  readonly workspaceId: string;
  readonly channel: string | null;
  readonly deploymentId: string;
  /** Stored as given (JSON); absent or `null`: bound to no collection. */
  readonly bindings?: StoredRunBindings | null | undefined;
}

/**
 * The `runs` table and its lease. Every method that acts for a lease holder takes the epoch it
 * holds and is a single UPDATE whose WHERE re-checks it, so on PostgreSQL it waits for the row
 * lock and re-evaluates against the committed row: a stale holder changes nothing.
 */
export interface RunsRepo {
  /** Inserts a run with a free lease at epoch 0. Unknown tenant, workspace or deployment: `NOT_FOUND`. */
  create(input: CreateRunInput): Promise<Run>;
  /** The tenant's run `id`, or `undefined` (another tenant's runs are not found). */
  find(tenantId: string, id: string): Promise<Run | undefined>;
  /** The run `id` of any tenant; `NOT_FOUND` when there is none. */
  get(id: string): Promise<Run>;
  /**
   * Up to `limit` runs of tenant `tenantId` whose id starts with `prefix`, compared exactly,
   * ordered by id; another tenant's runs are never among them. `null` searches every tenant:
   * only for operator tools that act on the whole store (`holdfast run show`).
   */
  findByPrefix(tenantId: string | null, prefix: string, limit: number): Promise<Run[]>;
  /** The most recently created run of tenant `tenantId` (of every tenant with `null`), or `undefined`. */
  latest(tenantId: string | null): Promise<Run | undefined>;
  /**
   * The tenant's runs (every tenant's with `null`), newest first (ties by id), at most `limit`;
   * with `after`, only those after that `[createdAt, id]` in this order (a keyset page).
   */
  list(tenantId: string | null, limit?: number, after?: readonly [createdAt: number, id: string]): Promise<Run[]>;
  /**
   * Ends run `id` now, or keeps the moment it already ended (idempotent). An ended run takes
   * no new lease, and its run tokens reach nothing. `NOT_FOUND` when there is no such run.
   */
  end(id: string): Promise<Run>;
  /**
   * Claims the lease in one statement (never on an ended run): succeeds when it is free or its holder's lease has
   * expired (a takeover: `lease.takenFrom` names the old owner), bumping the epoch. Resolves
   * with the claimed run, or `undefined` when someone else holds it or it needs recovery.
   */
  claim(id: string, owner: string, ttlMs: number): Promise<Run | undefined>;
  /** Extends a held lease; false when `epoch` is no longer current (the lease was lost). */
  heartbeat(id: string, epoch: number, ttlMs: number): Promise<boolean>;
  /** Frees a held lease; false when `epoch` is no longer current. */
  release(id: string, epoch: number): Promise<boolean>;
  /** Asserts `epoch` is the current held epoch under the row lock; `STALE_LEASE` otherwise. */
  fence(id: string, epoch: number): Promise<void>;
  /** Counts a new turn and returns its sequence number (1, 2, …); `STALE_LEASE` for a stale epoch. */
  nextTurn(id: string, epoch: number): Promise<number>;
  /** Records the run's sandbox and deployment (a switch commits here); `STALE_LEASE` for a stale epoch. */
  setSandbox(id: string, epoch: number, sandbox: { provider: string; id: string } | null, deploymentId: string): Promise<Run>;
  /** Releases the lease into `release_recovery_required` with `error`; `STALE_LEASE` for a stale epoch. */
  requireRecovery(id: string, epoch: number, error: Readonly<Record<string, unknown>>): Promise<Run>;
  /**
   * Clears `release_recovery_required` (after the caller checked the provider): the lease
   * becomes free at a new epoch and the sandbox is forgotten. `CONFLICT` when the run is not in
   * that state.
   */
  resolveRecovery(id: string): Promise<Run>;
}

/** Builds the runs repository over `context.db` (a store or a transaction). */
export function createRunsRepo({ db, dialect, now }: RepoContext): RunsRepo {
  const get = async (id: string): Promise<Run> => {
    const row = await db.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst();
    if (row === undefined) throw new NotFoundError(`run ${id} not found`, { data: { runId: id } });
    return toRun(row);
  };
  const stale = async (id: string, epoch: number): Promise<never> => {
    const current = await get(id);
    throw new ConflictError(
      'STALE_LEASE',
      `run ${id}: lease epoch ${epoch} is no longer current (now ${current.lease.epoch}, ${current.lease.state}); this owner may write nothing`,
      {
        data: { runId: id, epoch, currentEpoch: current.lease.epoch, state: current.lease.state },
      },
    );
  };
  const held = (id: string, epoch: number) =>
    db.updateTable('runs').where('id', '=', id).where('lease_epoch', '=', requireCount(epoch, 'epoch')).where('lease_state', '=', 'held');

  return {
    async create(input) {
      const at = now();
      const row = {
        id: input.id === undefined ? newId() : requireText(input.id, 'id'),
        tenant_id: requireText(input.tenantId, 'tenantId'),
        workspace_id: requireText(input.workspaceId, 'workspaceId'),
        channel: input.channel,
        deployment_id: requireText(input.deploymentId, 'deploymentId'),
        bindings: input.bindings == null ? null : toJsonText({ ...input.bindings }, 'bindings'),
        created_at: at,
        updated_at: at,
      };
      try {
        await db.insertInto('runs').values(row).execute();
      } catch (error) {
        if (!isForeignKeyViolation(error)) throw error;
        throw new NotFoundError(`tenant, workspace or deployment of run ${row.id} not found`, { data: { ...input }, cause: error });
      }
      return get(row.id);
    },
    async find(tenantId, id) {
      const row = await db.selectFrom('runs').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toRun(row);
    },
    get,
    async findByPrefix(tenantId, prefix, limit) {
      let query = db
        .selectFrom('runs')
        .selectAll()
        .where(startsWith(dialect, 'id', requireText(prefix, 'prefix')));
      if (tenantId !== null) query = query.where('tenant_id', '=', requireText(tenantId, 'tenantId'));
      const rows = await query.orderBy('id').limit(requireCount(limit, 'limit')).execute();
      return rows.map(toRun);
    },
    async latest(tenantId) {
      let query = db.selectFrom('runs').selectAll();
      if (tenantId !== null) query = query.where('tenant_id', '=', requireText(tenantId, 'tenantId'));
      const row = await query.orderBy('created_at', 'desc').orderBy('id').limit(1).executeTakeFirst();
      return row === undefined ? undefined : toRun(row);
    },
    async list(tenantId, limit = 100, after) {
      let query = db.selectFrom('runs').selectAll();
      if (tenantId !== null) query = query.where('tenant_id', '=', requireText(tenantId, 'tenantId'));
      if (after !== undefined) query = query.where(afterNewest(after, 'asc'));
      const rows = await query.orderBy('created_at', 'desc').orderBy('id').limit(requireCount(limit, 'limit')).execute();
      return rows.map(toRun);
    },
    async end(id) {
      const at = now();
      const row = await db
        .updateTable('runs')
        .set({ ended_at: at, updated_at: at })
        .where('id', '=', id)
        .where('ended_at', 'is', null)
        .returningAll()
        .executeTakeFirst();
      return row === undefined ? get(id) : toRun(row);
    },
    async claim(id, owner, ttlMs) {
      const at = now();
      const row = await db
        .updateTable('runs')
        .set({
          lease_taken_from: sql<string | null>`CASE WHEN lease_state = 'held' THEN lease_owner ELSE NULL END`,
          lease_state: 'held',
          lease_epoch: sql<number>`lease_epoch + 1`,
          lease_owner: requireText(owner, 'owner'),
          lease_expires_at: at + requireCount(ttlMs, 'ttlMs'),
          updated_at: at,
        })
        .where('id', '=', id)
        .where('ended_at', 'is', null)
        .where((eb) => eb.or([eb('lease_state', '=', 'free'), eb.and([eb('lease_state', '=', 'held'), eb('lease_expires_at', '<', at)])]))
        .returningAll()
        .executeTakeFirst();
      return row === undefined ? undefined : toRun(row);
    },
    async heartbeat(id, epoch, ttlMs) {
      const at = now();
      const result = await held(id, epoch)
        .set({ lease_expires_at: at + requireCount(ttlMs, 'ttlMs') })
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },
    async release(id, epoch) {
      const result = await held(id, epoch)
        .set({ lease_state: 'free', lease_owner: null, lease_expires_at: null, updated_at: now() })
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },
    async fence(id, epoch) {
      const row = await held(id, epoch).set({ updated_at: now() }).returning('id').executeTakeFirst();
      if (row === undefined) await stale(id, epoch);
    },
    async nextTurn(id, epoch) {
      const row = await held(id, epoch)
        .set((eb) => ({ turn_count: eb('turn_count', '+', 1), updated_at: now() }))
        .returning('turn_count')
        .executeTakeFirst();
      return row === undefined ? stale(id, epoch) : row.turn_count;
    },
    async setSandbox(id, epoch, sandbox, deploymentId) {
      const row = await held(id, epoch)
        .set({
          sandbox_provider: sandbox?.provider ?? null,
          sandbox_id: sandbox?.id ?? null,
          deployment_id: deploymentId,
          updated_at: now(),
        })
        .returningAll()
        .executeTakeFirst();
      return row === undefined ? stale(id, epoch) : toRun(row);
    },
    async requireRecovery(id, epoch, error) {
      const row = await held(id, epoch)
        .set({
          lease_state: 'release_recovery_required',
          lease_owner: null,
          lease_expires_at: null,
          lease_error: toJsonText(error, 'error'),
          updated_at: now(),
        })
        .returningAll()
        .executeTakeFirst();
      return row === undefined ? stale(id, epoch) : toRun(row);
    },
    async resolveRecovery(id) {
      const row = await db
        .updateTable('runs')
        .set({
          lease_state: 'free',
          lease_epoch: sql<number>`lease_epoch + 1`,
          lease_error: null,
          lease_taken_from: null,
          sandbox_provider: null,
          sandbox_id: null,
          updated_at: now(),
        })
        .where('id', '=', id)
        .where('lease_state', '=', 'release_recovery_required')
        .returningAll()
        .executeTakeFirst();
      if (row !== undefined) return toRun(row);
      const current = await get(id);
      throw new ConflictError('CONFLICT', `run ${id} does not need lease recovery (its lease is ${current.lease.state})`, {
        data: { runId: id, state: current.lease.state },
      });
    },
  };
}

function toRun(row: Selectable<RunsTable>): Run {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    workspaceId: row.workspace_id,
    channel: row.channel,
    deploymentId: row.deployment_id,
    sandbox: row.sandbox_provider === null || row.sandbox_id === null ? null : { provider: row.sandbox_provider, id: row.sandbox_id },
    lease: {
      state: row.lease_state,
      epoch: row.lease_epoch,
      owner: row.lease_owner,
      expiresAt: row.lease_expires_at,
      takenFrom: row.lease_taken_from,
      error: fromJsonText(row.lease_error),
    },
    turnCount: row.turn_count,
    bindings: fromJsonText(row.bindings) as StoredRunBindings | null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    endedAt: row.ended_at,
  };
}
