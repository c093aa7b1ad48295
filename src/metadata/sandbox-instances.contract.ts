import { describe, expect, it } from 'vitest';
import type { HoldfastError } from '../errors.js';
import { type ContractContext, uniqueName } from './metadata-contract-support.contract.js';
import type { MetadataStore, SandboxInstanceInput } from './metadata-store.js';
import { MAX_LOCK_TTL_MS, MAX_SANDBOX_KEY_LENGTH } from './metadata-store.js';

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    return (error as HoldfastError).code;
  }
  return 'resolved';
}

function record(key: string, overrides: Partial<SandboxInstanceInput> = {}): SandboxInstanceInput {
  return { key, provider: 'bwrap', providerSandboxId: 'sb-1', threadId: 'thread-1', updatedAt: 1000, ...overrides };
}

async function tenant(store: MetadataStore): Promise<string> {
  return (await store.tenants.create({ name: uniqueName('t') })).id;
}

/**
 * Contract cases of the sandbox records (`sandbox_instances`, `sandbox_snapshot_labels`) and the
 * fenced locks (`fenced_locks`) of migration 13: versions and compare-and-set, tenant scope,
 * fencing tokens that only grow, expiry, and stale holders refused.
 */
export function describeSandboxInstancesCases(ctx: ContractContext): void {
  describe('sandbox records', () => {
    it('stores, fully replaces (clearing left-out fields) and deletes a record, counting versions', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      expect(await store.sandboxInstances.get(t, 'k')).toBeUndefined();
      const first = await store.sandboxInstances.put(t, record('k', { latestSnapshotId: 'cp-1', latestRunId: 'run-1' }));
      expect(first).toMatchObject({ key: 'k', version: 1, latestSnapshotId: 'cp-1', latestRunId: 'run-1', updatedAt: 1000 });
      const second = await store.sandboxInstances.put(t, record('k', { providerSandboxId: 'sb-2', updatedAt: 2000 }));
      expect(second.version).toBe(2);
      const read = await store.sandboxInstances.get(t, 'k');
      expect(read).toEqual(second);
      expect(read).not.toHaveProperty('latestSnapshotId');
      expect(read).not.toHaveProperty('latestRunId');
      expect(read?.providerSandboxId).toBe('sb-2');
      expect(await store.sandboxInstances.delete(t, 'k')).toBe(true);
      expect(await store.sandboxInstances.delete(t, 'k')).toBe(false);
      expect(await store.sandboxInstances.get(t, 'k')).toBeUndefined();
      // A new record of a deleted key starts again at version 1.
      expect((await store.sandboxInstances.put(t, record('k'))).version).toBe(1);
    });

    it('compare-and-set refuses a stale or missing version with CONFLICT and changes nothing', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      await store.sandboxInstances.put(t, record('k'), { expectedVersion: null });
      expect(await codeOf(store.sandboxInstances.put(t, record('k', { providerSandboxId: 'x' }), { expectedVersion: null }))).toBe(
        'CONFLICT',
      );
      const v2 = await store.sandboxInstances.put(t, record('k', { providerSandboxId: 'sb-2' }), { expectedVersion: 1 });
      expect(v2.version).toBe(2);
      expect(await codeOf(store.sandboxInstances.put(t, record('k', { providerSandboxId: 'stale' }), { expectedVersion: 1 }))).toBe(
        'CONFLICT',
      );
      expect(await codeOf(store.sandboxInstances.put(t, record('other'), { expectedVersion: 1 }))).toBe('CONFLICT');
      expect(await codeOf(store.sandboxInstances.delete(t, 'k', { expectedVersion: 1 }))).toBe('CONFLICT');
      expect(await store.sandboxInstances.get(t, 'k')).toEqual(v2);
      expect(await store.sandboxInstances.get(t, 'other')).toBeUndefined();
      expect(await store.sandboxInstances.delete(t, 'k', { expectedVersion: 2 })).toBe(true);
    });

    it('of two stores racing a compare-and-set on one version, exactly one wins', async () => {
      const database = await ctx.freshDatabase();
      const [a, b] = [await database.open(), await database.open()];
      const t = await tenant(a);
      await a.sandboxInstances.put(t, record('k'));
      const results = await Promise.allSettled([
        a.sandboxInstances.put(t, record('k', { providerSandboxId: 'from-a' }), { expectedVersion: 1 }),
        b.sandboxInstances.put(t, record('k', { providerSandboxId: 'from-b' }), { expectedVersion: 1 }),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const stored = await a.sandboxInstances.get(t, 'k');
      expect(stored?.version).toBe(2);
      const winner = results.find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<{ providerSandboxId: string }>;
      expect(stored?.providerSandboxId).toBe(winner.value.providerSandboxId);
    });

    it('a key of one tenant is invisible to another, and deleting there touches nothing', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const [t1, t2] = [await tenant(store), await tenant(store)];
      await store.sandboxInstances.put(t1, record('shared', { providerSandboxId: 'one' }));
      expect(await store.sandboxInstances.get(t2, 'shared')).toBeUndefined();
      expect(await store.sandboxInstances.delete(t2, 'shared')).toBe(false);
      await store.sandboxInstances.put(t2, record('shared', { providerSandboxId: 'two' }));
      expect((await store.sandboxInstances.get(t1, 'shared'))?.providerSandboxId).toBe('one');
      expect((await store.sandboxInstances.get(t2, 'shared'))?.version).toBe(1);
    });

    it('refuses empty and over-long fields and a negative time with INVALID_INPUT, storing nothing', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      expect(await codeOf(store.sandboxInstances.put(t, record('')))).toBe('INVALID_INPUT');
      expect(await codeOf(store.sandboxInstances.put(t, record('k'.repeat(MAX_SANDBOX_KEY_LENGTH + 1))))).toBe('INVALID_INPUT');
      expect(await codeOf(store.sandboxInstances.put(t, record('k', { providerSandboxId: '' })))).toBe('INVALID_INPUT');
      expect(await codeOf(store.sandboxInstances.put(t, record('k', { updatedAt: -1 })))).toBe('INVALID_INPUT');
      expect(await codeOf(store.sandboxInstances.put(t, record('k'), { expectedVersion: -1 }))).toBe('INVALID_INPUT');
      expect(await store.sandboxInstances.get(t, 'k')).toBeUndefined();
    });

    it('keeps snapshot labels by checkpoint id per tenant', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const [t1, t2] = [await tenant(store), await tenant(store)];
      const label = { checkpointId: 'cp-1', workspaceId: 'ws-1', label: 'after-run-r1', threadId: 'th', runId: 'r1', sandboxKey: 'k' };
      await store.sandboxInstances.putSnapshotLabel(t1, label);
      expect(await store.sandboxInstances.findSnapshotLabel(t1, 'cp-1')).toMatchObject(label);
      expect(await store.sandboxInstances.findSnapshotLabel(t2, 'cp-1')).toBeUndefined();
    });
  });

  describe('fenced locks', () => {
    it('grants one holder at a time, with a token that grows on every acquisition and survives release', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      const first = await store.locks.acquire(t, 'sandbox:k', 'a', 60_000);
      expect(first?.token).toBe(1);
      expect(await store.locks.acquire(t, 'sandbox:k', 'b', 60_000)).toBeUndefined();
      expect(await store.locks.acquire(t, 'sandbox:k', 'a', 60_000)).toBeUndefined();
      expect(await store.locks.release(t, first as NonNullable<typeof first>)).toBe(true);
      expect(await store.locks.release(t, first as NonNullable<typeof first>)).toBe(false);
      const second = await store.locks.acquire(t, 'sandbox:k', 'b', 60_000);
      expect(second?.token).toBe(2);
      expect((await store.locks.state(t, 'sandbox:k'))?.holder).toBe('b');
      // Another tenant's lock of the same name is another lock.
      expect((await store.locks.acquire(await tenant(store), 'sandbox:k', 'c', 60_000))?.token).toBe(1);
    });

    it('an expired lock goes to the next acquirer with a greater token; the stale holder can neither renew nor write', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      const stale = await store.locks.acquire(t, 'sandbox:k', 'a', 1);
      if (stale === undefined) throw new Error('no grant');
      await store.sandboxInstances.put(t, record('k', { providerSandboxId: 'before' }));
      // The contract's clock moves by at least 1 ms per statement: the 1 ms grant has expired.
      const fresh = await store.locks.acquire(t, 'sandbox:k', 'b', 60_000);
      expect(fresh?.token).toBe(stale.token + 1);
      expect(await store.locks.renew(t, stale, 60_000)).toBeUndefined();
      const fence = { lock: 'sandbox:k', token: stale.token };
      expect(await codeOf(store.sandboxInstances.put(t, record('k', { providerSandboxId: 'stale' }), { fence }))).toBe('STALE_LEASE');
      expect(await codeOf(store.sandboxInstances.delete(t, 'k', { fence }))).toBe('STALE_LEASE');
      expect(await codeOf(store.locks.requireCurrent(t, fence))).toBe('STALE_LEASE');
      expect((await store.sandboxInstances.get(t, 'k'))?.providerSandboxId).toBe('before');
      const current = { lock: 'sandbox:k', token: (fresh as NonNullable<typeof fresh>).token };
      expect((await store.sandboxInstances.put(t, record('k', { providerSandboxId: 'after' }), { fence: current })).version).toBe(2);
      expect(await store.locks.renew(t, fresh as NonNullable<typeof fresh>, 60_000)).toBeGreaterThan(0);
      // A released lock fences too: its token is no longer held.
      await store.locks.release(t, fresh as NonNullable<typeof fresh>);
      expect(await codeOf(store.sandboxInstances.put(t, record('k'), { fence: current }))).toBe('STALE_LEASE');
      expect(await codeOf(store.locks.requireCurrent(t, { lock: 'never-taken', token: 1 }))).toBe('STALE_LEASE');
    });

    it('of stores racing for one lock exactly one gets it', async () => {
      const database = await ctx.freshDatabase();
      const stores = [await database.open(), await database.open(), await database.open()];
      const t = await tenant(stores[0] as MetadataStore);
      const grants = await Promise.all(stores.map((s, i) => s.locks.acquire(t, 'race', `holder-${i}`, 60_000)));
      expect(grants.filter((g) => g !== undefined)).toHaveLength(1);
    });

    it('refuses bad names, holders and ttls with INVALID_INPUT', async () => {
      const store = await (await ctx.freshDatabase()).open();
      const t = await tenant(store);
      expect(await codeOf(store.locks.acquire(t, '', 'a', 1000))).toBe('INVALID_INPUT');
      expect(await codeOf(store.locks.acquire(t, 'x'.repeat(2000), 'a', 1000))).toBe('INVALID_INPUT');
      expect(await codeOf(store.locks.acquire(t, 'n', '', 1000))).toBe('INVALID_INPUT');
      expect(await codeOf(store.locks.acquire(t, 'n', 'a', 0))).toBe('INVALID_INPUT');
      expect(await codeOf(store.locks.acquire(t, 'n', 'a', MAX_LOCK_TTL_MS + 1))).toBe('INVALID_INPUT');
      expect(await store.locks.state(t, 'n')).toBeUndefined();
    });
  });
}
