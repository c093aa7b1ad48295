import type { Selectable } from 'kysely';
import { NotFoundError } from '../../errors.js';
import type { TenantsTable } from '../schema.js';
import { newId, type RepoContext, requireText } from './repo-context.js';

/** A tenant: the owner of workspaces. */
export interface Tenant {
  readonly id: string;
  /** Unique across all tenants. */
  readonly name: string;
  readonly createdAt: number;
}

/** Input of {@link TenantsRepo.create}. */
export interface CreateTenantInput {
  /** Defaults to a new UUID. */
  readonly id?: string;
  readonly name: string;
}

/** The `tenants` table group. */
export interface TenantsRepo {
  /** Inserts a tenant. A taken id or name rejects with `ALREADY_EXISTS`. */
  create(input: CreateTenantInput): Promise<Tenant>;
  /** The tenant with `id`; rejects with `NOT_FOUND` when there is none. */
  get(id: string): Promise<Tenant>;
  /** The tenant with `id`, or `undefined`. */
  find(id: string): Promise<Tenant | undefined>;
  /** The tenant named `name`, or `undefined`. */
  findByName(name: string): Promise<Tenant | undefined>;
  /** Every tenant, ordered by name. */
  list(): Promise<Tenant[]>;
}

/** Builds the tenants repository over `context.db` (a store or a transaction). */
export function createTenantsRepo({ db, now }: RepoContext): TenantsRepo {
  const find = async (id: string): Promise<Tenant | undefined> => {
    const row = await db.selectFrom('tenants').selectAll().where('id', '=', id).executeTakeFirst();
    return row === undefined ? undefined : toTenant(row);
  };
  return {
    async create(input) {
      const row = {
        id: input.id === undefined ? newId() : requireText(input.id, 'id'),
        name: requireText(input.name, 'name'),
        created_at: now(),
      };
      await db.insertInto('tenants').values(row).execute();
      return toTenant(row);
    },
    async get(id) {
      const tenant = await find(id);
      if (tenant === undefined) throw new NotFoundError(`tenant ${id} not found`, { data: { tenantId: id } });
      return tenant;
    },
    find,
    async findByName(name) {
      const row = await db.selectFrom('tenants').selectAll().where('name', '=', name).executeTakeFirst();
      return row === undefined ? undefined : toTenant(row);
    },
    async list() {
      const rows = await db.selectFrom('tenants').selectAll().orderBy('name').execute();
      return rows.map(toTenant);
    },
  };
}

function toTenant(row: Selectable<TenantsTable>): Tenant {
  return { id: row.id, name: row.name, createdAt: row.created_at };
}
