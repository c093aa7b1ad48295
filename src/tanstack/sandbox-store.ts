/**
 * `tanstack/`: Holdfast under TanStack AI's sandbox layer (`@tanstack/ai-sandbox`, an optional
 * peer dependency): a durable `SandboxStore` and `LockStore` on Holdfast's metadata store,
 * durable snapshots for any TanStack provider, and Holdfast's own sandboxes as a TanStack
 * provider. Imported as `holdfast/tanstack`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { SandboxRecord, SandboxStore } from '@tanstack/ai-sandbox';
import type { LockFence, MetadataStore, SandboxInstance, SandboxInstanceWriteOptions } from '../metadata/metadata-store.js';

/** The fence of the {@link HoldfastLockStore} lock the current async context runs under, if any. */
export const currentFence = new AsyncLocalStorage<LockFence>();

/** Later TanStack releases call the record {@link SandboxRecord} `SandboxInstanceRecord`. */
export type SandboxInstanceRecord = SandboxRecord;

/** Where a store keeps its rows: the metadata store and the tenant's id. */
export interface HoldfastTenantStore {
  readonly meta: MetadataStore;
  readonly tenantId: string;
}

/**
 * TanStack's `SandboxStore` (later: `SandboxInstanceStore`) over Holdfast's `sandbox_instances`
 * table: one row per key of one tenant, shared by every process on the same metadata store
 * (SQLite file or PostgreSQL), so a sandbox created by one process is resumed by the next.
 *
 * Contract (TanStack's, kept): `get` of a missing key resolves `null`; `upsert` fully replaces
 * the record (optional fields left out are cleared); `delete` of a missing key is a no-op.
 * Holdfast adds: every write bumps the row's `version` ({@link getVersioned},
 * {@link compareAndSet} for callers that want optimistic concurrency), and a write made inside
 * {@link HoldfastLockStore.withLock} of the same metadata store and tenant is fenced: once the
 * lock has passed to another holder (this one expired), it is refused with `STALE_LEASE`
 * and changes nothing. Bad records are `INVALID_INPUT`.
 */
export class HoldfastSandboxStore implements SandboxStore {
  constructor(private readonly where: HoldfastTenantStore) {}

  /** The record of `key`, or `null`. */
  async get(key: string): Promise<SandboxRecord | null> {
    const found = await this.getVersioned(key);
    if (found === null) return null;
    return {
      key: found.key,
      provider: found.provider,
      providerSandboxId: found.providerSandboxId,
      ...(found.latestSnapshotId === undefined ? {} : { latestSnapshotId: found.latestSnapshotId }),
      threadId: found.threadId,
      ...(found.latestRunId === undefined ? {} : { latestRunId: found.latestRunId }),
      updatedAt: found.updatedAt,
    };
  }

  /** The record of `key` with its version and the store's write time, or `null`. */
  async getVersioned(key: string): Promise<SandboxInstance | null> {
    return (await this.where.meta.sandboxInstances.get(this.where.tenantId, key)) ?? null;
  }

  /** Inserts or fully replaces `record` (fenced under a current lock, see the class). */
  async upsert(record: SandboxRecord): Promise<void> {
    await this.where.meta.sandboxInstances.put(this.where.tenantId, record, this.writeOptions());
  }

  /**
   * Writes `record` only if the stored version is `expectedVersion` (`null`: only if there is
   * none); resolves the stored record, or rejects with `CONFLICT` and writes nothing.
   */
  compareAndSet(record: SandboxRecord, expectedVersion: number | null): Promise<SandboxInstance> {
    return this.where.meta.sandboxInstances.put(this.where.tenantId, record, { ...this.writeOptions(), expectedVersion });
  }

  /** Deletes the record of `key`; a missing key is a no-op. */
  async delete(key: string): Promise<void> {
    await this.where.meta.sandboxInstances.delete(this.where.tenantId, key, this.writeOptions());
  }

  private writeOptions(): SandboxInstanceWriteOptions {
    const fence = currentFence.getStore();
    return fence === undefined ? {} : { fence };
  }
}

/** The name later TanStack releases give the store contract. */
export const HoldfastSandboxInstanceStore = HoldfastSandboxStore;
/** Instance type of {@link HoldfastSandboxInstanceStore}. */
export type HoldfastSandboxInstanceStore = HoldfastSandboxStore;
