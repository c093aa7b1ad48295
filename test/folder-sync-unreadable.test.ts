import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { body, existsIn, inSandbox, openSyncFixture, SYNC_CASES, type SyncFixture, sha, writeIn } from './support/folder-sync.js';

/** The bwrap cases: there the sandbox's own user reads the directory, and the agent refuses what it cannot read. */
const BWRAP_CASES = SYNC_CASES.filter((c) => c.provider === 'bwrap');

describe.each(BWRAP_CASES)('a sandbox cannot stall its own saves with an unreadable entry: $name', ({ provider, backend }) => {
  let f: SyncFixture;
  let n = 0;
  const owner = (p: string) => `${p}${++n}`;

  beforeAll(async () => {
    f = await openSyncFixture(backend, provider);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  const stored = async (ref: ReturnType<SyncFixture['ref']>) =>
    (await f.folders.list(ref)).files.map((e) => [e.path, e.kind, e.sha256] as const);

  it('a mode-000 file, a mode-000 directory and a FIFO: each unreadable one is a failed save of that path, the rest is saved', async () => {
    const task = f.ref('task', owner('locked'));
    await f.folders.write(task, 'kept.txt', body('stored before'), { operationId: 'k' });
    await f.folders.write(task, 'was-readable.txt', body('stored copy'), { operationId: 'w' });
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    await sync.attach(ctx, 'cold');
    await writeIn(ctx.sandbox, 'task/new.txt', 'saved anyway');
    await writeIn(ctx.sandbox, 'task/kept.txt', 'edited');
    await writeIn(ctx.sandbox, 'task/locked.txt', 'nobody reads this');
    await writeIn(ctx.sandbox, 'task/sealed/inside.txt', 'behind a closed directory');
    await writeIn(ctx.sandbox, 'task/was-readable.txt', 'edited, then locked');
    await inSandbox(ctx.sandbox, 'chmod 000 task/locked.txt task/sealed task/was-readable.txt && mkfifo task/pipe');

    // The run's own save resolves (no operator-only state for it), the rest of the folder saved.
    await sync.save(ctx, 'turn_end');
    expect(await stored(task)).toEqual([
      ['kept.txt', 'file', sha('edited')],
      ['new.txt', 'file', sha('saved anyway')],
      // Its stored copy is untouched: neither overwritten nor deleted.
      ['was-readable.txt', 'file', sha('stored copy')],
    ]);
    const [status] = await sync.status(f.tenant, task);
    expect(status).toMatchObject({ state: 'saved', error: { code: 'FORBIDDEN' } });
    expect(status?.lastSavedAt).not.toBeNull();
    expect(status?.finalCheckpointAt).toBe(status?.lastSavedAt);

    // The save's own report names each unreadable path.
    const report = await sync.sync.outgoing({ ref: task, runId: ctx.run.id, sandbox: ctx.sandbox });
    expect(report.unreadable).toEqual(['sealed', 'locked.txt', 'was-readable.txt']);
    expect(report.unknown).toEqual(expect.arrayContaining(['sealed', 'locked.txt', 'was-readable.txt']));

    // Readable again: the next save sends them, and the error clears.
    await inSandbox(ctx.sandbox, 'chmod 755 task/sealed && chmod 644 task/locked.txt task/was-readable.txt');
    await sync.save(ctx, 'turn_end');
    expect(await stored(task)).toEqual([
      ['kept.txt', 'file', sha('edited')],
      ['locked.txt', 'file', sha('nobody reads this')],
      ['new.txt', 'file', sha('saved anyway')],
      ['sealed', 'directory', null],
      ['sealed/inside.txt', 'file', sha('behind a closed directory')],
      ['was-readable.txt', 'file', sha('edited, then locked')],
    ]);
    expect((await sync.status(f.tenant, task))[0]).toMatchObject({ state: 'saved', error: null });
  });

  it("a directory holding an unreadable file is downloaded into around it: warm attach and refresh bring the others' changes and leave it where it is", async () => {
    const task = f.ref('task', owner('warm'));
    await f.folders.write(task, 'a.txt', body('a1'), { operationId: 'a' });
    await f.folders.write(task, 'dir/old.txt', body('old'), { operationId: 'old' });
    const sync = f.sync();
    const ctx = await f.context(await f.run({ task: task.ownerId }));
    await sync.attach(ctx, 'cold');
    await writeIn(ctx.sandbox, 'task/mine.txt', 'only here');
    await writeIn(ctx.sandbox, 'task/dir/locked.txt', 'locked');
    await inSandbox(ctx.sandbox, 'chmod 000 task/mine.txt task/dir/locked.txt');
    await f.folders.write(task, 'a.txt', body('a2 from elsewhere'), { operationId: 'a2' });
    // Another writer writes over the unreadable file and removes its directory: neither reaches the sandbox.
    await f.folders.write(task, 'mine.txt', body('theirs'), { operationId: 'm' });
    await f.folders.remove(task, 'dir', { operationId: 'rm-dir' });

    // The warm attach saves, then downloads everything that touches no unreadable entry.
    await sync.attach(ctx, 'warm');
    expect((await inSandbox(ctx.sandbox, 'cat task/a.txt')).toString()).toBe('a2 from elsewhere');
    expect((await inSandbox(ctx.sandbox, 'stat -c "%a %s" task/mine.txt task/dir/locked.txt')).toString()).toBe('0 9\n0 6\n');
    // The removed file beside it is removed; the directory that holds it stays.
    expect(await existsIn(ctx.sandbox, 'task/dir/old.txt')).toBe(false);
    expect((await sync.status(f.tenant, task))[0]).toMatchObject({ state: 'saved', error: { code: 'FORBIDDEN' } });
    // A queued refresh at the boundary goes around them too.
    await f.folders.write(task, 'b.txt', body('b'), { operationId: 'b' });
    const running = { ...ctx, run: { ...ctx.run, sandbox: { provider: ctx.sandbox.provider, id: ctx.sandbox.id } } };
    await f.b.meta.folderSync.update(
      { provider: ctx.sandbox.provider, sandboxId: ctx.sandbox.id, scope: 'task' },
      { refreshState: 'queued' },
    );
    await sync.boundary(running);
    expect((await inSandbox(ctx.sandbox, 'cat task/b.txt')).toString()).toBe('b');
    expect((await inSandbox(ctx.sandbox, 'stat -c %s task/mine.txt')).toString().trim()).toBe('9');
    expect((await sync.status(f.tenant, task))[0]?.refresh.state).toBe('none');

    // Readable again: the next save sends it (the later accepted write wins), and nothing downloaded is sent back.
    await inSandbox(ctx.sandbox, 'chmod 644 task/mine.txt task/dir/locked.txt');
    await sync.attach(ctx, 'warm');
    expect((await inSandbox(ctx.sandbox, 'cat task/a.txt task/b.txt task/mine.txt')).toString()).toBe('a2 from elsewherebonly here');
    expect(await stored(task)).toEqual([
      ['a.txt', 'file', sha('a2 from elsewhere')],
      ['b.txt', 'file', sha('b')],
      ['dir', 'directory', null],
      ['dir/locked.txt', 'file', sha('locked')],
      ['mine.txt', 'file', sha('only here')],
    ]);
    expect((await sync.status(f.tenant, task))[0]).toMatchObject({ state: 'saved', error: null });
  });
});
