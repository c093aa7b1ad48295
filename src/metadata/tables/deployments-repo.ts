import type { Selectable } from 'kysely';
import { NotFoundError } from '../../errors.js';
import type { ChannelsTable, DeploymentsTable } from '../schema.js';
import { afterNewest, isForeignKeyViolation, type RepoContext, requireCount, requireText } from './repo-context.js';

/** A stored deployment: its content id and the canonical JSON spec it hashes. */
export interface DeploymentRecord {
  readonly tenantId: string;
  /** SHA-256 (hex) of `spec`. */
  readonly id: string;
  /** Canonical JSON text of the deployment's spec (parsed and checked by the runs layer). */
  readonly spec: string;
  readonly createdAt: number;
}

/** A channel: a name whose active deployment moves when a new one is published. */
export interface Channel {
  readonly tenantId: string;
  readonly name: string;
  readonly deploymentId: string;
  /** 1 on the first publish, +1 on every later one. */
  readonly version: number;
  readonly updatedAt: number;
}

/** A keyset page of a listing: at most `limit` rows, only those after `after` in the listing's order. */
export interface KeysetOptions<K> {
  readonly limit?: number;
  readonly after?: K;
}

/** The `deployments` and `channels` tables. Deployments are immutable: written once, never updated. */
export interface DeploymentsRepo {
  /**
   * Stores a deployment unless the tenant already has one with this id (then the stored one is
   * returned unchanged, `created: false`: same id means same spec). Unknown tenant: `NOT_FOUND`.
   */
  put(input: { tenantId: string; id: string; spec: string }): Promise<{ deployment: DeploymentRecord; created: boolean }>;
  /** The tenant's deployment `id`, or `undefined` (another tenant's ids are not found). */
  find(tenantId: string, id: string): Promise<DeploymentRecord | undefined>;
  /** The tenant's deployments, newest first (ties by id); `after` is a `[createdAt, id]`. */
  list(tenantId: string, options?: KeysetOptions<readonly [createdAt: number, id: string]>): Promise<DeploymentRecord[]>;
  /**
   * Points channel `name` at `deploymentId` (creating the channel at version 1, or adding 1).
   * An unknown deployment of this tenant: `NOT_FOUND`.
   */
  publish(tenantId: string, name: string, deploymentId: string): Promise<Channel>;
  /** The tenant's channel `name`, or `undefined`. */
  findChannel(tenantId: string, name: string): Promise<Channel | undefined>;
  /** The tenant's channels ordered by name; `after` is a name. */
  listChannels(tenantId: string, options?: KeysetOptions<string>): Promise<Channel[]>;
}

/** Builds the deployments repository over `context.db` (a store or a transaction). */
export function createDeploymentsRepo({ db, now }: RepoContext): DeploymentsRepo {
  const find = async (tenantId: string, id: string): Promise<DeploymentRecord | undefined> => {
    const row = await db.selectFrom('deployments').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toDeployment(row);
  };
  const findChannel = async (tenantId: string, name: string): Promise<Channel | undefined> => {
    const row = await db.selectFrom('channels').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
    return row === undefined ? undefined : toChannel(row);
  };
  return {
    async put(input) {
      const row = {
        tenant_id: requireText(input.tenantId, 'tenantId'),
        id: requireText(input.id, 'id'),
        spec: requireText(input.spec, 'spec'),
        created_at: now(),
      };
      let inserted: bigint;
      try {
        const result = await db
          .insertInto('deployments')
          .values(row)
          .onConflict((oc) => oc.columns(['tenant_id', 'id']).doNothing())
          .executeTakeFirst();
        inserted = result.numInsertedOrUpdatedRows ?? 0n;
      } catch (error) {
        if (!isForeignKeyViolation(error)) throw error;
        throw new NotFoundError(`tenant ${row.tenant_id} not found`, { data: { tenantId: row.tenant_id }, cause: error });
      }
      if (inserted > 0n) return { deployment: toDeployment(row), created: true };
      return { deployment: (await find(row.tenant_id, row.id)) ?? toDeployment(row), created: false };
    },
    find,
    async list(tenantId, options = {}) {
      let query = db.selectFrom('deployments').selectAll().where('tenant_id', '=', tenantId);
      if (options.after !== undefined) query = query.where(afterNewest(options.after, 'asc'));
      if (options.limit !== undefined) query = query.limit(requireCount(options.limit, 'limit'));
      const rows = await query.orderBy('created_at', 'desc').orderBy('id').execute();
      return rows.map(toDeployment);
    },
    async publish(tenantId, name, deploymentId) {
      const at = now();
      try {
        const row = await db
          .insertInto('channels')
          .values({ tenant_id: tenantId, name: requireText(name, 'name'), deployment_id: deploymentId, version: 1, updated_at: at })
          .onConflict((oc) =>
            oc.columns(['tenant_id', 'name']).doUpdateSet((eb) => ({
              deployment_id: deploymentId,
              version: eb('channels.version', '+', 1),
              updated_at: at,
            })),
          )
          .returningAll()
          .executeTakeFirstOrThrow();
        return toChannel(row);
      } catch (error) {
        if (!isForeignKeyViolation(error)) throw error;
        throw new NotFoundError(`deployment ${deploymentId} not found`, { data: { deploymentId }, cause: error });
      }
    },
    findChannel,
    async listChannels(tenantId, options = {}) {
      let query = db.selectFrom('channels').selectAll().where('tenant_id', '=', tenantId);
      if (options.after !== undefined) query = query.where('name', '>', options.after);
      if (options.limit !== undefined) query = query.limit(requireCount(options.limit, 'limit'));
      const rows = await query.orderBy('name').execute();
      return rows.map(toChannel);
    },
  };
}

function toDeployment(row: Selectable<DeploymentsTable>): DeploymentRecord {
  return { tenantId: row.tenant_id, id: row.id, spec: row.spec, createdAt: row.created_at };
}

function toChannel(row: Selectable<ChannelsTable>): Channel {
  return { tenantId: row.tenant_id, name: row.name, deploymentId: row.deployment_id, version: row.version, updatedAt: row.updated_at };
}
