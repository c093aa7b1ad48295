import { randomUUID } from 'node:crypto';
import type { LockStore } from '@tanstack/ai-sandbox';
import { HoldfastError, InputError } from '../errors.js';
import type { LockGrant } from '../metadata/metadata-store.js';
import { currentFence, type HoldfastTenantStore } from './sandbox-store.js';

/** Default lifetime of a lock between renewals, in milliseconds. */
export const DEFAULT_LOCK_TTL_MS = 30_000;
/** Default longest wait for a held lock before `withLock` gives up, in milliseconds. */
export const DEFAULT_LOCK_WAIT_MS = 60_000;
/** First pause between attempts on a held lock, in milliseconds; doubles up to {@link MAX_LOCK_POLL_MS}. */
const FIRST_LOCK_POLL_MS = 10;
/** Longest pause between attempts on a held lock, in milliseconds. */
const MAX_LOCK_POLL_MS = 500;

/** Options of {@link HoldfastLockStore}. */
export interface HoldfastLockStoreOptions {
  /** Lifetime of a grant; a holder that stops renewing (it died, or stalled) loses the lock after it. Default {@link DEFAULT_LOCK_TTL_MS}. */
  readonly ttlMs?: number;
  /** Longest wait for a held lock; then `withLock` rejects with `TIMEOUT`. Default {@link DEFAULT_LOCK_WAIT_MS}. */
  readonly waitMs?: number;
  /**
   * Renew the grant every `ttlMs / 3` while `fn` runs (default true). Off, a holder keeps the
   * lock for `ttlMs` only: what tests use to stand for a holder that stalled.
   */
  readonly renew?: boolean;
}

/**
 * TanStack's `LockStore` over Holdfast's `fenced_locks` table: mutual exclusion across every
 * process on the same metadata store and tenant (two concurrent `ensure`s of one key create one
 * sandbox). Each `withLock` takes the lock under a fresh holder id and gets a fencing token
 * greater than every earlier one; `fn` runs with that fence in its async context, so the
 * {@link HoldfastSandboxStore} writes it makes are refused with `STALE_LEASE` once the lock has
 * expired and passed on. The grant is renewed while `fn` runs and released after it (only if it
 * is still this holder's). Waiting past `waitMs` rejects with `TIMEOUT`; `fn`'s own rejection is
 * passed through after the release.
 */
export class HoldfastLockStore implements LockStore {
  private readonly ttlMs: number;
  private readonly waitMs: number;
  private readonly renew: boolean;

  constructor(
    private readonly where: HoldfastTenantStore,
    options: HoldfastLockStoreOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? DEFAULT_LOCK_TTL_MS;
    this.waitMs = options.waitMs ?? DEFAULT_LOCK_WAIT_MS;
    this.renew = options.renew ?? true;
    for (const [field, value] of [
      ['ttlMs', this.ttlMs],
      ['waitMs', this.waitMs],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new InputError('INVALID_INPUT', `${field} must be a positive whole number of milliseconds`, { data: { field } });
      }
    }
  }

  /** Runs `fn` holding lock `key` (see the class). */
  async withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const grant = await this.acquire(key);
    const timer = this.renew ? setInterval(() => void this.renewQuietly(grant), Math.max(1, Math.floor(this.ttlMs / 3))) : undefined;
    try {
      return await currentFence.run({ lock: grant.name, token: grant.token }, fn);
    } finally {
      if (timer !== undefined) clearInterval(timer);
      await this.where.meta.locks.release(this.where.tenantId, grant);
    }
  }

  /** Takes lock `key` now or after waiting (bounded by `waitMs`); the grant's token fences what is done under it. */
  async acquire(key: string): Promise<LockGrant> {
    const holder = `withLock:${randomUUID()}`;
    const deadline = Date.now() + this.waitMs;
    let pause = FIRST_LOCK_POLL_MS;
    for (;;) {
      const grant = await this.where.meta.locks.acquire(this.where.tenantId, key, holder, this.ttlMs);
      if (grant !== undefined) return grant;
      if (Date.now() + pause > deadline) {
        throw new HoldfastError('TIMEOUT', `lock ${key} stayed held for ${this.waitMs} ms: its holder is still working, or retry later`, {
          data: { lock: key, waitMs: this.waitMs },
        });
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, MAX_LOCK_POLL_MS);
    }
  }

  private async renewQuietly(grant: LockGrant): Promise<void> {
    try {
      await this.where.meta.locks.renew(this.where.tenantId, grant, this.ttlMs);
    } catch {
      // A failed renewal is not fatal here: the grant then expires and fenced writes are refused.
    }
  }
}
