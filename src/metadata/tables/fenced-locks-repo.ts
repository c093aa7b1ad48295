import type { Kysely } from 'kysely';
import { ConflictError, InputError } from '../../errors.js';
import type { Database } from '../schema.js';
import { type RepoContext, requireCount, requireText } from './repo-context.js';

/** Longest lock name, in UTF-16 code units (a lock names a sandbox key with a short prefix). */
export const MAX_LOCK_NAME_LENGTH = 1024;
/** Longest lock time-to-live a holder may ask for, in milliseconds (one day). */
export const MAX_LOCK_TTL_MS = 24 * 60 * 60 * 1000;

/** A held lock: who holds it, its fencing token and until when (the store's clock, epoch ms). */
export interface LockGrant {
  readonly name: string;
  readonly holder: string;
  /** Grows by one with every acquisition of this name in this tenant; never reused, never reset. */
  readonly token: number;
  readonly expiresAt: number;
}

/** What a fenced write carries: the lock it was made under and the token it got then. */
export interface LockFence {
  readonly lock: string;
  readonly token: number;
}

/** The state of a lock as stored (released locks keep their last token). */
export interface LockState {
  readonly name: string;
  readonly holder: string | null;
  readonly token: number;
  readonly expiresAt: number;
}

/**
 * The `fenced_locks` table: named, expiring locks of one tenant, each with a fencing token. At
 * most one holder at a time; every acquisition gets a token greater than every earlier one of
 * that name, so whatever a holder does under its token can be refused once someone else holds
 * the lock ({@link FencedLocksRepo.requireCurrent}). A holder that dies loses the lock when it
 * expires; nothing has to release it. Lock names of different tenants never meet.
 */
export interface FencedLocksRepo {
  /**
   * Takes lock `name` for `holder` until `now + ttlMs`: resolves its grant when the lock was
   * free (never taken, released or expired), `undefined` when someone holds it, `holder`
   * included (a lock is not re-entrant: use a fresh holder id per acquisition). One statement,
   * so of racing acquirers exactly one wins. `INVALID_INPUT` for an empty or over-long name or
   * holder, or a ttl outside 1 ms .. {@link MAX_LOCK_TTL_MS}.
   */
  acquire(tenantId: string, name: string, holder: string, ttlMs: number): Promise<LockGrant | undefined>;
  /**
   * Extends a held, unexpired lock to `now + ttlMs`. Resolves the new expiry, or `undefined` when
   * the grant is no longer current (expired, released, or taken by another token): the holder
   * has lost the lock and must stop.
   */
  renew(tenantId: string, grant: LockGrant, ttlMs: number): Promise<number | undefined>;
  /** Releases the lock if `grant` is still its current one (idempotent); the token is kept. Resolves true when it released. */
  release(tenantId: string, grant: LockGrant): Promise<boolean>;
  /**
   * Resolves when `fence` is the current, unexpired grant of its lock; rejects with
   * `STALE_LEASE` otherwise. Inside a transaction the lock row is locked (PostgreSQL) or the
   * writers are serialised (SQLite: a write after the check fails if another connection wrote
   * in between), so a write after the check is made under a lock nobody else took meanwhile.
   */
  requireCurrent(tenantId: string, fence: LockFence): Promise<void>;
  /** The lock as stored, or undefined when it was never taken. */
  state(tenantId: string, name: string): Promise<LockState | undefined>;
}

function checkTtl(ttlMs: number): number {
  requireCount(ttlMs, 'ttlMs');
  if (ttlMs < 1 || ttlMs > MAX_LOCK_TTL_MS) {
    throw new InputError('INVALID_INPUT', `ttlMs must be between 1 and ${MAX_LOCK_TTL_MS} ms`, { data: { field: 'ttlMs' } });
  }
  return ttlMs;
}

function checkName(name: string): string {
  requireText(name, 'lock');
  if (name.length > MAX_LOCK_NAME_LENGTH) {
    throw new InputError('INVALID_INPUT', `lock names are at most ${MAX_LOCK_NAME_LENGTH} characters`, { data: { field: 'lock' } });
  }
  return name;
}

/** Checks a fence against the stored lock row in `db` (a transaction for a fenced write). */
export async function requireCurrentFence(
  { db, dialect, now }: { db: Kysely<Database>; dialect: RepoContext['dialect']; now: () => number },
  tenantId: string,
  fence: LockFence,
): Promise<void> {
  checkName(fence.lock);
  requireCount(fence.token, 'token');
  let query = db
    .selectFrom('fenced_locks')
    .select(['holder', 'token', 'expires_at'])
    .where('tenant_id', '=', tenantId)
    .where('name', '=', fence.lock);
  if (dialect === 'postgres' && db.isTransaction) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  const at = now();
  if (row === undefined || row.token !== fence.token || row.holder === null || row.expires_at <= at) {
    throw new ConflictError(
      'STALE_LEASE',
      `lock ${fence.lock} is no longer held with token ${fence.token}: another holder took it or it expired; stop and start over under a new lock`,
      { data: { lock: fence.lock, token: fence.token, currentToken: row?.token ?? null } },
    );
  }
}

/** Builds the fenced-locks repository over `context.db`. */
export function createFencedLocksRepo(context: RepoContext): FencedLocksRepo {
  const { db, now } = context;
  return {
    async acquire(tenantId, name, holder, ttlMs) {
      checkName(name);
      requireText(holder, 'holder');
      checkTtl(ttlMs);
      const at = now();
      const row = await db
        .insertInto('fenced_locks')
        .values({ tenant_id: tenantId, name, holder, token: 1, expires_at: at + ttlMs })
        .onConflict((oc) =>
          oc
            .columns(['tenant_id', 'name'])
            .doUpdateSet((eb) => ({ holder, expires_at: at + ttlMs, token: eb('fenced_locks.token', '+', 1) }))
            .where((eb) => eb.or([eb('fenced_locks.holder', 'is', null), eb('fenced_locks.expires_at', '<=', at)])),
        )
        .returning(['token', 'expires_at'])
        .executeTakeFirst();
      return row === undefined ? undefined : { name, holder, token: row.token, expiresAt: row.expires_at };
    },
    async renew(tenantId, grant, ttlMs) {
      checkTtl(ttlMs);
      const at = now();
      const row = await db
        .updateTable('fenced_locks')
        .set({ expires_at: at + ttlMs })
        .where('tenant_id', '=', tenantId)
        .where('name', '=', grant.name)
        .where('holder', '=', grant.holder)
        .where('token', '=', grant.token)
        .where('expires_at', '>', at)
        .returning('expires_at')
        .executeTakeFirst();
      return row?.expires_at;
    },
    async release(tenantId, grant) {
      const at = now();
      const result = await db
        .updateTable('fenced_locks')
        .set({ holder: null, expires_at: at })
        .where('tenant_id', '=', tenantId)
        .where('name', '=', grant.name)
        .where('holder', '=', grant.holder)
        .where('token', '=', grant.token)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },
    requireCurrent: (tenantId, fence) => requireCurrentFence(context, tenantId, fence),
    async state(tenantId, name) {
      const row = await db
        .selectFrom('fenced_locks')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('name', '=', name)
        .executeTakeFirst();
      return row === undefined ? undefined : { name: row.name, holder: row.holder, token: row.token, expiresAt: row.expires_at };
    },
  };
}
