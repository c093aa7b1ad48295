import type { Selectable } from 'kysely';
import { InputError } from '../../errors.js';
import type { TokensTable, UserRoleColumn } from '../schema.js';
import { afterNewest, newId, type RepoContext, requireCount, requireText } from './repo-context.js';

/** An API token as stored: its hash, never the token itself. */
export interface TokenRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  /** Admin tokens may also create tenants and tokens; never a user or run token. */
  readonly admin: boolean;
  /** The `users` row a user token acts for, else `null`. */
  readonly userId: string | null;
  /** The run a run token acts for, else `null`. */
  readonly runId: string | null;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/**
 * A live token found by its hash, with what its principal needs: the tenant's name, and for
 * a user token the user's id, name and role, for a run token the run's bindings (JSON object of
 * owner ids by scope, `null` when unbound).
 */
export interface TokenGrant extends TokenRecord {
  readonly tenantName: string;
  readonly user: { readonly id: string; readonly name: string; readonly role: UserRoleColumn } | null;
  readonly run: { readonly bindings: Readonly<Record<string, unknown>> | null } | null;
}

/** Input of {@link TokensRepo.create}: at most one of `userId` and `runId`, and neither on an admin token. */
export interface CreateTokenInput {
  readonly tenantId: string;
  readonly name: string;
  readonly hash: string;
  readonly admin: boolean;
  readonly userId?: string | undefined;
  readonly runId?: string | undefined;
}

/** The `tokens` table. */
export interface TokensRepo {
  /**
   * Stores a token by its SHA-256 `hash`. A hash already stored: `ALREADY_EXISTS`; both a user
   * and a run, or an admin token bound to either: `INVALID_INPUT`; an unknown user or run:
   * `CONFLICT` (foreign key).
   */
  create(input: CreateTokenInput): Promise<TokenRecord>;
  /**
   * The live (not revoked) token with this hash, or `undefined`. A user token whose user is
   * revoked is not live. A run token is found whatever its run's state: whether the run is
   * still active is the access policy's question, asked on every request.
   */
  findByHash(hash: string): Promise<TokenGrant | undefined>;
  /**
   * Every token (live and revoked), newest first (ties by id), at most `limit`; with `after`,
   * only those after that `[createdAt, id]` in this order (a keyset page).
   */
  list(options?: { readonly limit?: number; readonly after?: readonly [createdAt: number, id: string] }): Promise<TokenRecord[]>;
  /** Revokes a token; false when there is no live token with this id. */
  revoke(id: string): Promise<boolean>;
}

/** Builds the tokens repository over `context.db` (a store or a transaction). */
export function createTokensRepo({ db, now }: RepoContext): TokensRepo {
  return {
    async create(input) {
      const userId = input.userId === undefined ? null : requireText(input.userId, 'userId');
      const runId = input.runId === undefined ? null : requireText(input.runId, 'runId');
      if ((userId !== null && runId !== null) || (input.admin && (userId !== null || runId !== null))) {
        throw new InputError('INVALID_INPUT', 'a token acts for a user, a run or a service, and only a service token may be admin', {
          data: { field: 'admin' },
        });
      }
      const row = {
        id: newId(),
        tenant_id: requireText(input.tenantId, 'tenantId'),
        name: requireText(input.name, 'name'),
        hash: requireText(input.hash, 'hash'),
        admin: input.admin ? 1 : 0,
        created_at: now(),
        revoked_at: null,
        user_id: userId,
        run_id: runId,
      };
      await db.insertInto('tokens').values(row).execute();
      return toToken(row);
    },
    async findByHash(hash) {
      const row = await db
        .selectFrom('tokens')
        .innerJoin('tenants', 'tenants.id', 'tokens.tenant_id')
        // A user or run of another tenant than the token's never joins, so such a token resolves to nothing.
        .leftJoin('users', (join) => join.onRef('users.id', '=', 'tokens.user_id').onRef('users.tenant_id', '=', 'tokens.tenant_id'))
        .leftJoin('runs', (join) => join.onRef('runs.id', '=', 'tokens.run_id').onRef('runs.tenant_id', '=', 'tokens.tenant_id'))
        .selectAll('tokens')
        .select([
          'tenants.name as tenant_name',
          'users.name as user_name',
          'users.role as user_role',
          'runs.id as joined_run_id',
          'runs.bindings as run_bindings',
        ])
        .where('tokens.hash', '=', hash)
        .where('tokens.revoked_at', 'is', null)
        // A user token lives only while its user does (revocation also revokes the tokens; this holds even if that was missed).
        .where((eb) => eb.or([eb('tokens.user_id', 'is', null), eb('users.revoked_at', 'is', null)]))
        .executeTakeFirst();
      if (row === undefined) return undefined;
      const user =
        row.user_id === null || row.user_name === null || row.user_role === null
          ? null
          : { id: row.user_id, name: row.user_name, role: row.user_role };
      if ((row.user_id !== null && user === null) || (row.run_id !== null && row.joined_run_id === null)) return undefined;
      const run =
        row.run_id === null
          ? null
          : { bindings: row.run_bindings === null ? null : (JSON.parse(row.run_bindings) as Record<string, unknown>) };
      return { ...toToken(row), tenantName: row.tenant_name, user, run };
    },
    async list(options = {}) {
      let query = db.selectFrom('tokens').selectAll();
      if (options.after !== undefined) query = query.where(afterNewest(options.after, 'asc'));
      if (options.limit !== undefined) query = query.limit(requireCount(options.limit, 'limit'));
      const rows = await query.orderBy('created_at', 'desc').orderBy('id').execute();
      return rows.map(toToken);
    },
    async revoke(id) {
      const result = await db
        .updateTable('tokens')
        .set({ revoked_at: now() })
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },
  };
}

function toToken(row: Selectable<TokensTable>): TokenRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    admin: row.admin === 1,
    userId: row.user_id,
    runId: row.run_id,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}
