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

/**
 * The `idempotency_receipts` table. Receipts are scoped to the calling principal (its token
 * id): a key claimed by one principal is unknown to every other, even inside one tenant.
 */
export interface IdempotencyRepo {
  /**
   * Claims `key` of `principalId` for a request with `requestHash`, or reports what an earlier
   * request of the same principal with the key did. Receipts (of any key) created before `expireBeforeMs`, finished or not, are deleted
   * first: so receipts never outlive their retention, a key is reusable after it, and a crashed
   * request does not pin its key.
   */
  begin(input: { principalId: string; key: string; requestHash: string; expireBeforeMs: number }): Promise<IdempotencyBegin>;
  /** Stores the response of the request that claimed `key`; it must hold no credential. */
  finish(principalId: string, key: string, statusCode: number, response: string): Promise<void>;
  /** Forgets an unfinished claim (the request failed in a way a retry may fix). */
  abandon(principalId: string, key: string): Promise<void>;
}

/** Builds the idempotency repository over `context.db` (a store or a transaction). */
export function createIdempotencyRepo({ db, now }: RepoContext): IdempotencyRepo {
  const existing = (principalId: string, key: string) =>
    db.selectFrom('idempotency_receipts').selectAll().where('principal_id', '=', principalId).where('key', '=', key).executeTakeFirst();
  return {
    async begin({ principalId, key, requestHash, expireBeforeMs }) {
      await db.deleteFrom('idempotency_receipts').where('created_at', '<', expireBeforeMs).execute();
      try {
        await db
          .insertInto('idempotency_receipts')
          .values({
            principal_id: principalId,
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
      const row = await existing(principalId, key);
      if (row === undefined) return { kind: 'in_progress' }; // abandoned between our insert and read: the client retries
      if (row.request_hash !== requestHash) return { kind: 'mismatch' };
      if (row.status_code === null || row.response === null) return { kind: 'in_progress' };
      return { kind: 'replay', statusCode: row.status_code, response: row.response };
    },
    async finish(principalId, key, statusCode, response) {
      await db
        .updateTable('idempotency_receipts')
        .set({ status_code: statusCode, response, finished_at: now() })
        .where('principal_id', '=', principalId)
        .where('key', '=', key)
        .execute();
    },
    async abandon(principalId, key) {
      await db
        .deleteFrom('idempotency_receipts')
        .where('principal_id', '=', principalId)
        .where('key', '=', key)
        .where('finished_at', 'is', null)
        .execute();
    },
  };
}
