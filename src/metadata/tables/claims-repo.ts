import type { RepoContext } from './repo-context.js';

/**
 * Named, expiring claims (`service_claims`): at most one holder per name at a time, so a
 * periodic job of the service (the GC sweep) runs on one replica at a time. A holder that
 * dies loses its claim when it expires; nothing has to release it.
 */
export interface ClaimsRepo {
  /**
   * Takes or renews claim `name` for `holder` until `now + ttlMs` (the store's clock). Resolves
   * true when `holder` holds it afterwards: it was free, expired, or already `holder`'s.
   * Atomic on both engines (one upsert), so of two racing claimants exactly one wins.
   */
  claim(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the claim up if `holder` holds it (idempotent). */
  release(name: string, holder: string): Promise<void>;
  /** The current holder and expiry, or undefined when nobody ever claimed `name`. */
  holder(name: string): Promise<{ holder: string; expiresAt: number } | undefined>;
}

/** Builds the claims repository over `context.db`. */
export function createClaimsRepo({ db, now }: RepoContext): ClaimsRepo {
  return {
    async claim(name, holder, ttlMs) {
      const at = now();
      await db
        .insertInto('service_claims')
        .values({ name, holder, expires_at: at + ttlMs })
        .onConflict((oc) =>
          oc
            .column('name')
            .doUpdateSet({ holder, expires_at: at + ttlMs })
            .where((eb) => eb.or([eb('service_claims.expires_at', '<=', at), eb('service_claims.holder', '=', holder)])),
        )
        .execute();
      const row = await db.selectFrom('service_claims').select('holder').where('name', '=', name).executeTakeFirst();
      return row?.holder === holder;
    },
    async release(name, holder) {
      await db.deleteFrom('service_claims').where('name', '=', name).where('holder', '=', holder).execute();
    },
    async holder(name) {
      const row = await db.selectFrom('service_claims').selectAll().where('name', '=', name).executeTakeFirst();
      return row === undefined ? undefined : { holder: row.holder, expiresAt: row.expires_at };
    },
  };
}
