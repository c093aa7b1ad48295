import type { Selectable } from 'kysely';
import type { TokensTable } from '../schema.js';
import { newId, type RepoContext, requireText } from './repo-context.js';

/** An API token as stored: its hash, never the token itself. */
export interface TokenRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  /** Admin tokens may also create tenants and tokens. */
  readonly admin: boolean;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/** The `tokens` table. */
export interface TokensRepo {
  /** Stores a token by its SHA-256 `hash`. A hash already stored: `ALREADY_EXISTS`. */
  create(input: { tenantId: string; name: string; hash: string; admin: boolean }): Promise<TokenRecord>;
  /** The live (not revoked) token with this hash, with its tenant's name, or `undefined`. */
  findByHash(hash: string): Promise<(TokenRecord & { readonly tenantName: string }) | undefined>;
  /** Every token (live and revoked), newest first. */
  list(): Promise<TokenRecord[]>;
  /** Revokes a token; false when there is no live token with this id. */
  revoke(id: string): Promise<boolean>;
}

/** Builds the tokens repository over `context.db` (a store or a transaction). */
export function createTokensRepo({ db, now }: RepoContext): TokensRepo {
  return {
    async create(input) {
      const row = {
        id: newId(),
        tenant_id: requireText(input.tenantId, 'tenantId'),
        name: requireText(input.name, 'name'),
        hash: requireText(input.hash, 'hash'),
        admin: input.admin ? 1 : 0,
        created_at: now(),
        revoked_at: null,
      };
      await db.insertInto('tokens').values(row).execute();
      return toToken(row);
    },
    async findByHash(hash) {
      const row = await db
        .selectFrom('tokens')
        .innerJoin('tenants', 'tenants.id', 'tokens.tenant_id')
        .selectAll('tokens')
        .select('tenants.name as tenant_name')
        .where('tokens.hash', '=', hash)
        .where('tokens.revoked_at', 'is', null)
        .executeTakeFirst();
      return row === undefined ? undefined : { ...toToken(row), tenantName: row.tenant_name };
    },
    async list() {
      const rows = await db.selectFrom('tokens').selectAll().orderBy('created_at', 'desc').execute();
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
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}
