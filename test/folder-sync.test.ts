import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from './support/error-code.js';
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
import { legacyHoldfastToken } from './support/secret-samples.js';

describe.each(SYNC_CASES)('work-folder sync: $name', ({ provider, backend }) => {
  let f: SyncFixture;
  let n = 0;
  const owner = (p: string) => `${p}${++n}`;

  beforeAll(async () => {
    f = await openSyncFixture(backend, provider);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  it('hydrates a cold sandbox with the bound collections only; the environment names every directory', async () => {
    const task = f.ref('task', owner('t'));
    await f.folders.write(task, 'a/b/run.sh', body('#!/bin/sh\necho hi\n'), { operationId: 'w1', executable: true });
    await f.folders.write(task, 'empty', body(''), { operationId: 'w2' });
    await f.folders.mkdir(task, 'c/d', { operationId: 'w3' });
    const big = Buffer.alloc(3 * 1024 * 1024 + 5, 7);
    await f.folders.write(task, 'a/big.bin', body(big), { operationId: 'w4' });
    const run = await f.run({ task: task.ownerId });
    const ctx = await f.context(run);
    const env = await f.sync().attach(ctx, 'cold');
    const home = ctx.sandbox.agentHome;
    expect(env).toMatchObject({
      HOLDFAST_HOME: home,
      HOLDFAST_TASK_DIR: `${home}/task`,
      HOLDFAST_AGENT_DIR: `${home}/agent`,
      HOLDFAST_USER_DIR: `${home}/user`,
      HOLDFAST_PROJECT_DIR: `${home}/project`,
      HOLDFAST_REPOS_DIR: `${home}/repos`,
    });
    expect(env.HOLDFAST_RUN_TOKEN).toMatch(/^holdfast_/);
    expect((await readIn(ctx.sandbox, 'task/a/b/run.sh')).toString()).toBe('#!/bin/sh\necho hi\n');
    expect(sha(await readIn(ctx.sandbox, 'task/a/big.bin'))).toBe(sha(big));
    expect((await readIn(ctx.sandbox, 'task/empty')).length).toBe(0);
    expect(
      (await inSandbox(ctx.sandbox, '[ -x task/a/b/run.sh ] && [ ! -x task/empty ] && [ -d task/c/d ] && echo ok')).toString().trim(),
    ).toBe('ok');
    for (const dir of ['agent', 'user', 'project', 'repos']) {
      expect((await inSandbox(ctx.sandbox, `ls -A ${dir} | wc -l`)).toString().trim()).toBe('0');
    }
    const [status] = await f.sync().status(f.tenant, task);
    expect(status).toMatchObject({ runId: run.id, state: 'never_saved', lastSavedAt: null, finalCheckpointAt: null, active: false });
  });

  it('a warm attach saves local edits first, then downloads what changed meanwhile; saves never send an unchanged stale copy', async () => {
    const project = f.ref('project', owner('p'));
    await f.folders.write(project, 'shared.txt', body('v1'), { operationId: 's1' });
    await f.folders.write(project, 'mine.txt', body('old'), { operationId: 's2' });
    const sync = f.sync();
    const run = await f.run({ project: project.ownerId });
    const ctx = await f.context(run);
    await sync.attach(ctx, 'cold');
    await writeIn(ctx.sandbox, 'project/mine.txt', 'edited in the sandbox');
    await writeIn(ctx.sandbox, 'project/new/file.txt', 'new');
    // Another writer changes the shared file meanwhile: the sandbox still holds v1, untouched.
    await f.folders.write(project, 'shared.txt', body('v2 from elsewhere'), { operationId: 's3' });
    const receipts = await receiptCount(f.b, project);
    await sync.attach(ctx, 'warm');
    expect((await readIn(ctx.sandbox, 'project/shared.txt')).toString()).toBe('v2 from elsewhere');
    const read = async (p: string) => {
      const opened = await f.folders.open(project, p);
      const parts: Uint8Array[] = [];
      for await (const part of opened.body) parts.push(part);
      return Buffer.concat(parts).toString();
    };
    expect(await read('mine.txt')).toBe('edited in the sandbox');
    expect(await read('new/file.txt')).toBe('new');
    expect(await read('shared.txt')).toBe('v2 from elsewhere');
    // mine.txt, new (mkdir), new/file.txt: three operations, nothing for the stale shared.txt.
    expect(await receiptCount(f.b, project)).toBe(receipts + 3);
    await sync.save(ctx, 'periodic');
    expect(await receiptCount(f.b, project)).toBe(receipts + 3);
    const [status] = await sync.status(f.tenant, project);
    expect(status).toMatchObject({ state: 'saved', finalCheckpointAt: null, error: null, active: false });
    expect(status?.lastSavedAt).toEqual(expect.any(Number));
    await sync.save(ctx, 'turn_end');
    expect((await sync.status(f.tenant, project))[0]?.finalCheckpointAt).toEqual(expect.any(Number));
  });

  it('a deletion in the sandbox trashes the file; a deletion imported into it is not repeated against a newer shared file', async () => {
    const task = f.ref('task', owner('d'));
    await f.folders.write(task, 'gone-here.txt', body('x'), { operationId: 'a' });
    await f.folders.write(task, 'gone-there.txt', body('y'), { operationId: 'b' });
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    await sync.attach(ctx, 'cold');
    await inSandbox(ctx.sandbox, 'rm task/gone-here.txt');
    await f.folders.remove(task, 'gone-there.txt', { operationId: 'c' });
    await sync.attach(ctx, 'warm');
    expect(await existsIn(ctx.sandbox, 'task/gone-there.txt')).toBe(false);
    expect((await f.folders.list(task)).files.map((e) => e.path)).toEqual([]);
    expect((await f.folders.list(task, { trash: true })).files.map((e) => e.path).sort()).toEqual(['gone-here.txt', 'gone-there.txt']);
    await f.folders.write(task, 'gone-there.txt', body('newer'), { operationId: 'd' });
    await sync.save(ctx, 'turn_end');
    expect((await f.folders.list(task)).files.map((e) => [e.path, e.sha256])).toEqual([['gone-there.txt', sha('newer')]]);
  });

  it('secret-path files in a collection directory are neither stored nor deleted from the store', async () => {
    const task = f.ref('task', owner('s'));
    await f.folders.write(task, '.env', body('FROM_STORE=1\n'), { operationId: 'e' });
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    await sync.attach(ctx, 'cold');
    expect((await readIn(ctx.sandbox, 'task/.env')).toString()).toBe('FROM_STORE=1\n');
    // Edited and new secret-path files are unknown to the sync: never stored, and the stored .env is not deleted.
    await inSandbox(ctx.sandbox, 'echo FROM_SANDBOX=1 > task/.env && echo key > task/id_rsa && echo fine > task/ok.txt');
    await sync.save(ctx, 'turn_end');
    const files = (await f.folders.list(task)).files.map((e) => [e.path, e.sha256]);
    expect(files).toEqual([
      ['.env', sha('FROM_STORE=1\n')],
      ['ok.txt', sha('fine\n')],
    ]);
  });

  it("a file holding the run's token (or an older hf_ token) is never published to the shared task collection", async () => {
    const task = f.ref('task', owner('leak'));
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    const env = await sync.attach(ctx, 'cold');
    const runToken = env.HOLDFAST_RUN_TOKEN ?? '';
    expect(runToken).toMatch(/^holdfast_/);
    const legacy = legacyHoldfastToken();
    // What an agent does by accident: keeps its credentials next to its notes in the shared folder.
    await writeIn(ctx.sandbox, 'task/notes/session.txt', `resume with HOLDFAST_RUN_TOKEN=${runToken}\n`);
    await writeIn(ctx.sandbox, 'task/old-client.json', `{"token": "${legacy}"}\n`);
    await writeIn(ctx.sandbox, 'task/ok.txt', 'fine\n');
    await sync.save(ctx, 'turn_end');
    // The directory is published; neither file holding a token is.
    expect((await f.folders.list(task)).files.map((e) => [e.path, e.sha256])).toEqual([
      ['notes', null],
      ['ok.txt', sha('fine\n')],
    ]);
    // A second save changes nothing: the withheld files stay unknown, not pending.
    await sync.save(ctx, 'turn_end');
    expect((await f.folders.list(task)).files.map((e) => e.path)).toEqual(['notes', 'ok.txt']);
  });

  it("a name holding the run's token (a file, a directory) is never published to the shared task collection, nor shown", async () => {
    const task = f.ref('task', owner('named'));
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    const env = await sync.attach(ctx, 'cold');
    const runToken = env.HOLDFAST_RUN_TOKEN ?? '';
    expect(runToken).toMatch(/^holdfast_/);
    // Harmless content under names a viewer of the collection would read in a listing.
    await writeIn(ctx.sandbox, `task/${runToken}`, 'harmless\n');
    await writeIn(ctx.sandbox, `task/keys-${runToken}/a.txt`, 'a\n');
    await writeIn(ctx.sandbox, 'task/ok.txt', 'fine\n');
    await sync.save(ctx, 'turn_end');
    expect((await f.folders.list(task)).files.map((e) => e.path)).toEqual(['ok.txt']);
    const status = await sync.status(f.tenant, task);
    expect(JSON.stringify(status).includes(runToken)).toBe(false);
    await sync.save(ctx, 'turn_end');
    expect((await f.folders.list(task)).files.map((e) => e.path)).toEqual(['ok.txt']);
  });

  it('refuses a sandbox synced for other owners (CONFLICT bindings_changed)', async () => {
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: owner('b') }));
    await sync.attach(ctx, 'cold');
    const other = await f.run({ task: owner('b') });
    const error = await sync.attach({ ...ctx, run: other }, 'warm').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CONFLICT', data: { reason: 'bindings_changed' } });
    expect(await codeOf(sync.requestRefresh(f.tenant, other.id, { scope: 'user', ownerId: 'nobody' }))).toBe('NOT_FOUND');
  });

  it('a file changed in the store between listing and download: the baseline holds what was downloaded, never sent back', async () => {
    const task = f.ref('task', owner('l'));
    await f.folders.write(task, 'f.txt', body('listed'), { operationId: 'l1' });
    let raced = false;
    const sync = f.sync({
      folders: (inner) => ({
        limits: inner.limits,
        applyStored: (ref, ops) => inner.applyStored(ref, ops),
        listContent: async (ref) => {
          const rows = await inner.listContent(ref);
          if (!raced) {
            raced = true;
            await f.folders.write(task, 'f.txt', body('written after the listing'), { operationId: 'l2' });
          }
          return rows;
        },
      }),
    });
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    await sync.attach(ctx, 'cold');
    expect((await readIn(ctx.sandbox, 'task/f.txt')).toString()).toBe('listed');
    const receipts = await receiptCount(f.b, task);
    await sync.save(ctx, 'turn_end');
    expect(await receiptCount(f.b, task)).toBe(receipts);
    expect((await f.folders.list(task)).files[0]?.sha256).toBe(sha('written after the listing'));
    expect(await writeReceipt(f.b, task, 'f.txt', 'listed')).toBeUndefined();
  });
});
