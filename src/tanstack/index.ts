/**
 * `holdfast/tanstack`: durable sandboxes for TanStack AI (`@tanstack/ai`, `@tanstack/ai-sandbox`,
 * optional peer dependencies of Holdfast). See `docs/tanstack.md`.
 */
export { byteSafeCommand, commandHandle, parseByteSafeAnswer, shellQuote, TANSTACK_WORKSPACE_ROOT } from './command-handle.js';
export { type HoldfastDurabilityOptions, withHoldfastDurability, workspaceNameFor } from './durability.js';
export { holdfastSandboxProvider, MAX_ARGS_WRITE_BYTES, TANSTACK_KEY_LABEL } from './holdfast-provider.js';
export { type HoldfastTanStackStores, holdfastStores, withHoldfastStores } from './holdfast-stores.js';
export { DEFAULT_LOCK_TTL_MS, DEFAULT_LOCK_WAIT_MS, HoldfastLockStore, type HoldfastLockStoreOptions } from './lock-store.js';
export {
  currentFence,
  HoldfastSandboxInstanceStore,
  HoldfastSandboxStore,
  type HoldfastTenantStore,
  type SandboxInstanceRecord,
} from './sandbox-store.js';
