import { isHoldfastError } from '../../errors.js';
import type { RepoContext } from './repo-context.js';

/** What {@link IdempotencyRepo.begin} found. */
export type IdempotencyBegin =
  /** This request is the first with the key: run it, then `finish` (or `abandon`). */
  | { readonly kind: 'new' }
  /** A request with the key finished: answer with its stored response. */
  | { readonly kind: 'replay'; readonly statusCode: number; readonly response: string }
  /** A request with the key is still running. */
  | { readonly kind: 'in_progress' }
  /** The key was used for a different request. */
  | { readonly kind: 'mismatch' };

/** The `idempotency_keys` table. */
export interface IdempotencyRepo {
  /**
   * Claims `key` for a request with `requestHash`, or reports what an earlier request with the
   * key did. Receipts (of any key) created before `expireBeforeMs`, finished or not, are deleted
   * first: so receipts never outlive their retention, a key is reusable after it, and a crashed
   * request does not pin its key.
   */
  begin(input: { tenantId: string; key: string; requestHash: string; expireBeforeMs: number }): Promise<IdempotencyBegin>;
  /** Stores the response of the request that claimed `key`. */
  finish(tenantId: string, key: string, statusCode: number, response: string): Promise<void>;
  /** Forgets an unfinished claim (the request failed in a way a retry may fix). */
  abandon(tenantId: string, key: string): Promise<void>;
}

/** Builds the idempotency repository over `context.db` (a store or a transaction). */
export function createIdempotencyRepo({ db, now }: RepoContext): IdempotencyRepo {
  const existing = (tenantId: string, key: string) =>
    db.selectFrom('idempotency_keys').selectAll().where('tenant_id', '=', tenantId).where('key', '=', key).executeTakeFirst();
  return {
    async begin({ tenantId, key, requestHash, expireBeforeMs }) {
      await db.deleteFrom('idempotency_keys').where('created_at', '<', expireBeforeMs).execute();
      try {
        await db
          .insertInto('idempotency_keys')
          .values({
            tenant_id: tenantId,
            key,
            request_hash: requestHash,
            status_code: null,
            response: null,
            created_at: now(),
            finished_at: null,
          })
          .execute();
        return { kind: 'new' };
      } catch (error) {
        if (!isHoldfastError(error, 'ALREADY_EXISTS')) throw error;
      }
      const row = await existing(tenantId, key);
      if (row === undefined) return { kind: 'in_progress' }; // abandoned between our insert and read: the client retries
      if (row.request_hash !== requestHash) return { kind: 'mismatch' };
      if (row.status_code === null || row.response === null) return { kind: 'in_progress' };
      return { kind: 'replay', statusCode: row.status_code, response: row.response };
    },
    async finish(tenantId, key, statusCode, response) {
      await db
        .updateTable('idempotency_keys')
        .set({ status_code: statusCode, response, finished_at: now() })
        .where('tenant_id', '=', tenantId)
        .where('key', '=', key)
        .execute();
    },
    async abandon(tenantId, key) {
      await db
        .deleteFrom('idempotency_keys')
        .where('tenant_id', '=', tenantId)
        .where('key', '=', key)
        .where('finished_at', 'is', null)
        .execute();
    },
  };
}
