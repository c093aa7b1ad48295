import { type ChatMiddleware, defineChatMiddleware } from '@tanstack/ai';
import { LocksCapability, provideLocks, provideSandboxStore, SandboxStoreCapability } from '@tanstack/ai-sandbox';
import type { Holdfast } from '../holdfast.js';
import { HoldfastLockStore, type HoldfastLockStoreOptions } from './lock-store.js';
import { HoldfastSandboxStore } from './sandbox-store.js';

/** The durable stores of one Holdfast tenant, ready to hand to TanStack. */
export interface HoldfastTanStackStores {
  readonly store: HoldfastSandboxStore;
  readonly locks: HoldfastLockStore;
}

/** A {@link HoldfastSandboxStore} and a {@link HoldfastLockStore} on `hf`'s metadata store, in its tenant. */
export function holdfastStores(hf: Holdfast, lockOptions: HoldfastLockStoreOptions = {}): HoldfastTanStackStores {
  const where = { meta: hf.meta, tenantId: hf.tenant.id };
  return { store: new HoldfastSandboxStore(where), locks: new HoldfastLockStore(where, lockOptions) };
}

/**
 * A chat middleware that provides `stores` as TanStack's sandbox store and lock capabilities;
 * put it before `withSandbox(...)` in `chat({ middleware })`, so `ensure` resumes and locks
 * through Holdfast instead of the in-memory defaults.
 */
export function withHoldfastStores(stores: HoldfastTanStackStores): ChatMiddleware {
  return defineChatMiddleware({
    name: 'holdfast-sandbox-stores',
    provides: [SandboxStoreCapability, LocksCapability],
    setup(ctx) {
      provideSandboxStore(ctx, stores.store);
      provideLocks(ctx, stores.locks);
    },
  });
}
