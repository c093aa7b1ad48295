import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderRef } from '../src/folders/folders.js';
import type { FolderSync } from '../src/folders/sandbox-sync.js';
import type { RunSandboxContext } from '../src/runs/run-extension.js';
import {
  body,
  existsIn,
  inSandbox,
  openSyncFixture,
  readIn,
  SYNC_CASES,
  type SyncFixture,
  sha,
  writeIn,
  writeReceipt,
} from './support/folder-sync.js';

/** What the collection holds at `path`: its bytes' hash and executable bit, or `null` when nothing is live there. */
async function storedAt(f: SyncFixture, ref: FolderRef, path: string): Promise<{ sha256: string | null; executable: boolean } | null> {
  const entry = (await f.folders.list(ref)).files.find((e) => e.path === path);
  return entry === undefined ? null : { sha256: entry.sha256, executable: entry.executable };
}

/** Whether `rel` is executable in the sandbox. */
async function executableIn(ctx: RunSandboxContext, rel: string): Promise<boolean> {
  return (await inSandbox(ctx.sandbox, `[ -x ${JSON.stringify(rel)} ] && echo yes || echo no`)).toString('utf8').trim() === 'yes';
}

describe.each(SYNC_CASES)('last-write-wins never publishes a stale copy: $name', ({ provider, backend }) => {
  let f: SyncFixture;
  let n = 0;
  const owner = (p: string) => `${p}${++n}`;

  beforeAll(async () => {
    f = await openSyncFixture(backend, provider);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  /**
   * A shared project folder holding `files` (path -> [bytes, executable]); two runs hydrate
   * it: `fresh` publishes newer versions while `stale` still holds the old copies.
   */
  async function twoRuns(files: Record<string, [string, boolean]>) {
    const project = f.ref('project', owner('shared'));
    for (const [path, [bytes, executable]] of Object.entries(files)) {
      await f.folders.write(project, path, body(bytes), { operationId: `seed-${path}`, executable });
    }
    const sync: FolderSync = f.sync();
    const stale = await f.context(await f.run({ project: project.ownerId }));
    const fresh = await f.context(await f.run({ project: project.ownerId }));
    await sync.attach(stale, 'cold');
    await sync.attach(fresh, 'cold');
    return { project, sync, stale, fresh };
  }

  it('chmod +x of a stale copy is a mode change: the newer content stays, only the bit is set', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ 'tool.sh': ['echo v1\n', false] });
    await writeIn(fresh.sandbox, 'project/tool.sh', 'echo v2\n');
    await sync.save(fresh, 'turn_end');
    expect(await storedAt(f, project, 'tool.sh')).toEqual({ sha256: sha('echo v2\n'), executable: false });

    await inSandbox(stale.sandbox, 'chmod +x project/tool.sh');
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'tool.sh')).toEqual({ sha256: sha('echo v2\n'), executable: true });
    // The old bytes were never published, under either mode.
    expect(await writeReceipt(f.b, project, 'tool.sh', 'echo v1\n', true)).toBeUndefined();
    expect(await writeReceipt(f.b, project, 'tool.sh', 'echo v1\n', false)).toBeUndefined();

    // The stale sandbox's next download brings the newer bytes, with its bit; a save after it sends nothing.
    await sync.attach(stale, 'warm');
    expect((await readIn(stale.sandbox, 'project/tool.sh')).toString()).toBe('echo v2\n');
    expect(await executableIn(stale, 'project/tool.sh')).toBe(true);
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'tool.sh')).toEqual({ sha256: sha('echo v2\n'), executable: true });
  });

  it('a mode-only change on a stale base where the newer version changed the mode too: the later bit wins, the newer content stays', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ 'up.sh': ['up v1\n', false], 'down.sh': ['down v1\n', true] });
    await writeIn(fresh.sandbox, 'project/up.sh', 'up v2\n');
    await writeIn(fresh.sandbox, 'project/down.sh', 'down v2\n');
    await inSandbox(fresh.sandbox, 'chmod +x project/up.sh && chmod +x project/down.sh');
    await sync.save(fresh, 'turn_end');
    expect(await storedAt(f, project, 'up.sh')).toEqual({ sha256: sha('up v2\n'), executable: true });

    // The same bit the newer version set, and the opposite one.
    await inSandbox(stale.sandbox, 'chmod +x project/up.sh && chmod -x project/down.sh');
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'up.sh')).toEqual({ sha256: sha('up v2\n'), executable: true });
    expect(await storedAt(f, project, 'down.sh')).toEqual({ sha256: sha('down v2\n'), executable: false });
    await sync.attach(stale, 'warm');
    expect((await readIn(stale.sandbox, 'project/down.sh')).toString()).toBe('down v2\n');
    expect(await executableIn(stale, 'project/down.sh')).toBe(false);
  });

  it('content and mode changed on a stale base: a real edit, so it wins (last write), bytes and bit both', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ 'run.sh': ['run v1\n', false] });
    await writeIn(fresh.sandbox, 'project/run.sh', 'run v2\n');
    await sync.save(fresh, 'turn_end');
    await writeIn(stale.sandbox, 'project/run.sh', 'run v3 from the stale run\n');
    await inSandbox(stale.sandbox, 'chmod +x project/run.sh');
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'run.sh')).toEqual({ sha256: sha('run v3 from the stale run\n'), executable: true });
  });

  it('a file deleted upstream meanwhile: a mode change does not bring it back; an edit of it does (last write)', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ 'gone.sh': ['gone v1\n', false], 'edited.txt': ['edited v1\n', false] });
    await inSandbox(fresh.sandbox, 'rm project/gone.sh project/edited.txt');
    await sync.save(fresh, 'turn_end');
    expect(await storedAt(f, project, 'gone.sh')).toBeNull();

    await inSandbox(stale.sandbox, 'chmod +x project/gone.sh');
    await writeIn(stale.sandbox, 'project/edited.txt', 'edited v2 after the delete\n');
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'gone.sh')).toBeNull();
    expect(await storedAt(f, project, 'edited.txt')).toEqual({ sha256: sha('edited v2 after the delete\n'), executable: false });
    expect((await sync.status(f.tenant, project)).map((s) => s.state)).toEqual(['saved', 'saved']);

    // The deletion reaches the stale sandbox on its next download; nothing comes back after it.
    await sync.attach(stale, 'warm');
    expect(await existsIn(stale.sandbox, 'project/gone.sh')).toBe(false);
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'gone.sh')).toBeNull();
  });

  it('a file turned into a directory upstream: a mode change of the old file changes nothing there', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ thing: ['a file\n', false] });
    await inSandbox(fresh.sandbox, 'rm project/thing && mkdir project/thing && echo inside > project/thing/in.txt');
    await sync.save(fresh, 'turn_end');
    await inSandbox(stale.sandbox, 'chmod +x project/thing');
    await sync.save(stale, 'turn_end');
    const listed = (await f.folders.list(project)).files.map((e) => [e.path, e.kind, e.sha256]);
    expect(listed).toEqual([
      ['thing', 'directory', null],
      ['thing/in.txt', 'file', sha('inside\n')],
    ]);
    await sync.attach(stale, 'warm');
    expect((await readIn(stale.sandbox, 'project/thing/in.txt')).toString()).toBe('inside\n');
  });

  it('an unchanged stale copy is never sent over a newer version', async () => {
    const { project, sync, stale, fresh } = await twoRuns({ 'same.txt': ['same v1\n', true] });
    await writeIn(fresh.sandbox, 'project/same.txt', 'same v2\n');
    await sync.save(fresh, 'turn_end');
    await writeIn(stale.sandbox, 'project/other.txt', 'an unrelated edit\n');
    await sync.save(stale, 'turn_end');
    expect(await storedAt(f, project, 'same.txt')).toEqual({ sha256: sha('same v2\n'), executable: true });
  });
});
