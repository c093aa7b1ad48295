import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderRef } from '../src/folders/folders.js';
import { type Holdfast, openHoldfast, type RunSettings, type TurnContext } from '../src/index.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { storeEnvironment } from './support/cli-env.js';
import { body, sha } from './support/folder-sync.js';
import { BWRAP_RUNS } from './support/run-providers.js';
import { HOLDFAST_BIN, runHoldfast } from './support/serve-process.js';

/**
 * A failed save keeps the working copy, and a kept sandbox's next sync saves its edits first,
 * then brings in what others wrote meanwhile (issue 29): two servers on one store and real
 * bwrap sandboxes, the owner's death simulated as the other run tests do it (its lease
 * claimed again with a TTL that runs out, its heartbeat never beating).
 */

const sh = (script: string) => ['sh', '-c', script];
/** The dead owner's lease TTL: short enough to run out within the test. */
const LEASE_TTL_MS = 500;
/** Longer than {@link LEASE_TTL_MS}: the lease has expired after it. */
const PAST_TTL_MS = 700;

/** Runs `script` in the turn's sandbox with the run's environment; rejects on a non-zero exit. */
async function inTurn({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>, script: string): Promise<Buffer> {
  const result = await sandbox.run(sh(script), { cwd: sandbox.workspaceRoot, signal });
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr.toString()}`);
  return result.stdout;
}

async function readFolder(hf: Holdfast, ref: FolderRef, file: string): Promise<Buffer> {
  const opened = await hf.folders.open(ref, file);
  const chunks: Uint8Array[] = [];
  for await (const chunk of opened.body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

describe.each(BACKENDS)('a kept working copy on bwrap: $name', (backend) => {
  let opened: OpenedBackends;
  let provider: SandboxProvider;
  const instances: Holdfast[] = [];

  const server = async (owner: string, settings: Partial<RunSettings> = {}): Promise<Holdfast> => {
    const hf = await openHoldfast({
      blobs: opened.blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, `cache-${owner}`),
      providers: () => provider,
      owner,
      runSettings: settings,
    });
    instances.push(hf);
    return hf;
  };
  /** Two servers: `dead` never heartbeats (its lease runs out), `next` takes over. */
  const pair = async (name: string) => ({
    dead: await server(`${name}-dead`, { leaseTtlMs: LEASE_TTL_MS, heartbeatMs: 3_600_000 }),
    next: await server(`${name}-next`, { leaseTtlMs: LEASE_TTL_MS }),
  });
  const ref = (hf: Holdfast, scope: FolderRef['scope'], ownerId: string): FolderRef => ({ tenantId: hf.tenant.id, scope, ownerId });
  /** Runs `script` in the run's live sandbox from outside any turn (what the dead owner's agent left). */
  const inSandbox = async (hf: Holdfast, runId: string, script: string): Promise<Buffer> => {
    const live = await provider.get((await hf.runs.get(runId)).sandbox?.id ?? '');
    if (live === undefined) throw new Error(`run ${runId} has no live sandbox`);
    const got = await live.run(sh(script), { cwd: live.agentHome });
    if (got.code !== 0) throw new Error(`exit ${got.code}: ${got.stderr.toString()}`);
    return got.stdout;
  };
  /** The owner dies holding the lease: claimed again by its own name, never renewed. */
  const die = async (hf: Holdfast, runId: string, owner: string) => {
    expect(await hf.meta.runs.claim(runId, owner, LEASE_TTL_MS)).toBeDefined();
  };

  beforeAll(async () => {
    opened = await backend.open();
    provider = BWRAP_RUNS.open(opened.dir);
  });
  afterAll(async () => {
    for (const hf of instances) await hf.close();
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it("a dead owner's sandbox whose revoked user's folder holds an unsaved edit is kept: the run needs lease resolve, which destroys it only when told to", async () => {
    const { dead, next } = await pair('revoked');
    const name = `u${crypto.randomUUID().slice(0, 8)}`;
    const { id: userId } = await dead.users.add({ tenant: dead.tenant.name, name, role: 'member' });
    const project = `p-${crypto.randomUUID()}`;
    const deployment = await dead.deployments.create({ provider: 'bwrap' });
    const run = await dead.runs.create({ deploymentId: deployment.id, bindings: { user: name, project } });
    await dead.runs.turn(run.id, (ctx) =>
      inTurn(ctx, 'echo saved > "$HOLDFAST_USER_DIR/notes.txt"; echo p > "$HOLDFAST_PROJECT_DIR/p.txt"'),
    );
    const sandboxId = (await dead.runs.get(run.id)).sandbox?.id as string;

    // The owner dies mid-turn: its agent's edits are in the sandbox only; the user is revoked meanwhile.
    await die(dead, run.id, 'revoked-dead');
    await inSandbox(dead, run.id, 'echo "unsaved edit" > user/notes.txt; echo late > project/late.txt');
    await dead.users.revoke({ tenant: dead.tenant.name, name });
    await sleep(PAST_TTL_MS);

    await expect(next.runs.turn(run.id, (ctx) => inTurn(ctx, 'true'))).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'release_recovery_required', error: { reason: 'work_folder_save_required', code: 'FORBIDDEN' } },
    });
    const stuck = await next.runs.get(run.id);
    expect(stuck.lease).toMatchObject({
      state: 'release_recovery_required',
      error: { reason: 'work_folder_save_required', code: 'FORBIDDEN', sandbox: sandboxId },
    });
    expect(stuck.sandbox?.id).toBe(sandboxId);
    // The working copy is there, the edit in it; the project's edit was saved before the refusal.
    expect(sha(await inSandbox(next, run.id, 'cat user/notes.txt'))).toBe(sha('unsaved edit\n'));
    expect((await readFolder(next, ref(next, 'user', userId), 'notes.txt')).toString()).toBe('saved\n');
    expect((await readFolder(next, ref(next, 'project', project), 'late.txt')).toString()).toBe('late\n');
    const events = await next.runs.events(run.id);
    expect(events.find((e) => e.kind === 'folders' && e.step === 'save_takeover')).toMatchObject({
      status: 'failed',
      data: { error: { code: 'FORBIDDEN', data: { reason: 'user_revoked', scope: 'user' } } },
    });
    expect(events.find((e) => e.kind === 'lease' && e.step === 'keep_sandbox')).toMatchObject({
      status: 'ok',
      data: { sandbox: sandboxId, reason: 'work_folder_save_required', error: { code: 'FORBIDDEN' } },
    });
    expect(events.some((e) => e.kind === 'lease' && e.step === 'stop_previous_sandbox')).toBe(false);
    if (backend.name === 'local-disk + sqlite') {
      // What the operator sees: `holdfast run show` on the store names the kept sandbox and the way out.
      expect(fs.existsSync(HOLDFAST_BIN), `${HOLDFAST_BIN} is missing: run npm run build first`).toBe(true);
      const env = storeEnvironment(path.join(opened.dir, 'store'));
      const shown = await runHoldfast(['--json', 'run', 'show', run.id], env);
      expect(shown.code).toBe(0);
      expect(JSON.parse(shown.stdout)).toMatchObject({
        run: { lease: { state: 'release_recovery_required', error: { reason: 'work_folder_save_required', code: 'FORBIDDEN' } } },
        events: expect.arrayContaining([expect.objectContaining({ kind: 'lease', step: 'keep_sandbox', status: 'ok' })]),
      });
      const human = await runHoldfast(['run', 'show', run.id], env);
      expect(human.code).toBe(0);
      expect(human.stdout).toContain(`holdfast lease resolve ${run.id}`);
      expect(human.stdout).toContain('--discard-unsaved');
    }

    // Turns are refused until the operator decides; a resolve that would destroy the edit refuses too.
    await expect(next.runs.turn(run.id, (ctx) => inTurn(ctx, 'true'))).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(next.runs.resolveLease(run.id)).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'work_folder_save_required', sandbox: sandboxId, error: { code: 'FORBIDDEN' } },
    });
    expect(await provider.get(sandboxId)).toBeDefined();
    expect(sha(await inSandbox(next, run.id, 'cat user/notes.txt'))).toBe(sha('unsaved edit\n'));

    // Knowingly: the sandbox goes, the run goes on from the store.
    const resolved = await next.runs.resolveLease(run.id, { discardUnsaved: true });
    expect(resolved.lease.state).toBe('free');
    expect(await provider.get(sandboxId)).toBeUndefined();
    const after = await next.runs.turn(run.id, (ctx) => inTurn(ctx, 'cat "$HOLDFAST_PROJECT_DIR/late.txt"'));
    expect(after.value.toString()).toBe('late\n');
  });

  it("a revoked user's folder with nothing unsaved does not hold up a takeover: the dead owner's sandbox is stopped as usual", async () => {
    const { dead, next } = await pair('clean');
    const name = `u${crypto.randomUUID().slice(0, 8)}`;
    await dead.users.add({ tenant: dead.tenant.name, name, role: 'member' });
    const task = `t-${crypto.randomUUID()}`;
    const deployment = await dead.deployments.create({ provider: 'bwrap' });
    const run = await dead.runs.create({ deploymentId: deployment.id, bindings: { user: name, task } });
    await dead.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo saved > "$HOLDFAST_USER_DIR/notes.txt"'));
    const sandboxId = (await dead.runs.get(run.id)).sandbox?.id as string;
    await die(dead, run.id, 'clean-dead');
    await inSandbox(dead, run.id, 'echo unsaved > task/t.txt');
    await dead.users.revoke({ tenant: dead.tenant.name, name });
    await sleep(PAST_TTL_MS);
    const after = await next.runs.turn(run.id, (ctx) => inTurn(ctx, 'cat "$HOLDFAST_TASK_DIR/t.txt"'));
    expect(after.value.toString()).toBe('unsaved\n');
    expect((await next.runs.get(run.id)).lease.state).not.toBe('release_recovery_required');
    expect(await provider.get(sandboxId)).toBeUndefined();
    const events = await next.runs.events(run.id);
    expect(events.find((e) => e.kind === 'lease' && e.step === 'stop_previous_sandbox')?.status).toBe('ok');
  });

  it('a save that leaves out a file the sandbox cannot read: the next turn saves the edits first, then brings in what another server wrote, around that file', async () => {
    const { dead: a, next: b } = await pair('around');
    const project = `p-${crypto.randomUUID()}`;
    const p = ref(a, 'project', project);
    const deployment = await a.deployments.create({ provider: 'bwrap' });
    const mine = await a.runs.create({ deploymentId: deployment.id, bindings: { task: `t-${crypto.randomUUID()}`, project } });
    const theirs = await b.runs.create({ deploymentId: deployment.id, bindings: { task: `t-${crypto.randomUUID()}`, project } });
    await a.runs.turn(mine.id, (ctx) =>
      inTurn(
        ctx,
        'cd "$HOLDFAST_PROJECT_DIR" && echo v1 > shared.txt && echo gone > gone.txt && mkdir -p keep && echo mine > mine.txt && echo locked > keep/locked.txt && chmod 000 keep/locked.txt',
      ),
    );
    const [saved] = await a.folderSync.status(a.tenant, { scope: 'project', ownerId: project });
    expect(saved).toMatchObject({ state: 'saved', error: { code: 'FORBIDDEN' } });
    expect((await a.folders.list(p)).files.map((f) => f.path)).toEqual(['gone.txt', 'keep', 'mine.txt', 'shared.txt']);

    // The agent edits after the last save (the retained edit); another writer, on the other server, changes the project meanwhile.
    await inSandbox(a, mine.id, 'echo "mine, edited later" > project/mine.txt');
    await b.runs.turn(theirs.id, (ctx) =>
      inTurn(
        ctx,
        'cd "$HOLDFAST_PROJECT_DIR" && echo v2 > shared.txt && rm gone.txt && mkdir -p new/deep && echo theirs > new/deep/theirs.txt',
      ),
    );
    await b.folders.write(p, 'keep/next.txt', body('beside the locked file\n'), { operationId: crypto.randomUUID() });

    const seen = await a.runs.turn(mine.id, (ctx) =>
      inTurn(
        ctx,
        'cd "$HOLDFAST_PROJECT_DIR" && cat shared.txt mine.txt new/deep/theirs.txt keep/next.txt; [ -e gone.txt ] && echo gone-still-there; stat -c "%a %s" keep/locked.txt',
      ),
    );
    // Retained edits first: the edit reached the store; then incoming: every change of the other writer is in the sandbox.
    expect(seen.value.toString()).toBe('v2\nmine, edited later\ntheirs\nbeside the locked file\n0 7\n');
    expect((await readFolder(a, p, 'mine.txt')).toString()).toBe('mine, edited later\n');
    expect((await readFolder(a, p, 'shared.txt')).toString()).toBe('v2\n');
    const files = (await a.folders.list(p)).files.filter((f) => f.kind === 'file').map((f) => f.path);
    expect(files).toEqual(['keep/next.txt', 'mine.txt', 'new/deep/theirs.txt', 'shared.txt']);

    // A refresh at the turn's safe boundary goes around the file too.
    const refreshed = a.runs.turn(mine.id, async (ctx) => {
      await b.folders.write(p, 'late.txt', body('refreshed\n'), { operationId: crypto.randomUUID() });
      expect(await a.folderSync.requestRefresh(a.tenant, mine.id, { scope: 'project', ownerId: project })).toEqual({ queued: true });
      return inTurn(ctx, 'true');
    });
    await refreshed;
    expect((await inSandbox(a, mine.id, 'cat project/late.txt; stat -c "%a %s" project/keep/locked.txt')).toString()).toBe(
      'refreshed\n0 7\n',
    );
    const [done] = await a.folderSync.status(a.tenant, { scope: 'project', ownerId: project });
    expect(done?.refresh.state).toBe('none');
    // Readable again, the file is saved like any edit; nothing the download wrote is sent back.
    await inSandbox(a, mine.id, 'chmod 644 project/keep/locked.txt');
    await a.runs.turn(mine.id, (ctx) => inTurn(ctx, 'true'));
    expect((await readFolder(a, p, 'keep/locked.txt')).toString()).toBe('locked\n');
    expect((await readFolder(a, p, 'late.txt')).toString()).toBe('refreshed\n');
    const [after] = await a.folderSync.status(a.tenant, { scope: 'project', ownerId: project });
    expect(after).toMatchObject({ state: 'saved', error: null });
  });

  it("an upgrade does not leave a sandbox whose revoked user's folder holds an unsaved edit: the run stays on it", async () => {
    const hf = await server('upgrade');
    const name = `u${crypto.randomUUID().slice(0, 8)}`;
    await hf.users.add({ tenant: hf.tenant.name, name, role: 'member' });
    const channel = `c${crypto.randomUUID().slice(0, 8)}`;
    const v1 = await hf.deployments.create({ provider: 'bwrap', env: { V: '1' } });
    await hf.deployments.publish(channel, v1.id);
    const run = await hf.runs.create({ channel, bindings: { user: name } });
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo saved > "$HOLDFAST_USER_DIR/notes.txt"'));
    const old = (await hf.runs.get(run.id)).sandbox?.id as string;
    await inSandbox(hf, run.id, 'echo "unsaved edit" > user/notes.txt');
    await hf.users.revoke({ tenant: hf.tenant.name, name });
    const v2 = await hf.deployments.create({ provider: 'bwrap', env: { V: '2' } });
    await hf.deployments.publish(channel, v2.id);

    await expect(hf.runs.upgrade(run.id)).rejects.toMatchObject({ code: 'FORBIDDEN', data: { reason: 'user_revoked', scope: 'user' } });
    expect(await hf.runs.get(run.id)).toMatchObject({ deploymentId: v1.id, sandbox: { id: old } });
    // The automatic upgrade before a turn meets the same refusal: the turn runs on the old sandbox, the edit in it.
    const kept = await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo "$V"; cat "$HOLDFAST_USER_DIR/notes.txt"'));
    expect(kept.value.toString()).toBe('1\nunsaved edit\n');
    expect(await provider.get(old)).toBeDefined();
  });
});
