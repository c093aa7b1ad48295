import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderRef } from '../src/folders/folders.js';
import { type Holdfast, openHoldfast, type RunSettings, type TurnContext } from '../src/index.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';
import { body, writeReceipt } from './support/folder-sync.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';

/**
 * Work-folder sync as a step of the run lifecycle (issue 13), end to end through the library:
 * real sandboxes, the run's bindings, turns, the periodic scheduler and a lost sandbox.
 */

const sh = (script: string) => ['sh', '-c', script];

const BWRAP = BWRAP_RUNS;
const DOCKER = dockerRuns('folders');

const CASES: ReadonlyArray<{ name: string; backend: BackendCase; sandboxes: RunProviderCase }> = [
  ...BACKENDS.map((backend) => ({ name: `${backend.name} on bwrap`, backend, sandboxes: BWRAP })),
  { name: `${(BACKENDS[0] as BackendCase).name} on docker`, backend: BACKENDS[0] as BackendCase, sandboxes: DOCKER },
];

async function readFolder(hf: Holdfast, ref: FolderRef, file: string): Promise<Buffer> {
  const opened = await hf.folders.open(ref, file);
  const chunks: Uint8Array[] = [];
  for await (const chunk of opened.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Runs `script` in the turn's sandbox with the run's environment; rejects on a non-zero exit. */
async function inTurn({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>, script: string): Promise<Buffer> {
  const result = await sandbox.run(sh(script), { cwd: sandbox.workspaceRoot, signal });
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr.toString()}`);
  return result.stdout;
}

describe.each(CASES)('work folders in a run: $name', ({ backend, sandboxes }) => {
  let opened: OpenedBackends;
  let provider: SandboxProvider;
  const instances: Holdfast[] = [];

  const server = async (owner: string, settings: Partial<RunSettings> = {}, blobs = opened.blobs): Promise<Holdfast> => {
    const hf = await openHoldfast({
      blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, `cache-${owner}`),
      providers: () => provider,
      owner,
      runSettings: settings,
    });
    instances.push(hf);
    return hf;
  };
  const deployment = async (hf: Holdfast) => {
    const image = sandboxes.image();
    return hf.deployments.create({ provider: sandboxes.name, ...(image === null ? {} : { image }) });
  };
  const ref = (hf: Holdfast, scope: FolderRef['scope'], ownerId: string): FolderRef => ({ tenantId: hf.tenant.id, scope, ownerId });

  beforeAll(async () => {
    opened = await backend.open();
    provider = sandboxes.open(opened.dir);
  });
  afterAll(async () => {
    for (const hf of instances) await hf.close();
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it('three turns append to a task file, each checking the previous bytes; the sandbox lost before turn 3: every byte comes from the store', async () => {
    const hf = await server('three-turns');
    const task = `task-${crypto.randomUUID()}`;
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { task } });
    const lines = ['turn one\n', 'turn two\n', 'turn three\n'];
    let expected = '';
    for (const [i, line] of lines.entries()) {
      if (i === 2) {
        const sandbox = (await hf.runs.get(run.id)).sandbox;
        await provider.destroy(sandbox?.id ?? '');
      }
      const outcome = await hf.runs.turn(run.id, async (ctx) => {
        const before = await inTurn(ctx, 'cat "$HOLDFAST_TASK_DIR/log.txt" 2>/dev/null || true');
        await inTurn(ctx, `printf '%s' '${line}' >> "$HOLDFAST_TASK_DIR/log.txt"`);
        return before;
      });
      expect(outcome.value.equals(Buffer.from(expected))).toBe(true);
      expected += line;
      expect((await readFolder(hf, ref(hf, 'task', task), 'log.txt')).equals(Buffer.from(expected))).toBe(true);
    }
    const events = await hf.runs.events(run.id);
    expect(events.filter((e) => e.kind === 'folders' && e.step === 'attach_cold' && e.status === 'ok')).toHaveLength(2);
    expect(events.filter((e) => e.kind === 'recovery' && e.step === 'create_sandbox' && e.status === 'ok')).toHaveLength(1);
    // The home is not part of the workspace: no checkpoint of the run holds the task file.
    const head = (await hf.checkpoints.list(run.id))[0];
    const root = await hf.checkpoints.ls(head?.id ?? '');
    expect(root.kind === 'dir' && root.entries.map((e) => e.name)).toEqual([]);
  });

  it('the environment names the home, every directory and the run token; unbound scopes are empty directories', async () => {
    const hf = await server('env');
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { project: `p-${crypto.randomUUID()}` } });
    const outcome = await hf.runs.turn(run.id, (ctx) =>
      inTurn(
        ctx,
        'for d in "$HOLDFAST_TASK_DIR" "$HOLDFAST_AGENT_DIR" "$HOLDFAST_USER_DIR" "$HOLDFAST_PROJECT_DIR" "$HOLDFAST_REPOS_DIR"; do test -d "$d" && ls -A "$d" | wc -l; done; echo "$HOLDFAST_HOME"; test -n "$HOLDFAST_RUN_TOKEN" && echo token',
      ),
    );
    const [a, b, c, d, e, home, token] = outcome.value.toString().trim().split('\n');
    expect([a, b, c, d, e].map((n) => Number(n))).toEqual([0, 0, 0, 0, 0]);
    const sandbox = (await hf.runs.get(run.id)).sandbox;
    const handle = await provider.get(sandbox?.id ?? '');
    expect(home).toBe(handle?.agentHome);
    expect(token).toBe('token');
  });

  it('periodic saves run with the checkpoints, never two at once; only the final flush sets finalCheckpointAt', async () => {
    const hf = await server('periodic', { checkpointIntervalMs: 250 });
    const task = `task-${crypto.randomUUID()}`;
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { task } });
    const midTurn: Array<Awaited<ReturnType<Holdfast['folderSync']['status']>>> = [];
    const outcome = await hf.runs.turn(run.id, async (ctx) => {
      for (let i = 1; i <= 6; i += 1) {
        await inTurn(ctx, `echo ${i} > "$HOLDFAST_TASK_DIR/f${i}"; sleep 0.25`);
        midTurn.push(await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task }));
      }
      // However loaded the machine, the turn lasts until two periodic saves have ended (bounded).
      const until = Date.now() + 30_000;
      const periodicEnded = async () =>
        (await hf.runs.events(run.id)).filter((e) => e.kind === 'folders' && e.step === 'save_periodic').length;
      while ((await periodicEnded()) < 2 && Date.now() < until) await sleep(50);
      midTurn.push(await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task }));
    });
    expect(outcome.periodic.started).toBeGreaterThanOrEqual(2);
    const saves = (await hf.runs.events(run.id)).filter((e) => e.kind === 'folders' && e.step === 'save_periodic');
    expect(saves.length).toBe(outcome.periodic.started);
    for (let i = 1; i < saves.length; i += 1) {
      const [prev, next] = [saves[i - 1], saves[i]];
      // Each event is recorded when its save ends: the next one started after the previous ended.
      expect((next?.at ?? 0) - (next?.durationMs ?? 0)).toBeGreaterThanOrEqual((prev?.at ?? 0) - 1);
    }
    const periodicSaved = midTurn.flat().filter((s) => s.lastSavedAt !== null);
    expect(periodicSaved.length).toBeGreaterThan(0);
    expect(periodicSaved.every((s) => s.finalCheckpointAt === null)).toBe(true);
    const [after] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(after).toMatchObject({ state: 'saved', runId: run.id, active: true, error: null });
    expect(after?.finalCheckpointAt).not.toBeNull();
    expect(after?.lastSavedAt).toBe(after?.finalCheckpointAt);
    for (let i = 1; i <= 6; i += 1) expect((await readFolder(hf, ref(hf, 'task', task), `f${i}`)).toString()).toBe(`${i}\n`);
  });

  it('a final flush that fails is reported and fails the turn; the previous save time stays and the next turn saves the edits', async () => {
    const faulty = new FaultInjectingBlobStore(opened.blobs);
    const hf = await server('failed-flush', {}, faulty);
    const task = `task-${crypto.randomUUID()}`;
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { task } });
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo one > "$HOLDFAST_TASK_DIR/a.txt"'));
    const [saved] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(saved?.state).toBe('saved');
    let before: Awaited<ReturnType<Holdfast['folderSync']['status']>>[number] | undefined;
    const failing = hf.runs.turn(run.id, async (ctx) => {
      // The warm start saved (nothing changed): that is the last successful save before the fault.
      [before] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
      faulty.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
      return inTurn(ctx, 'echo two > "$HOLDFAST_TASK_DIR/a.txt"');
    });
    await expect(failing).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    faulty.clear();
    const [failed] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(before).toMatchObject({ state: 'saved', finalCheckpointAt: saved?.finalCheckpointAt });
    expect(failed).toMatchObject({ state: 'failed', error: { code: 'STORE_UNAVAILABLE' }, lastSavedAt: before?.lastSavedAt });
    expect(failed?.finalCheckpointAt).toBe(saved?.finalCheckpointAt);
    expect((await readFolder(hf, ref(hf, 'task', task), 'a.txt')).toString()).toBe('one\n');
    // The sandbox was kept: its edit is saved by the next turn's warm start.
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'true'));
    expect((await readFolder(hf, ref(hf, 'task', task), 'a.txt')).toString()).toBe('two\n');
    const [recovered] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(recovered).toMatchObject({ state: 'saved', error: null });
  });

  it('a file the sandbox cannot read fails the save of that file only: the turn completes, a takeover save goes on, no operator-only state', async () => {
    const first = await server('unreadable-a', { leaseTtlMs: 500, heartbeatMs: 3_600_000 });
    const second = await server('unreadable-b', { leaseTtlMs: 500 });
    const task = `task-${crypto.randomUUID()}`;
    const run = await first.runs.create({ deploymentId: (await deployment(first)).id, bindings: { task } });
    await first.runs.turn(run.id, (ctx) =>
      inTurn(ctx, 'cd "$HOLDFAST_TASK_DIR" && echo ok > ok.txt && echo locked > locked.txt && chmod 000 locked.txt'),
    );
    const [saved] = await first.folderSync.status(first.tenant, { scope: 'task', ownerId: task });
    expect(saved).toMatchObject({ state: 'saved', error: { code: 'FORBIDDEN' } });
    expect(saved?.finalCheckpointAt).not.toBeNull();
    expect((await readFolder(first, ref(first, 'task', task), 'ok.txt')).toString()).toBe('ok\n');

    // The owner dies holding the lease; the next owner's takeover save meets the same file.
    await first.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo more > "$HOLDFAST_TASK_DIR/more.txt"'));
    expect(await first.meta.runs.claim(run.id, 'unreadable-a', 500)).toBeDefined();
    // An edit after the last save: the takeover save is what keeps it.
    const live = await provider.get((await first.runs.get(run.id)).sandbox?.id as string);
    const late = await live?.run(['sh', '-c', 'echo unsaved > task/late.txt'], { cwd: live.agentHome });
    expect(late?.code).toBe(0);
    await sleep(600);
    const after = await second.runs.turn(run.id, (ctx) => inTurn(ctx, 'cat "$HOLDFAST_TASK_DIR/late.txt"'));
    expect(after.value.toString()).toBe('unsaved\n');
    expect((await second.runs.get(run.id)).lease.state).not.toBe('release_recovery_required');
    const listed = (await second.folders.list(ref(second, 'task', task))).files.map((e) => e.path);
    expect(listed).toEqual(['late.txt', 'more.txt', 'ok.txt']);
  });

  it('two runs of different tasks share a project: different files both land; on one file the later accepted write wins', async () => {
    const hf = await server('shared');
    const project = `p-${crypto.randomUUID()}`;
    const dep = await deployment(hf);
    const a = await hf.runs.create({ deploymentId: dep.id, bindings: { task: `a-${crypto.randomUUID()}`, project } });
    const b = await hf.runs.create({ deploymentId: dep.id, bindings: { task: `b-${crypto.randomUUID()}`, project } });
    await hf.runs.turn(a.id, (ctx) => inTurn(ctx, 'echo from-a > "$HOLDFAST_PROJECT_DIR/a.txt"'));
    await hf.runs.turn(b.id, (ctx) => inTurn(ctx, 'echo from-b > "$HOLDFAST_PROJECT_DIR/b.txt"'));
    const p = ref(hf, 'project', project);
    expect((await readFolder(hf, p, 'a.txt')).toString()).toBe('from-a\n');
    expect((await readFolder(hf, p, 'b.txt')).toString()).toBe('from-b\n');
    // Both edit same.txt in overlapping turns: B's flush is accepted first, A's later, and A's wins.
    const aTurn = hf.runs.turn(a.id, async (ctx) => {
      await inTurn(ctx, 'echo a-wrote > "$HOLDFAST_PROJECT_DIR/same.txt"');
      await hf.runs.turn(b.id, (bCtx) => inTurn(bCtx, 'echo b-wrote > "$HOLDFAST_PROJECT_DIR/same.txt"'));
      expect((await readFolder(hf, p, 'same.txt')).toString()).toBe('b-wrote\n');
    });
    await aTurn;
    expect((await readFolder(hf, p, 'same.txt')).toString()).toBe('a-wrote\n');
    // B's version is not silently lost: it was accepted (its receipt is there), then overwritten by a later write.
    expect(await writeReceipt(opened, p, 'same.txt', 'b-wrote\n')).toBeDefined();
    expect(await writeReceipt(opened, p, 'same.txt', 'a-wrote\n')).toBeDefined();
    // B's next warm start downloads A's accepted version; B's stale copy is never sent back.
    const seen = await hf.runs.turn(b.id, (ctx) => inTurn(ctx, 'cat "$HOLDFAST_PROJECT_DIR/same.txt" "$HOLDFAST_PROJECT_DIR/a.txt"'));
    expect(seen.value.toString()).toBe('a-wrote\nfrom-a\n');
    expect((await readFolder(hf, p, 'same.txt')).toString()).toBe('a-wrote\n');
    expect((await readFolder(hf, p, 'a.txt')).toString()).toBe('from-a\n');
  });

  it("a revoked user's run stops syncing the user collection with an error and keeps the files; task files still sync", async () => {
    const hf = await server('revoked');
    const name = `u${crypto.randomUUID().slice(0, 8)}`;
    const { id: userId } = await hf.users.add({ tenant: hf.tenant.name, name, role: 'member' });
    const task = `task-${crypto.randomUUID()}`;
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { task, user: name } });
    expect(run.bindings?.user).toBe(userId);
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo mine > "$HOLDFAST_USER_DIR/notes.txt"; echo t1 > "$HOLDFAST_TASK_DIR/t.txt"'));
    expect((await readFolder(hf, ref(hf, 'user', userId), 'notes.txt')).toString()).toBe('mine\n');
    await hf.users.revoke({ tenant: hf.tenant.name, name });
    const outcome = await hf.runs.turn(run.id, (ctx) =>
      inTurn(
        ctx,
        'echo changed > "$HOLDFAST_USER_DIR/notes.txt"; echo t2 > "$HOLDFAST_TASK_DIR/t.txt"; cat "$HOLDFAST_USER_DIR/notes.txt"',
      ),
    );
    expect(outcome.value.toString()).toBe('changed\n');
    expect((await readFolder(hf, ref(hf, 'user', userId), 'notes.txt')).toString()).toBe('mine\n');
    expect((await readFolder(hf, ref(hf, 'task', task), 't.txt')).toString()).toBe('t2\n');
    const [user] = await hf.folderSync.status(hf.tenant, { scope: 'user', ownerId: userId });
    expect(user).toMatchObject({ state: 'failed', error: { code: 'FORBIDDEN' } });
    const [taskState] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(taskState).toMatchObject({ state: 'saved', error: null });
    // The files stay in the sandbox.
    const again = await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'cat "$HOLDFAST_USER_DIR/notes.txt"'));
    expect(again.value.toString()).toBe('changed\n');
  });

  it('a run bound to a revoked user never sees the files of a new user of that name, and sends none of its own there', async () => {
    const hf = await server('reused-name');
    const name = `u${crypto.randomUUID().slice(0, 8)}`;
    const { id: oldId } = await hf.users.add({ tenant: hf.tenant.name, name, role: 'member' });
    const oldRun = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { user: name } });
    await hf.runs.turn(oldRun.id, (ctx) => inTurn(ctx, 'echo old-alex > "$HOLDFAST_USER_DIR/old.txt"'));
    await hf.users.revoke({ tenant: hf.tenant.name, name });
    const { id: newId } = await hf.users.add({ tenant: hf.tenant.name, name, role: 'viewer' });
    // A run the operator binds to the name now is the new user's: it starts empty and writes the new user's folder.
    const fresh = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { user: name } });
    const first = await hf.runs.turn(fresh.id, (ctx) =>
      inTurn(ctx, 'ls -A "$HOLDFAST_USER_DIR"; echo NEW-ALEX-SECRET > "$HOLDFAST_USER_DIR/new-secret.txt"'),
    );
    expect(first.value.toString()).toBe('');
    // The old run's next turn: none of the new user's files arrive, and nothing it writes reaches them.
    const next = await hf.runs.turn(oldRun.id, (ctx) =>
      inTurn(ctx, 'echo planted > "$HOLDFAST_USER_DIR/planted.txt"; ls -A "$HOLDFAST_USER_DIR"; cat "$HOLDFAST_USER_DIR"/*'),
    );
    const seen = next.value.toString();
    expect(seen).not.toContain('new-secret');
    expect(seen).not.toContain('NEW-ALEX-SECRET');
    const again = await hf.runs.turn(fresh.id, (ctx) => inTurn(ctx, 'ls -A "$HOLDFAST_USER_DIR"'));
    expect(again.value.toString()).toBe('new-secret.txt\n');
    expect(fresh.bindings?.user).toBe(newId);
    expect((await hf.folders.list(ref(hf, 'user', newId))).files.map((f) => f.path)).toEqual(['new-secret.txt']);
    expect((await hf.folders.list(ref(hf, 'user', oldId))).files.map((f) => f.path)).toEqual(['old.txt']);
  });

  it('a refresh queued during a turn is applied at its safe boundary, never while the agent edits; an ended run refuses one', async () => {
    const hf = await server('refresh');
    const task = `task-${crypto.randomUUID()}`;
    const run = await hf.runs.create({ deploymentId: (await deployment(hf)).id, bindings: { task } });
    const t = ref(hf, 'task', task);
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo v1 > "$HOLDFAST_TASK_DIR/shared.txt"'));
    const during = await hf.runs.turn(run.id, async (ctx) => {
      await hf.folders.write(t, 'shared.txt', body('v2 from the platform\n'), { operationId: crypto.randomUUID() });
      expect(await hf.folderSync.requestRefresh(hf.tenant, run.id, { scope: 'task', ownerId: task })).toEqual({ queued: true });
      const [queued] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
      expect(queued?.refresh.state).toBe('queued');
      return inTurn(ctx, 'sleep 0.3; cat "$HOLDFAST_TASK_DIR/shared.txt"');
    });
    expect(during.value.toString()).toBe('v1\n');
    // The agent did not touch the file, so the turn's flush sent nothing and the boundary brought v2.
    expect((await readFolder(hf, t, 'shared.txt')).toString()).toBe('v2 from the platform\n');
    const sandbox = await provider.get((await hf.runs.get(run.id)).sandbox?.id ?? '');
    const inside = await sandbox?.run(['cat', `${sandbox.agentHome}/task/shared.txt`]);
    expect(inside?.stdout.toString()).toBe('v2 from the platform\n');
    const [done] = await hf.folderSync.status(hf.tenant, { scope: 'task', ownerId: task });
    expect(done?.refresh.state).toBe('none');
    await hf.runs.end(run.id);
    await expect(hf.folderSync.requestRefresh(hf.tenant, run.id, { scope: 'task', ownerId: task })).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'ended' },
    });
  });
});
