import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../src/errors.js';
import type { SyncEndpoints, SyncFolders } from '../src/folders/sync/sync-engine.js';
import type { RunSandboxContext } from '../src/runs/run-extension.js';
import {
  body,
  existsIn,
  inSandbox,
  openSyncFixture,
  readIn,
  receiptCount,
  SYNC_CASES,
  type SyncFixture,
  sha,
  writeIn,
  writeReceipt,
} from './support/folder-sync.js';

/** A response lost after the other side applied the call: the call runs, then the caller hears an error. */
const lost = () => new StoreError('connection reset after the call was applied', { transient: true });

/** Doubles that lose the next response of one kind, once armed. */
function faults() {
  const armed = { restore: false, apply: false };
  return {
    armed,
    endpoints: (inner: SyncEndpoints): SyncEndpoints => ({
      checkpoint: (s, h, i) => inner.checkpoint(s, h, i),
      restore: async (s, h, i) => {
        const receipt = await inner.restore(s, h, i);
        if (armed.restore) {
          armed.restore = false;
          throw lost();
        }
        return receipt;
      },
    }),
    folders: (inner: SyncFolders): SyncFolders => ({
      limits: inner.limits,
      listContent: (ref) => inner.listContent(ref),
      applyStored: async (ref, ops) => {
        const outcomes = await inner.applyStored(ref, ops);
        if (armed.apply) {
          armed.apply = false;
          throw lost();
        }
        return outcomes;
      },
    }),
  };
}

async function stored(f: SyncFixture, ref: ReturnType<SyncFixture['ref']>): Promise<Array<[string, string | null]>> {
  return (await f.folders.list(ref)).files.map((e) => [e.path, e.sha256]);
}

describe.each(SYNC_CASES)('work-folder sync faults: $name', ({ provider, backend }) => {
  let f: SyncFixture;
  let n = 0;
  const owner = (p: string) => `${p}${++n}`;

  beforeAll(async () => {
    f = await openSyncFixture(backend, provider);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  describe('lost responses: the next save reconciles, the store ends right, no operation twice', () => {
    const setUp = async () => {
      const task = f.ref('task', owner('lost'));
      await f.folders.write(task, 'keep.txt', body('keep'), { operationId: 'k' });
      await f.folders.write(task, 'edit.txt', body('before'), { operationId: 'e' });
      await f.folders.write(task, 'drop.txt', body('drop'), { operationId: 'd' });
      const double = faults();
      const sync = f.sync(double);
      const ctx = await f.context(await f.run({ task: task.ownerId }));
      return { task, double, sync, ctx };
    };

    it('hydration', async () => {
      const { task, double, sync, ctx } = await setUp();
      double.armed.restore = true;
      await expect(sync.attach(ctx, 'cold')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect((await readIn(ctx.sandbox, 'task/edit.txt')).toString()).toBe('before');
      const receipts = await receiptCount(f.b, task);
      await sync.save(ctx, 'turn_end');
      expect(await receiptCount(f.b, task)).toBe(receipts);
      await writeIn(ctx.sandbox, 'task/edit.txt', 'a real edit');
      await sync.save(ctx, 'turn_end');
      expect(await receiptCount(f.b, task)).toBe(receipts + 1);
      expect(await stored(f, task)).toEqual([
        ['drop.txt', sha('drop')],
        ['edit.txt', sha('a real edit')],
        ['keep.txt', sha('keep')],
      ]);
    });

    it('refresh (an import and a removal)', async () => {
      const { task, double, sync, ctx } = await setUp();
      await sync.attach(ctx, 'cold');
      await sync.save(ctx, 'turn_end');
      await f.folders.write(task, 'edit.txt', body('changed by another writer'), { operationId: 'e2' });
      await f.folders.remove(task, 'drop.txt', { operationId: 'd2' });
      expect(await sync.requestRefresh(f.tenant, ctx.run.id, { scope: 'task', ownerId: task.ownerId })).toEqual({ queued: false });
      const running: RunSandboxContext = { ...ctx, run: { ...ctx.run, sandbox: { provider: ctx.sandbox.provider, id: ctx.sandbox.id } } };
      await f.b.meta.folderSync.update(
        { provider: ctx.sandbox.provider, sandboxId: ctx.sandbox.id, scope: 'task' },
        { refreshState: 'queued' },
      );
      double.armed.restore = true;
      await expect(sync.boundary(running)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect((await sync.status(f.tenant, task))[0]?.refresh).toMatchObject({ state: 'failed', error: { code: 'STORE_UNAVAILABLE' } });
      expect((await readIn(ctx.sandbox, 'task/edit.txt')).toString()).toBe('changed by another writer');
      expect(await existsIn(ctx.sandbox, 'task/drop.txt')).toBe(false);
      const receipts = await receiptCount(f.b, task);
      await sync.save(ctx, 'turn_end');
      expect(await receiptCount(f.b, task)).toBe(receipts);
      expect(await stored(f, task)).toEqual([
        ['edit.txt', sha('changed by another writer')],
        ['keep.txt', sha('keep')],
      ]);
    });

    it('an edit and a deletion; a failed save keeps the previous lastSavedAt', async () => {
      const { task, double, sync, ctx } = await setUp();
      await sync.attach(ctx, 'cold');
      await writeIn(ctx.sandbox, 'task/keep.txt', 'first save');
      await sync.save(ctx, 'periodic');
      const saved = (await sync.status(f.tenant, task))[0];
      expect(saved).toMatchObject({ state: 'saved', finalCheckpointAt: null });
      await writeIn(ctx.sandbox, 'task/edit.txt', 'edited');
      await inSandbox(ctx.sandbox, 'rm task/drop.txt');
      const receipts = await receiptCount(f.b, task);
      double.armed.apply = true;
      await expect(sync.save(ctx, 'turn_end')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      const failed = (await sync.status(f.tenant, task))[0];
      expect(failed).toMatchObject({
        state: 'failed',
        error: { code: 'STORE_UNAVAILABLE' },
        lastSavedAt: saved?.lastSavedAt,
        finalCheckpointAt: null,
      });
      // The lost batch was applied: its two receipts exist; the retry replays them, adding none.
      expect(await receiptCount(f.b, task)).toBe(receipts + 2);
      await sync.save(ctx, 'turn_end');
      expect(await receiptCount(f.b, task)).toBe(receipts + 2);
      expect(await stored(f, task)).toEqual([
        ['edit.txt', sha('edited')],
        ['keep.txt', sha('first save')],
      ]);
      expect((await sync.status(f.tenant, task))[0]).toMatchObject({ state: 'saved', error: null, finalCheckpointAt: expect.any(Number) });
    });
  });

  it('two runs sharing a project: different files both land; on one file the later accepted write wins, the earlier stays receipted', async () => {
    const project = f.ref('project', owner('shared'));
    await f.folders.write(project, 'same.txt', body('base'), { operationId: 'base' });
    const sync = f.sync();
    const a = await f.context(await f.run({ task: owner('ta'), project: project.ownerId }));
    const b = await f.context(await f.run({ task: owner('tb'), project: project.ownerId }));
    await sync.attach(a, 'cold');
    await sync.attach(b, 'cold');
    await writeIn(a.sandbox, 'project/from-a.txt', 'a');
    await writeIn(b.sandbox, 'project/from-b.txt', 'b');
    await sync.save(a, 'turn_end');
    await sync.save(b, 'turn_end');
    await writeIn(a.sandbox, 'project/same.txt', 'A wrote this');
    await writeIn(b.sandbox, 'project/same.txt', 'B wrote this');
    await sync.save(a, 'turn_end');
    await sync.save(b, 'turn_end');
    expect(await stored(f, project)).toEqual([
      ['from-a.txt', sha('a')],
      ['from-b.txt', sha('b')],
      ['same.txt', sha('B wrote this')],
    ]);
    expect(await writeReceipt(f.b, project, 'same.txt', 'A wrote this')).toBeDefined();
    const statuses = await sync.status(f.tenant, project);
    expect(statuses.map((s) => s.runId).sort()).toEqual([a.run.id, b.run.id].sort());
  });

  it('a revoked user: the user folder stops syncing with FORBIDDEN and keeps its files; the task folder still saves', async () => {
    const userName = owner('alice');
    // A user collection and a run's binding hold the user's row id, not the name.
    const { id: userId } = await f.b.meta.users.create({ tenantId: f.tenant.id, name: userName, role: 'member' });
    const task = f.ref('task', owner('rt'));
    const user = f.ref('user', userId);
    await f.folders.write(user, 'notes.txt', body('private'), { operationId: 'u' });
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId, user: userId }));
    await sync.attach(ctx, 'cold');
    expect((await readIn(ctx.sandbox, 'user/notes.txt')).toString()).toBe('private');
    await writeIn(ctx.sandbox, 'user/notes.txt', 'edited after revocation');
    await writeIn(ctx.sandbox, 'task/t.txt', 'task edit');
    await f.b.meta.users.revoke(f.tenant.id, userName);
    await sync.save(ctx, 'turn_end');
    expect((await sync.status(f.tenant, user))[0]).toMatchObject({ state: 'failed', error: { code: 'FORBIDDEN' } });
    expect((await sync.status(f.tenant, task))[0]).toMatchObject({ state: 'saved', error: null });
    expect(await stored(f, user)).toEqual([['notes.txt', sha('private')]]);
    expect(await stored(f, task)).toEqual([['t.txt', sha('task edit')]]);
    expect((await readIn(ctx.sandbox, 'user/notes.txt')).toString()).toBe('edited after revocation');
  });
});
