import type { Selectable } from 'kysely';
import { IntegrityError, NotFoundError } from '../../errors.js';
import type { FolderSyncStatesTable } from '../schema.js';
import type { RepoContext } from './repo-context.js';
import type { StoredRunBindings } from './runs-repo.js';

/** Which sandbox and which of its collection directories a sync state is for. */
export interface FolderSyncKey {
  readonly provider: string;
  readonly sandboxId: string;
  readonly scope: FolderSyncStatesTable['scope'];
}

/** An operation id stored before its transfer, with the signature it was made for. */
export interface PendingSyncOperation {
  readonly operationId: string;
  /** The signature sent (`missing` for a removal). */
  readonly signature: string;
}

/** What an incoming sync meant to do, until the next outgoing sync reconciles it with the disk. */
export interface SyncIntents {
  /** Path -> the signature written there. */
  readonly imports: Readonly<Record<string, string>>;
  /** Paths removed from the sandbox. */
  readonly removals: readonly string[];
}

/** A stored error: its code and message only (never data: it may name what it should not). */
export interface SyncErrorRecord {
  readonly code: string;
  readonly message: string;
}

/** One sandbox's sync of one collection, as stored. */
export interface FolderSyncState extends FolderSyncKey {
  readonly runId: string;
  readonly tenantId: string;
  readonly collectionId: string;
  /** The run's owners the state was made for: a sandbox is never synced for other ones. */
  readonly bindings: StoredRunBindings;
  /** Path -> signature last agreed with the store. */
  readonly baseline: Readonly<Record<string, string>>;
  /** Path -> the operation stored before it was sent, until it is known to be applied. */
  readonly pending: Readonly<Record<string, PendingSyncOperation>>;
  readonly intents: SyncIntents | null;
  /** Root tree of the last outgoing scan, `null` before the first one. */
  readonly lastRootTree: string | null;
  readonly state: FolderSyncStatesTable['state'];
  readonly lastSavedAt: number | null;
  readonly finalCheckpointAt: number | null;
  readonly error: SyncErrorRecord | null;
  readonly refresh: {
    readonly state: FolderSyncStatesTable['refresh_state'];
    /** When the refresh state last changed. */
    readonly at: number | null;
    readonly error: SyncErrorRecord | null;
  };
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input of {@link FolderSyncRepo.create}: a state that was never saved, with an empty baseline. */
export type NewFolderSyncState = FolderSyncKey &
  Pick<FolderSyncState, 'runId' | 'tenantId' | 'collectionId' | 'bindings'> &
  Partial<Pick<FolderSyncState, 'baseline' | 'pending'>>;

/** The fields {@link FolderSyncRepo.update} changes; absent ones stay. */
export interface FolderSyncPatch {
  readonly runId?: string;
  readonly baseline?: Readonly<Record<string, string>>;
  readonly pending?: Readonly<Record<string, PendingSyncOperation>>;
  readonly intents?: SyncIntents | null;
  readonly lastRootTree?: string | null;
  readonly state?: FolderSyncState['state'];
  readonly lastSavedAt?: number | null;
  readonly finalCheckpointAt?: number | null;
  readonly error?: SyncErrorRecord | null;
  readonly refreshState?: FolderSyncState['refresh']['state'];
  readonly refreshError?: SyncErrorRecord | null;
}

/**
 * The `folder_sync_states` table: per sandbox and scope, what its sync last agreed with the
 * store. Written only by the process holding the run's lease (the sync engine), so rows are
 * read and written whole, without compare-and-swap; `updated_at` is stamped by every write.
 */
export interface FolderSyncRepo {
  /** The state of `key`, or undefined when the sandbox never synced that scope. */
  find(key: FolderSyncKey): Promise<FolderSyncState | undefined>;
  /** Inserts a `never_saved` state with no refresh asked; an existing key is `ALREADY_EXISTS`. */
  create(input: NewFolderSyncState): Promise<FolderSyncState>;
  /** Applies `patch` (a refresh state change also stamps `refresh.at`); `NOT_FOUND` when there is no such state. */
  update(key: FolderSyncKey, patch: FolderSyncPatch): Promise<FolderSyncState>;
  /** Every state of collection `collectionId` (each sandbox that synced it), oldest first. */
  listByCollection(collectionId: string): Promise<FolderSyncState[]>;
  /** Every state of run `runId` of tenant `tenantId`, oldest first. */
  listByRun(tenantId: string, runId: string): Promise<FolderSyncState[]>;
  /** Deletes every state of a sandbox (it is gone for good); resolves with how many rows went. */
  deleteSandbox(provider: string, sandboxId: string): Promise<number>;
}

/** Builds the sync-state repository over `context.db` (a store or a transaction). */
export function createFolderSyncRepo({ db, now }: RepoContext): FolderSyncRepo {
  const select = () => db.selectFrom('folder_sync_states').selectAll();
  const byKey = (key: FolderSyncKey) =>
    select().where('provider', '=', key.provider).where('sandbox_id', '=', key.sandboxId).where('scope', '=', key.scope);
  const find = async (key: FolderSyncKey): Promise<FolderSyncState | undefined> => {
    const row = await byKey(key).executeTakeFirst();
    return row === undefined ? undefined : toState(row);
  };
  return {
    find,
    async create(input) {
      const at = now();
      const row: Selectable<FolderSyncStatesTable> = {
        provider: input.provider,
        sandbox_id: input.sandboxId,
        scope: input.scope,
        run_id: input.runId,
        tenant_id: input.tenantId,
        collection_id: input.collectionId,
        bindings: JSON.stringify(input.bindings),
        baseline: JSON.stringify(input.baseline ?? {}),
        pending: JSON.stringify(input.pending ?? {}),
        intents: null,
        last_root_tree: null,
        state: 'never_saved',
        last_saved_at: null,
        final_checkpoint_at: null,
        error: null,
        refresh_state: 'none',
        refresh_at: null,
        refresh_error: null,
        created_at: at,
        updated_at: at,
      };
      await db.insertInto('folder_sync_states').values(row).execute();
      return toState(row);
    },
    async update(key, patch) {
      const at = now();
      const set: Partial<Selectable<FolderSyncStatesTable>> = { updated_at: at };
      if (patch.runId !== undefined) set.run_id = patch.runId;
      if (patch.baseline !== undefined) set.baseline = JSON.stringify(patch.baseline);
      if (patch.pending !== undefined) set.pending = JSON.stringify(patch.pending);
      if (patch.intents !== undefined) set.intents = patch.intents === null ? null : JSON.stringify(patch.intents);
      if (patch.lastRootTree !== undefined) set.last_root_tree = patch.lastRootTree;
      if (patch.state !== undefined) set.state = patch.state;
      if (patch.lastSavedAt !== undefined) set.last_saved_at = patch.lastSavedAt;
      if (patch.finalCheckpointAt !== undefined) set.final_checkpoint_at = patch.finalCheckpointAt;
      if (patch.error !== undefined) set.error = patch.error === null ? null : JSON.stringify(errorRecord(patch.error));
      if (patch.refreshState !== undefined) {
        set.refresh_state = patch.refreshState;
        set.refresh_at = at;
      }
      if (patch.refreshError !== undefined)
        set.refresh_error = patch.refreshError === null ? null : JSON.stringify(errorRecord(patch.refreshError));
      const result = await db
        .updateTable('folder_sync_states')
        .set(set)
        .where('provider', '=', key.provider)
        .where('sandbox_id', '=', key.sandboxId)
        .where('scope', '=', key.scope)
        .executeTakeFirst();
      const state = Number(result.numUpdatedRows) === 0 ? undefined : await find(key);
      if (state === undefined) {
        throw new NotFoundError(`no sync state of ${key.scope} in sandbox ${key.provider}/${key.sandboxId}`, { data: { ...key } });
      }
      return state;
    },
    async listByCollection(collectionId) {
      const rows = await select().where('collection_id', '=', collectionId).orderBy('created_at').orderBy('sandbox_id').execute();
      return rows.map(toState);
    },
    async listByRun(tenantId, runId) {
      const rows = await select()
        .where('tenant_id', '=', tenantId)
        .where('run_id', '=', runId)
        .orderBy('created_at')
        .orderBy('scope')
        .execute();
      return rows.map(toState);
    },
    async deleteSandbox(provider, sandboxId) {
      const result = await db
        .deleteFrom('folder_sync_states')
        .where('provider', '=', provider)
        .where('sandbox_id', '=', sandboxId)
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

function errorRecord(error: SyncErrorRecord): SyncErrorRecord {
  return { code: error.code, message: error.message };
}

function toState(row: Selectable<FolderSyncStatesTable>): FolderSyncState {
  const key = `${row.provider}/${row.sandbox_id}/${row.scope}`;
  return {
    provider: row.provider,
    sandboxId: row.sandbox_id,
    scope: row.scope,
    runId: row.run_id,
    tenantId: row.tenant_id,
    collectionId: row.collection_id,
    bindings: parse(key, 'bindings', row.bindings) as StoredRunBindings,
    baseline: parse(key, 'baseline', row.baseline) as Record<string, string>,
    pending: parse(key, 'pending', row.pending) as Record<string, PendingSyncOperation>,
    intents: row.intents === null ? null : (parse(key, 'intents', row.intents) as unknown as SyncIntents),
    lastRootTree: row.last_root_tree,
    state: row.state,
    lastSavedAt: row.last_saved_at,
    finalCheckpointAt: row.final_checkpoint_at,
    error: row.error === null ? null : (parse(key, 'error', row.error) as unknown as SyncErrorRecord),
    refresh: {
      state: row.refresh_state,
      at: row.refresh_at,
      error: row.refresh_error === null ? null : (parse(key, 'refresh_error', row.refresh_error) as unknown as SyncErrorRecord),
    },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A stored JSON object column; anything else is `INTEGRITY`, never guessed around. */
function parse(key: string, column: string, text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new IntegrityError('INTEGRITY', `sync state ${key} has a malformed ${column} column`, { data: { column } });
  }
  return value as Record<string, unknown>;
}
