import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../src/errors.js';
import {
  type Holdfast,
  openHoldfast,
  type RunExtension,
  type RunLogEvent,
  type RunSandboxContext,
  type RunSettings,
  type SaveMoment,
  type TurnContext,
} from '../src/index.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const exec =
  (script: string) =>
  ({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>) =>
    sandbox.run(['sh', '-c', script], { cwd: sandbox.workspaceRoot, signal });

/** What a call was: `attach:cold`, `save:turn_end`, `boundary`. */
type Call = `attach:${'cold' | 'warm'}` | `save:${SaveMoment}` | 'boundary';

/**
 * An extension that writes each call to a shared log (`name call sandbox`), answers attach with
 * an environment naming the call, and rejects with `STORE_UNAVAILABLE` the calls in `failing`.
 */
class RecordingExtension implements RunExtension {
  readonly failing = new Set<Call>();
  /** The run's head checkpoint each boundary saw. */
  readonly headsAtBoundary: (string | null)[] = [];
  private attaches = 0;

  constructor(
    readonly name: string,
    private readonly log: string[],
    private readonly hf: () => Holdfast,
  ) {}

  async attach(context: RunSandboxContext, start: 'cold' | 'warm'): Promise<Readonly<Record<string, string>>> {
    this.call(`attach:${start}`, context);
    this.attaches += 1;
    return { [`HF_${this.name}`]: `${this.name}-${start}-${this.attaches}`, SHARED: this.name };
  }

  /** Runs before an injected failure of a save (what else goes wrong at that moment). */
  beforeFailure: ((context: RunSandboxContext) => Promise<void>) | undefined;

  async save(context: RunSandboxContext, moment: SaveMoment): Promise<void> {
    if (this.failing.has(`save:${moment}`)) await this.beforeFailure?.(context);
    this.call(`save:${moment}`, context);
  }

  async boundary(context: RunSandboxContext): Promise<void> {
    this.call('boundary', context);
    this.headsAtBoundary.push((await this.hf().meta.workspaces.get(context.run.workspaceId)).headCheckpointId);
  }

  private call(call: Call, context: RunSandboxContext): void {
    this.log.push(`${this.name} ${call} ${context.sandbox.id}`);
    if (this.failing.has(call)) throw new StoreError(`[${this.name}] injected failure of ${call}`);
  }
}

describe.each(BACKENDS)('run extensions in the lifecycle: $name', (backend) => {
  let opened: OpenedBackends;
  let provider: BwrapSandboxProvider;
  const instances: Holdfast[] = [];

  /** A Holdfast with extensions `A` and `B` (in that order) writing to one log. */
  const server = async (owner: string, settings: Partial<RunSettings> = {}) => {
    const log: string[] = [];
    let hf: Holdfast | undefined;
    const self = () => hf as Holdfast;
    const a = new RecordingExtension('A', log, self);
    const b = new RecordingExtension('B', log, self);
    const events: RunLogEvent[] = [];
    hf = await openHoldfast({
      blobs: opened.blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, `cache-${owner}`),
      providers: () => provider,
      owner,
      runSettings: settings,
      runExtensions: [a, b],
      onRunEvent: (e) => events.push(e),
    });
    instances.push(hf);
    /** The log's calls without sandbox ids, and the log taken. */
    const take = () => log.splice(0).map((line) => line.split(' ').slice(0, 2).join(' '));
    return { hf, a, b, log, take, events };
  };
  const sandboxOf = async (hf: Holdfast, runId: string) => (await hf.runs.get(runId)).sandbox?.id ?? '';

  /**
   * Server A runs a turn writing `script`, then "dies" holding the lease (no heartbeat); after
   * the lease's TTL, server B is ready to take the run over.
   */
  const deadOwner = async (name: string, script: string) => {
    const first = await server(`${name}-a`, { leaseTtlMs: 500, heartbeatMs: 3_600_000 });
    const second = await server(`${name}-b`, { leaseTtlMs: 500 });
    const deployment = await first.hf.deployments.create({ provider: 'bwrap' });
    const run = await first.hf.runs.create({ deploymentId: deployment.id });
    await first.hf.runs.turn(run.id, exec(script));
    const sandbox = await sandboxOf(first.hf, run.id);
    expect(await first.hf.meta.runs.claim(run.id, `${name}-a`, 500)).toBeDefined(); // A "dies" holding the lease
    await sleep(600);
    return { first, second, run, sandbox };
  };

  beforeAll(async () => {
    expectBwrapInstalled();
    opened = await backend.open();
    provider = new BwrapSandboxProvider({ root: path.join(opened.dir, 'sandboxes') });
  });
  afterAll(async () => {
    for (const hf of instances) await hf.close();
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it('calls attach, save and boundary in order at every moment, and the attach env reaches every command of the run', async () => {
    const { hf, a, b, take, events } = await server('order', { checkpointIntervalMs: 150 });
    b.failing.add('save:periodic');
    const deployment = await hf.deployments.create({ provider: 'bwrap', env: { DEP: 'd', SHARED: 'dep' } });
    const run = await hf.runs.create({ deploymentId: deployment.id });

    const first = await hf.runs.turn(run.id, exec('sleep 0.7; echo "$HF_A $HF_B $DEP $SHARED"'));
    expect(first.value.stdout.toString()).toBe('A-cold-1 B-cold-1 d B\n');
    expect(first.periodic.started).toBeGreaterThanOrEqual(1);
    const calls = take();
    expect(calls.slice(0, 2)).toEqual(['A attach:cold', 'B attach:cold']);
    expect(calls.slice(-4)).toEqual(['A save:turn_end', 'B save:turn_end', 'A boundary', 'B boundary']);
    const periodic = calls.slice(2, -4);
    expect(periodic.length).toBe(2 * first.periodic.started);
    expect(periodic).toEqual(Array.from({ length: first.periodic.started }, () => ['A save:periodic', 'B save:periodic']).flat());
    // B's periodic saves failed: logged, and each periodic checkpoint still happened.
    const checkpoints = await hf.checkpoints.list(run.id);
    expect(checkpoints.filter((c) => c.reason === 'periodic' && c.status === 'ready').length).toBe(first.periodic.started);
    expect(events.filter((e) => e.event === 'extension_failed' && e.extension === 'B' && e.moment === 'periodic').length).toBe(
      first.periodic.started,
    );
    expect(a.headsAtBoundary).toEqual([first.checkpoint.id]);

    // The same sandbox, warm: attached again, its new environment in the command; the command's own env wins.
    const sandbox = await sandboxOf(hf, run.id);
    const second = await hf.runs.command(run.id, { argv: ['sh', '-c', 'echo "$HF_A $HF_B $SHARED"'], env: { HF_B: 'mine' } });
    expect(second.value.stdout.toString()).toBe('A-warm-2 mine B\n');
    expect(await sandboxOf(hf, run.id)).toBe(sandbox);
    expect(take()).toEqual(['A attach:warm', 'B attach:warm', 'A save:turn_end', 'B save:turn_end', 'A boundary', 'B boundary']);

    const manual = await hf.runs.checkpoint(run.id);
    expect(manual).toMatchObject({ reason: 'manual', status: 'ready' });
    expect(take()).toEqual(['A attach:warm', 'B attach:warm', 'A save:manual', 'B save:manual']);

    const events2 = await hf.runs.events(run.id);
    expect(events2.find((e) => e.kind === 'A' && e.step === 'save_turn_end')).toMatchObject({ status: 'ok' });
    expect(events2.find((e) => e.kind === 'B' && e.step === 'save_periodic')).toMatchObject({ status: 'failed' });
    expect(events2.find((e) => e.kind === 'A' && e.step === 'attach_cold')).toMatchObject({ status: 'ok' });

    const report = await hf.shutdown({ deadlineMs: 10_000 });
    expect(report.checkpointed).toEqual([run.id]);
    expect(take()).toEqual(['A save:shutdown', 'B save:shutdown']);
    expect((await hf.checkpoints.list(run.id))[0]).toMatchObject({ reason: 'shutdown', status: 'ready' });
  });

  it('a failing turn_end save still checkpoints the work (reason final) and fails the turn with that error', async () => {
    const { hf, a, b, take } = await server('turn-end');
    a.failing.add('save:turn_end');
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    await expect(hf.runs.turn(run.id, exec('echo work > w.txt'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    const [latest] = await hf.checkpoints.list(run.id);
    expect(latest).toMatchObject({ reason: 'final', status: 'ready' });
    const [turn] = await hf.runs.turns(run.id);
    expect(turn).toMatchObject({ status: 'failed', error: { code: 'STORE_UNAVAILABLE' } });
    const files = await hf.checkpoints.ls(latest?.id ?? '');
    expect(files.kind === 'dir' && files.entries.map((e) => e.name)).toEqual(['w.txt']);
    // B still saved; no boundary after a failed turn.
    expect(take()).toEqual(['A attach:cold', 'B attach:cold', 'A save:turn_end', 'B save:turn_end']);
    expect(b.headsAtBoundary).toEqual([]);
    a.failing.clear();
    const next = await hf.runs.turn(run.id, exec('cat w.txt'));
    expect(next.value.stdout.toString()).toBe('work\n');
  });

  it('a failing attach fails the turn before it starts; the sandbox stays the run’s, cold until an attach completes', async () => {
    const { hf, b, take } = await server('attach');
    b.failing.add('attach:cold');
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    await expect(hf.runs.turn(run.id, exec('true'))).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(take()).toEqual(['A attach:cold', 'B attach:cold']);
    expect(await hf.runs.turns(run.id)).toEqual([]);
    const sandbox = await sandboxOf(hf, run.id);
    expect(await provider.get(sandbox)).toBeDefined();
    b.failing.clear();
    await hf.runs.turn(run.id, exec('true'));
    expect(take().slice(0, 2)).toEqual(['A attach:cold', 'B attach:cold']);
    expect(await sandboxOf(hf, run.id)).toBe(sandbox);
  });

  it('a failing takeover save leaves the dead owner’s sandbox alive and the run release_recovery_required', async () => {
    const { second, run, sandbox } = await deadOwner('takeover', 'echo kept > kept.txt');
    second.a.failing.add('save:takeover');
    await expect(second.hf.runs.turn(run.id, exec('true'))).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'release_recovery_required' },
    });
    expect(second.take()).toEqual(['A save:takeover']);
    const stuck = await second.hf.runs.get(run.id);
    expect(stuck.lease).toMatchObject({
      state: 'release_recovery_required',
      error: { code: 'STORE_UNAVAILABLE', reason: 'work_folder_save_required', sandbox },
    });
    expect(stuck.sandbox?.id).toBe(sandbox);
    expect(await provider.get(sandbox)).toBeDefined();
    const alive = await (await provider.get(sandbox))?.run(['cat', 'kept.txt']);
    expect(alive?.stdout.toString()).toBe('kept\n');
    // Resolving saves it first: while that save still fails, the sandbox and the state stay.
    await expect(second.hf.runs.resolveLease(run.id)).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'work_folder_save_required', sandbox, error: { code: 'STORE_UNAVAILABLE' } },
    });
    expect(second.take()).toEqual(['A save:takeover']);
    expect(await provider.get(sandbox)).toBeDefined();
    expect((await second.hf.runs.get(run.id)).lease.state).toBe('release_recovery_required');
    // Once it saves, the resolution stops the sandbox; the next turn rebuilds from the head, cold.
    second.a.failing.delete('save:takeover');
    await second.hf.runs.resolveLease(run.id);
    expect(second.take()).toEqual(['A save:takeover', 'B save:takeover']);
    expect(await provider.get(sandbox)).toBeUndefined();
    const after = await second.hf.runs.turn(run.id, exec('cat kept.txt'));
    expect(after.value.stdout.toString()).toBe('kept\n');
    expect(second.take().slice(0, 2)).toEqual(['A attach:cold', 'B attach:cold']);
  });

  it('a takeover save that fails because the sandbox was destroyed meanwhile lets the takeover go on: nothing is left to keep', async () => {
    const { second, run, sandbox } = await deadOwner('gone', 'echo kept > kept.txt');
    // The sandbox is destroyed behind the run's back while the takeover saves it, and that save fails.
    second.a.failing.add('save:takeover');
    second.a.beforeFailure = () => provider.destroy(sandbox);
    const after = await second.hf.runs.turn(run.id, exec('cat kept.txt'));
    expect(after.value.stdout.toString()).toBe('kept\n');
    expect(await sandboxOf(second.hf, run.id)).not.toBe(sandbox);
    expect((await second.hf.runs.get(run.id)).lease.state).not.toBe('release_recovery_required');
    const events = await second.hf.runs.events(run.id);
    expect(events.find((e) => e.step === 'takeover_save')).toMatchObject({
      status: 'failed',
      data: { sandbox, reason: 'sandbox_gone', error: { code: 'STORE_UNAVAILABLE' } },
    });
    expect(events.some((e) => e.step === 'keep_sandbox')).toBe(false);
  });

  it('resolving with discardUnsaved destroys a sandbox whose work could not be saved, without trying again', async () => {
    const { second, run, sandbox } = await deadOwner('discard', 'true');
    second.a.failing.add('save:takeover');
    await expect(second.hf.runs.turn(run.id, exec('true'))).rejects.toMatchObject({ code: 'CONFLICT' });
    second.take();
    const resolved = await second.hf.runs.resolveLease(run.id, { discardUnsaved: true });
    expect(second.take()).toEqual([]);
    expect(resolved.lease.state).toBe('free');
    expect(await provider.get(sandbox)).toBeUndefined();
  });

  it('a failing upgrade save keeps the old sandbox; once it saves, the run moves and the new sandbox attaches cold', async () => {
    const { hf, a, take, events } = await server('upgrade');
    const v1 = await hf.deployments.create({ provider: 'bwrap', env: { V: '1' } });
    await hf.deployments.publish('ext', v1.id);
    const run = await hf.runs.create({ channel: 'ext' });
    await hf.runs.turn(run.id, exec('echo kept > kept.txt'));
    const old = await sandboxOf(hf, run.id);
    take();
    const v2 = await hf.deployments.create({ provider: 'bwrap', env: { V: '2' } });
    await hf.deployments.publish('ext', v2.id);
    a.failing.add('save:upgrade');

    await expect(hf.runs.upgrade(run.id)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(take()).toEqual(['A save:upgrade']);
    expect(await hf.runs.get(run.id)).toMatchObject({ deploymentId: v1.id, sandbox: { id: old } });
    expect(await provider.get(old)).toBeDefined();

    // The automatic upgrade before a turn fails the same way: logged, and the turn runs on the old sandbox.
    const kept = await hf.runs.turn(run.id, exec('echo "$V"'));
    expect(kept.value.stdout.toString()).toBe('1\n');
    expect(events.some((e) => e.event === 'upgrade_failed' && e.deploymentId === v2.id)).toBe(true);
    expect(take()).toEqual([
      'A save:upgrade',
      'A attach:warm',
      'B attach:warm',
      'A save:turn_end',
      'B save:turn_end',
      'A boundary',
      'B boundary',
    ]);

    a.failing.clear();
    const moved = await hf.runs.turn(run.id, exec('echo "$V $HF_A"; cat kept.txt'));
    expect(moved.value.stdout.toString()).toBe('2 A-cold-3\nkept\n');
    const calls = take();
    expect(calls.slice(0, 4)).toEqual(['A save:upgrade', 'B save:upgrade', 'A attach:cold', 'B attach:cold']);
    expect(await hf.runs.get(run.id)).toMatchObject({ deploymentId: v2.id });
    expect(await provider.get(old)).toBeUndefined();
  });
});
