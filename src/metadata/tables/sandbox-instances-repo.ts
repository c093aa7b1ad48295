import { ConflictError, InputError } from '../../errors.js';
import type { SandboxInstancesTable } from '../schema.js';
import { type LockFence, requireCurrentFence } from './fenced-locks-repo.js';
import { type RepoContext, requireCount, requireText, withinTransaction } from './repo-context.js';

/** Longest sandbox key, in UTF-16 code units. */
export const MAX_SANDBOX_KEY_LENGTH = 1024;
/** Longest id or name field of a record (provider, sandbox, snapshot, thread and run ids). */
export const MAX_SANDBOX_FIELD_LENGTH = 1024;
/** Longest snapshot label kept. */
export const MAX_SNAPSHOT_LABEL_LENGTH = 1024;

/** A sandbox record as a framework writes it (its fields, not the store's). */
export interface SandboxInstanceInput {
  readonly key: string;
  readonly provider: string;
  readonly providerSandboxId: string;
  readonly latestSnapshotId?: string | undefined;
  readonly threadId: string;
  readonly latestRunId?: string | undefined;
  /** The caller's timestamp, epoch ms, kept as given. */
  readonly updatedAt: number;
}

/** A stored sandbox record: the input plus its version and the store's time of the write. */
export interface SandboxInstance extends SandboxInstanceInput {
  readonly version: number;
  readonly writtenAt: number;
}

/** Conditions of a write. */
export interface SandboxInstanceWriteOptions {
  /**
   * Compare-and-set: `null` means the key must not exist yet; a number, that the stored version
   * is that one. A mismatch rejects with `CONFLICT` (`data.reason: 'version'`) and writes nothing.
   * Left out: the write replaces whatever is there.
   */
  readonly expectedVersion?: number | null;
  /** The write is made only while this lock grant is current; `STALE_LEASE` otherwise. */
  readonly fence?: LockFence;
}

/** What a framework said about a checkpoint it asked for, and where the checkpoint lives. */
export interface SnapshotLabel {
  readonly checkpointId: string;
  readonly workspaceId: string;
  readonly label: string | null;
  readonly threadId: string | null;
  readonly runId: string | null;
  readonly sandboxKey: string | null;
  readonly createdAt: number;
}

/**
 * The `sandbox_instances` and `sandbox_snapshot_labels` tables: an agent framework's record of
 * which provider sandbox to resume for a key, per tenant, versioned; and the labels of the
 * checkpoints it took. Keys of different tenants never meet. Every write is one statement or
 * one transaction; a refused write changes nothing.
 */
export interface SandboxInstancesRepo {
  /** The record of `key` in the tenant, or undefined. */
  get(tenantId: string, key: string): Promise<SandboxInstance | undefined>;
  /**
   * Inserts or fully replaces the record of `input.key` (optional fields left out are cleared,
   * never merged with the previous row) and resolves the stored record: version 1 when new,
   * previous + 1 otherwise. `INVALID_INPUT` for an empty or over-long field or a negative
   * `updatedAt`; `CONFLICT` for a failed compare-and-set; `STALE_LEASE` for a stale fence.
   */
  put(tenantId: string, input: SandboxInstanceInput, options?: SandboxInstanceWriteOptions): Promise<SandboxInstance>;
  /**
   * Deletes the record of `key`; resolves whether there was one. A missing key is not an error
   * unless `expectedVersion` asks for a version (`CONFLICT`). `STALE_LEASE` for a stale fence.
   */
  delete(tenantId: string, key: string, options?: SandboxInstanceWriteOptions): Promise<boolean>;
  /** Records (or replaces) the label of checkpoint `label.checkpointId` in the tenant. */
  putSnapshotLabel(tenantId: string, label: Omit<SnapshotLabel, 'createdAt'>): Promise<SnapshotLabel>;
  /** The label of a checkpoint in the tenant, or undefined when none was recorded. */
  findSnapshotLabel(tenantId: string, checkpointId: string): Promise<SnapshotLabel | undefined>;
}

function bounded(value: unknown, field: string, max: number): string {
  const text = requireText(value, field);
  if (text.length > max) throw new InputError('INVALID_INPUT', `${field} is longer than ${max} characters`, { data: { field } });
  return text;
}

function optionalBounded(value: unknown, field: string, max: number): string | null {
  return value === undefined || value === null ? null : bounded(value, field, max);
}

function row(tenantId: string, input: SandboxInstanceInput, version: number, writtenAt: number): SandboxInstancesTable {
  return {
    tenant_id: tenantId,
    key: bounded(input.key, 'key', MAX_SANDBOX_KEY_LENGTH),
    provider: bounded(input.provider, 'provider', MAX_SANDBOX_FIELD_LENGTH),
    provider_sandbox_id: bounded(input.providerSandboxId, 'providerSandboxId', MAX_SANDBOX_FIELD_LENGTH),
    latest_snapshot_id: optionalBounded(input.latestSnapshotId, 'latestSnapshotId', MAX_SANDBOX_FIELD_LENGTH),
    thread_id: bounded(input.threadId, 'threadId', MAX_SANDBOX_FIELD_LENGTH),
    latest_run_id: optionalBounded(input.latestRunId, 'latestRunId', MAX_SANDBOX_FIELD_LENGTH),
    updated_at: requireCount(input.updatedAt, 'updatedAt'),
    version,
    written_at: writtenAt,
  };
}

function fromRow(r: SandboxInstancesTable): SandboxInstance {
  return {
    key: r.key,
    provider: r.provider,
    providerSandboxId: r.provider_sandbox_id,
    ...(r.latest_snapshot_id === null ? {} : { latestSnapshotId: r.latest_snapshot_id }),
    threadId: r.thread_id,
    ...(r.latest_run_id === null ? {} : { latestRunId: r.latest_run_id }),
    updatedAt: r.updated_at,
    version: r.version,
    writtenAt: r.written_at,
  };
}

function versionConflict(key: string, expected: number | null, actual: number | null): ConflictError {
  return new ConflictError(
    'CONFLICT',
    `sandbox record ${key} is at version ${actual ?? 'none'}, not ${expected ?? 'none'}: read it again and retry`,
    { data: { reason: 'version', key, expected, actual } },
  );
}

/** Builds the sandbox-instances repository over `context.db`. */
export function createSandboxInstancesRepo(context: RepoContext): SandboxInstancesRepo {
  const { db, now } = context;
  const checkOptions = (options: SandboxInstanceWriteOptions) => {
    if (options.expectedVersion !== undefined && options.expectedVersion !== null) requireCount(options.expectedVersion, 'expectedVersion');
  };
  return {
    async get(tenantId, key) {
      const found = await db
        .selectFrom('sandbox_instances')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('key', '=', key)
        .executeTakeFirst();
      return found === undefined ? undefined : fromRow(found);
    },
    async put(tenantId, input, options = {}) {
      checkOptions(options);
      const values = row(tenantId, input, 1, now());
      // Unfenced writes are one statement each (no transaction held across awaits); a fenced one checks the lock in the same transaction.
      const within =
        options.fence === undefined
          ? <T>(work: (trx: typeof db) => Promise<T>) => work(db)
          : <T>(work: (trx: typeof db) => Promise<T>) => withinTransaction(db, work);
      return within(async (trx) => {
        if (options.fence !== undefined) await requireCurrentFence({ ...context, db: trx }, tenantId, options.fence);
        const { expectedVersion } = options;
        const { tenant_id: _t, key: _k, version: _v, ...changes } = values;
        let written: SandboxInstancesTable | undefined;
        if (expectedVersion === undefined) {
          written = await trx
            .insertInto('sandbox_instances')
            .values(values)
            .onConflict((oc) =>
              oc.columns(['tenant_id', 'key']).doUpdateSet((eb) => ({ ...changes, version: eb('sandbox_instances.version', '+', 1) })),
            )
            .returningAll()
            .executeTakeFirst();
        } else if (expectedVersion === null) {
          written = await trx
            .insertInto('sandbox_instances')
            .values(values)
            .onConflict((oc) => oc.columns(['tenant_id', 'key']).doNothing())
            .returningAll()
            .executeTakeFirst();
        } else {
          written = await trx
            .updateTable('sandbox_instances')
            .set({ ...changes, version: expectedVersion + 1 })
            .where('tenant_id', '=', tenantId)
            .where('key', '=', values.key)
            .where('version', '=', expectedVersion)
            .returningAll()
            .executeTakeFirst();
        }
        if (written === undefined) {
          const current = await trx
            .selectFrom('sandbox_instances')
            .select('version')
            .where('tenant_id', '=', tenantId)
            .where('key', '=', values.key)
            .executeTakeFirst();
          throw versionConflict(values.key, expectedVersion ?? null, current?.version ?? null);
        }
        return fromRow(written);
      });
    },
    async delete(tenantId, key, options = {}) {
      checkOptions(options);
      const within =
        options.fence === undefined
          ? <T>(work: (trx: typeof db) => Promise<T>) => work(db)
          : <T>(work: (trx: typeof db) => Promise<T>) => withinTransaction(db, work);
      return within(async (trx) => {
        if (options.fence !== undefined) await requireCurrentFence({ ...context, db: trx }, tenantId, options.fence);
        let query = trx.deleteFrom('sandbox_instances').where('tenant_id', '=', tenantId).where('key', '=', key);
        const { expectedVersion } = options;
        if (typeof expectedVersion === 'number') query = query.where('version', '=', expectedVersion);
        const deleted = Number((await query.executeTakeFirst()).numDeletedRows) > 0;
        if (typeof expectedVersion === 'number' && !deleted) {
          const current = await trx
            .selectFrom('sandbox_instances')
            .select('version')
            .where('tenant_id', '=', tenantId)
            .where('key', '=', key)
            .executeTakeFirst();
          throw versionConflict(key, expectedVersion, current?.version ?? null);
        }
        return deleted;
      });
    },
    async putSnapshotLabel(tenantId, label) {
      const values = {
        tenant_id: tenantId,
        checkpoint_id: bounded(label.checkpointId, 'checkpointId', MAX_SANDBOX_FIELD_LENGTH),
        workspace_id: bounded(label.workspaceId, 'workspaceId', MAX_SANDBOX_FIELD_LENGTH),
        label: optionalBounded(label.label, 'label', MAX_SNAPSHOT_LABEL_LENGTH),
        thread_id: optionalBounded(label.threadId, 'threadId', MAX_SANDBOX_FIELD_LENGTH),
        run_id: optionalBounded(label.runId, 'runId', MAX_SANDBOX_FIELD_LENGTH),
        sandbox_key: optionalBounded(label.sandboxKey, 'sandboxKey', MAX_SANDBOX_KEY_LENGTH),
        created_at: now(),
      };
      const { tenant_id: _t, checkpoint_id: _c, ...changes } = values;
      await db
        .insertInto('sandbox_snapshot_labels')
        .values(values)
        .onConflict((oc) => oc.columns(['tenant_id', 'checkpoint_id']).doUpdateSet(changes))
        .execute();
      return labelFromRow(values);
    },
    async findSnapshotLabel(tenantId, checkpointId) {
      const found = await db
        .selectFrom('sandbox_snapshot_labels')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('checkpoint_id', '=', checkpointId)
        .executeTakeFirst();
      return found === undefined ? undefined : labelFromRow(found);
    },
  };
}

function labelFromRow(r: {
  checkpoint_id: string;
  workspace_id: string;
  label: string | null;
  thread_id: string | null;
  run_id: string | null;
  sandbox_key: string | null;
  created_at: number;
}): SnapshotLabel {
  return {
    checkpointId: r.checkpoint_id,
    workspaceId: r.workspace_id,
    label: r.label,
    threadId: r.thread_id,
    runId: r.run_id,
    sandboxKey: r.sandbox_key,
    createdAt: r.created_at,
  };
}
