/**
 * The people of a tenant (DESIGN section 10): members read and write the tenant's shared
 * collections, viewers only read them, and each reaches its own user collection. A revoked
 * user's tokens stop resolving at once; the row stays for the record, and the name may be
 * added again as a new user whom the old tokens do not reach.
 */
import { InputError, NotFoundError } from '../errors.js';
import type { MetadataStore, UserRecord } from '../metadata/metadata-store.js';
import { isOwnerId, MAX_OWNER_ID_CHARS } from '../model/run-bindings.js';
import type { TenantScope } from '../model/tenants.js';
import { USER_ROLES, type UserRole } from './folder-access.js';

/** A user with its tenant's name, as the CLI and callers see it. */
export interface UserView extends UserRecord {
  readonly tenant: string;
}

/** Users of every tenant (an operator's view, like {@link Tokens}). */
export class Users {
  constructor(
    private readonly meta: MetadataStore,
    /** Finds or creates a tenant by name. */
    private readonly tenant: (name: string) => Promise<TenantScope>,
  ) {}

  /**
   * Adds user `name` with `role` to tenant `tenant` (creating the tenant if it is missing).
   * The name is the owner id of the user's collection: at most 128 letters, digits and
   * `. _ : @ -`, else `INVALID_INPUT`; a live user of that name already: `ALREADY_EXISTS`.
   */
  async add(input: { tenant: string; name: string; role: UserRole }): Promise<UserView> {
    if (!isOwnerId(input.name)) {
      throw new InputError(
        'INVALID_INPUT',
        `a user name is at most ${MAX_OWNER_ID_CHARS} letters, digits and . _ : @ - (starting with a letter or digit)`,
        { data: { field: 'name' } },
      );
    }
    if (!(USER_ROLES as readonly string[]).includes(input.role)) {
      throw new InputError('INVALID_INPUT', 'role must be member or viewer', { data: { field: 'role' } });
    }
    const tenant = await this.tenant(input.tenant);
    const user = await this.meta.users.create({ tenantId: tenant.id, name: input.name, role: input.role });
    return { ...user, tenant: tenant.name };
  }

  /**
   * Revokes the live user `name` of tenant `tenant` and all its tokens, effective for the
   * next request. No such live user: `NOT_FOUND`.
   */
  async revoke(input: { tenant: string; name: string }): Promise<UserView> {
    const tenant = await this.meta.tenants.findByName(input.tenant);
    const user = tenant === undefined ? undefined : await this.meta.users.revoke(tenant.id, input.name);
    if (tenant === undefined || user === undefined) {
      throw new NotFoundError(`no live user ${input.name} in tenant ${input.tenant}: holdfast user ls shows them`, {
        data: { tenant: input.tenant, user: input.name },
      });
    }
    return { ...user, tenant: tenant.name };
  }

  /** Users, live and revoked, of tenant `tenant` (of every tenant when absent), by tenant and name. */
  async list(input: { tenant?: string } = {}): Promise<UserView[]> {
    const tenants = new Map((await this.meta.tenants.list()).map((t) => [t.id, t.name]));
    let tenantId: string | null = null;
    if (input.tenant !== undefined) {
      const tenant = await this.meta.tenants.findByName(input.tenant);
      if (tenant === undefined) return [];
      tenantId = tenant.id;
    }
    const users = await this.meta.users.list(tenantId);
    return users.map((u) => ({ ...u, tenant: tenants.get(u.tenantId) ?? u.tenantId }));
  }
}
