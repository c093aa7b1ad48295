import type { Selectable } from 'kysely';
import { InputError } from '../../errors.js';
import type { UserRoleColumn, UsersTable } from '../schema.js';
import { newId, type RepoContext, requireText, withinTransaction } from './repo-context.js';

/** A user of a tenant as stored. */
export interface UserRecord {
  /**
   * Row id, immutable and never reused: tokens of the user, the owner of the user's collection
   * and a run's `bindings.user` all point here, so a re-added name never revives old tokens,
   * old runs or old files.
   */
  readonly id: string;
  readonly tenantId: string;
  /** Unique among the tenant's live users; what people type and see (never an owner id). */
  readonly name: string;
  readonly role: UserRoleColumn;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/** The roles a user may hold. */
const ROLES: ReadonlySet<string> = new Set<UserRoleColumn>(['member', 'viewer']);

/** The `users` table. */
export interface UsersRepo {
  /**
   * Adds a live user. A live user of the tenant with this name already: `ALREADY_EXISTS`; an
   * unknown tenant: `CONFLICT` (foreign key); a role other than member or viewer: `INVALID_INPUT`.
   */
  create(input: { tenantId: string; name: string; role: UserRoleColumn }): Promise<UserRecord>;
  /** The tenant's live (not revoked) user named `name`, or `undefined`. */
  findActive(tenantId: string, name: string): Promise<UserRecord | undefined>;
  /** The tenant's user with row id `id`, live or revoked, or `undefined` (also for another tenant's user). */
  find(tenantId: string, id: string): Promise<UserRecord | undefined>;
  /** Users, live and revoked, of one tenant (of every tenant with `null`), by tenant, name and creation. */
  list(tenantId: string | null): Promise<UserRecord[]>;
  /**
   * Revokes the tenant's live user `name` and, in the same transaction, every live token of
   * that user; the revoked user's row stays. Resolves with the revoked user, or `undefined`
   * when there is no live user of that name.
   */
  revoke(tenantId: string, name: string): Promise<UserRecord | undefined>;
}

/** Builds the users repository over `context.db` (a store or a transaction). */
export function createUsersRepo({ db, now }: RepoContext): UsersRepo {
  return {
    async create(input) {
      if (!ROLES.has(input.role)) {
        throw new InputError('INVALID_INPUT', `role must be member or viewer, not ${JSON.stringify(input.role)}`, {
          data: { field: 'role' },
        });
      }
      const row = {
        id: newId(),
        tenant_id: requireText(input.tenantId, 'tenantId'),
        name: requireText(input.name, 'name'),
        role: input.role,
        created_at: now(),
        revoked_at: null,
      };
      await db.insertInto('users').values(row).execute();
      return toUser(row);
    },
    async findActive(tenantId, name) {
      const row = await db
        .selectFrom('users')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('name', '=', name)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return row === undefined ? undefined : toUser(row);
    },
    async find(tenantId, id) {
      const row = await db.selectFrom('users').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
      return row === undefined ? undefined : toUser(row);
    },
    async list(tenantId) {
      let query = db.selectFrom('users').selectAll();
      if (tenantId !== null) query = query.where('tenant_id', '=', tenantId);
      const rows = await query.orderBy('tenant_id').orderBy('name').orderBy('created_at').orderBy('id').execute();
      return rows.map(toUser);
    },
    revoke(tenantId, name) {
      return withinTransaction(db, async (trx) => {
        const at = now();
        const row = await trx
          .updateTable('users')
          .set({ revoked_at: at })
          .where('tenant_id', '=', tenantId)
          .where('name', '=', name)
          .where('revoked_at', 'is', null)
          .returningAll()
          .executeTakeFirst();
        if (row === undefined) return undefined;
        await trx.updateTable('tokens').set({ revoked_at: at }).where('user_id', '=', row.id).where('revoked_at', 'is', null).execute();
        return toUser(row);
      });
    },
  };
}

function toUser(row: Selectable<UsersTable>): UserRecord {
  return { id: row.id, tenantId: row.tenant_id, name: row.name, role: row.role, createdAt: row.created_at, revokedAt: row.revoked_at };
}
