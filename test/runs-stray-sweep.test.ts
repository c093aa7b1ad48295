import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast, type Run, type RunLogEvent, type RunSettings, type TurnContext } from '../src/index.js';
import { COPY_LABEL, RUN_LABEL } from '../src/runs/sandbox/sandbox-lifecycle.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { createApp } from '../src/server/app.js';
import { silentLogger } from '../src/server/logger.js';
import { Metrics } from '../src/server/metrics.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { FaultyProvider } from './support/faulty-provider.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const sh = (script: string) => ['sh', '-c', script];
const exec =
  (script: string) =>
  ({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>) =>
    sandbox.run(sh(script), { cwd: sandbox.workspaceRoot, signal });

describe.each(BACKENDS)('stray sandbox sweep: $name', (backend) => {
  let opened: OpenedBackends;
  let provider: FaultyProvider;
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
  /** A run with one completed turn (`kept.txt` in its head checkpoint) and a live committed sandbox. */
  const runWithTurn = async (hf: Holdfast): Promise<Run & { sandbox: NonNullable<Run['sandbox']> }> => {
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    await hf.runs.turn(run.id, exec('echo kept > kept.txt'));
    const after = await hf.runs.get(run.id);
    if (after.sandbox === null) throw new Error('the turn committed no sandbox');
    return { ...after, sandbox: after.sandbox };
  };
  const labelledFor = async (runId: string) => (await provider.list()).filter((s) => s.labels[RUN_LABEL] === runId).map((s) => s.id);

  beforeAll(async () => {
    expectBwrapInstalled();
    opened = await backend.open();
    provider = new FaultyProvider(new BwrapSandboxProvider({ root: path.join(opened.dir, 'sandboxes') }));
  });
  afterAll(async () => {
    for (const hf of instances) await hf.close();
    provider.destroyMode = 'real';
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it('removes the old sandbox a failed destroy_old_sandbox left after an upgrade, and never the committed one', async () => {
    const hf = await server('upgrade');
    const v1 = await hf.deployments.create({ provider: 'bwrap', env: { V: '1' } });
    await hf.deployments.publish('main', v1.id);
    const run = await hf.runs.create({ channel: 'main' });
    await hf.runs.turn(run.id, exec('echo kept > kept.txt'));
    const old = (await hf.runs.get(run.id)).sandbox?.id ?? '';
    const v2 = await hf.deployments.create({ provider: 'bwrap', env: { V: '2' } });
    await hf.deployments.publish('main', v2.id);
    provider.destroyMode = 'fail';
    await hf.runs.turn(run.id, exec('echo two > two.txt'));
    provider.destroyMode = 'real';
    const upgraded = await hf.runs.get(run.id);
    expect(upgraded.deploymentId).toBe(v2.id);
    const committed = upgraded.sandbox?.id ?? '';
    expect(committed).not.toBe(old);
    const events = await hf.runs.events(run.id);
    expect(events.find((e) => e.kind === 'upgrade' && e.step === 'destroy_old_sandbox')).toMatchObject({ status: 'failed' });
    expect((await labelledFor(run.id)).sort()).toEqual([old, committed].sort());

    const report = await hf.sweepStrays();
    expect(report.removed).toContainEqual({ runId: run.id, provider: 'bwrap', sandbox: old });
    expect(report.removed.map((s) => s.sandbox)).not.toContain(committed);
    expect(await provider.get(old)).toBeUndefined();
    expect(await labelledFor(run.id)).toEqual([committed]);
    expect(provider.destroyed).not.toContain(committed);
    const swept = (await hf.runs.events(run.id)).filter((e) => e.kind === 'sweep');
    expect(swept).toMatchObject([{ step: 'remove_stray', status: 'ok', data: { sandbox: old, provider: 'bwrap' } }]);
    // The run goes on in the sandbox it committed: no recovery, both files there.
    const next = await hf.runs.turn(run.id, exec('cat kept.txt two.txt; echo $V'));
    expect(next.value.stdout.toString()).toBe('kept\ntwo\n2\n');
    expect((await hf.runs.get(run.id)).sandbox?.id).toBe(committed);
    expect((await hf.runs.events(run.id)).some((e) => e.kind === 'recovery')).toBe(false);
  });

  it('leaves a sandbox made for a run whose lease another owner holds (a recovery between create and commit), then removes it once released', async () => {
    const hf = await server('busy');
    const run = await runWithTurn(hf);
    const claimed = await hf.meta.runs.claim(run.id, 'recovering-elsewhere', 60_000);
    if (claimed === undefined) throw new Error('the lease should be free');
    const pending = await provider.create({ labels: { [RUN_LABEL]: run.id } });

    const first = await hf.sweepStrays();
    expect(first.skipped).toContainEqual({ runId: run.id, reason: 'busy', sandboxes: [pending.id] });
    expect(first.removed.filter((s) => s.runId === run.id)).toEqual([]);
    expect(await provider.get(pending.id)).toBeDefined();
    expect(await provider.get(run.sandbox.id)).toBeDefined();
    // The sweep changed nothing of the held lease.
    expect((await hf.runs.get(run.id)).lease).toMatchObject({ state: 'held', owner: 'recovering-elsewhere', epoch: claimed.lease.epoch });

    // The "recovery" commits its sandbox and releases: now the old committed one is the stray.
    await hf.meta.runs.setSandbox(run.id, claimed.lease.epoch, { provider: 'bwrap', id: pending.id }, run.deploymentId);
    expect(await hf.meta.runs.release(run.id, claimed.lease.epoch)).toBe(true);
    const second = await hf.sweepStrays();
    expect(second.removed.filter((s) => s.runId === run.id)).toEqual([{ runId: run.id, provider: 'bwrap', sandbox: run.sandbox.id }]);
    expect(await provider.get(pending.id)).toBeDefined();
    expect(provider.destroyed).not.toContain(pending.id);
    expect((await hf.runs.get(run.id)).sandbox?.id).toBe(pending.id);
  });

  it('takes no lease when a run has only its committed sandbox', async () => {
    const hf = await server('committed');
    const run = await runWithTurn(hf);
    const report = await hf.sweepStrays();
    expect(report.removed.filter((s) => s.runId === run.id)).toEqual([]);
    expect(report.skipped.filter((s) => s.runId === run.id)).toEqual([]);
    const after = await hf.runs.get(run.id);
    expect(after.lease.epoch).toBe(run.lease.epoch);
    expect(after.sandbox).toEqual(run.sandbox);
    expect(await provider.get(run.sandbox.id)).toBeDefined();
  });

  it('leaves sandboxes labelled for a run this store does not know, and restored copies', async () => {
    const hf = await server('foreign');
    const run = await runWithTurn(hf);
    const foreign = await provider.create({ labels: { [RUN_LABEL]: randomUUID() } });
    const copy = await hf.runs.restore(run.id);
    expect((await provider.list()).find((s) => s.id === copy.sandbox.id)?.labels[COPY_LABEL]).toBe(run.id);
    const report = await hf.sweepStrays();
    expect(report.foreign).toBeGreaterThanOrEqual(1);
    expect(report.removed.map((s) => s.sandbox)).not.toContain(foreign.id);
    expect(report.removed.map((s) => s.sandbox)).not.toContain(copy.sandbox.id);
    expect(await provider.get(foreign.id)).toBeDefined();
    expect(await provider.get(copy.sandbox.id)).toBeDefined();
    expect(await provider.get(run.sandbox.id)).toBeDefined();
    await provider.destroy(foreign.id);
    await provider.destroy(copy.sandbox.id);
  });

  it('leaves a run whose lease a dead owner still holds: the takeover and the strays are for its next turn', async () => {
    const hf = await server('takeover');
    const run = await runWithTurn(hf);
    const dead = await hf.meta.runs.claim(run.id, 'dead-owner', 200);
    expect(dead?.lease.state).toBe('held');
    // The dead owner crashed between creating a sandbox and committing it.
    const uncommitted = await provider.create({ labels: { [RUN_LABEL]: run.id } });
    await sleep(300);
    const report = await hf.sweepStrays();
    expect(report.skipped).toContainEqual({ runId: run.id, reason: 'busy', sandboxes: [uncommitted.id] });
    expect(report.removed.filter((s) => s.runId === run.id)).toEqual([]);
    // Nothing touched: not the committed sandbox, not the lease (no takeover by the sweep).
    expect(await provider.get(run.sandbox.id)).toBeDefined();
    expect(provider.destroyed).not.toContain(run.sandbox.id);
    expect((await hf.runs.get(run.id)).lease).toMatchObject({ state: 'held', owner: 'dead-owner', epoch: dead?.lease.epoch });
    // The next turn takes the lease over, stops the dead owner's sandbox, removes the stray and rebuilds.
    const next = await hf.runs.turn(run.id, exec('cat kept.txt'));
    expect(next.value.stdout.toString()).toBe('kept\n');
    const events = await hf.runs.events(run.id);
    expect(events.find((e) => e.kind === 'lease' && e.step === 'takeover')).toMatchObject({ data: { from: 'dead-owner' } });
    expect(await provider.get(uncommitted.id)).toBeUndefined();
  });

  it('a stray whose destroy fails is reported, recorded and counted, and removed by a later sweep', async () => {
    const hf = await server('retry');
    const metrics = new Metrics();
    createApp({ hf, log: silentLogger, metrics, version: 'test' });
    const run = await runWithTurn(hf);
    const stray = await provider.create({ labels: { [RUN_LABEL]: run.id } });
    provider.destroyMode = 'fail';
    const failed = await hf.sweepStrays().finally(() => {
      provider.destroyMode = 'real';
    });
    expect(failed.failed).toContainEqual({ provider: 'bwrap', sandbox: stray.id, runId: run.id, error: 'STORE_UNAVAILABLE' });
    expect((await hf.runs.events(run.id)).find((e) => e.kind === 'sweep')).toMatchObject({ step: 'remove_stray', status: 'failed' });
    expect((await hf.runs.get(run.id)).lease.state).toBe('free');
    const retried = await hf.sweepStrays();
    expect(retried.removed).toContainEqual({ runId: run.id, provider: 'bwrap', sandbox: stray.id });
    expect(await provider.get(run.sandbox.id)).toBeDefined();
    const text = await metrics.render();
    expect(text).toContain('holdfast_run_steps_total{kind="sweep",status="failed",step="remove_stray"} 1');
    expect(text).toContain('holdfast_run_steps_total{kind="sweep",status="ok",step="remove_stray"} 1');
  });

  it('sweeps on its timer, and the timer stops on shutdown', async () => {
    const hf = await server('timer', { straySweepIntervalMs: 100 });
    const run = await runWithTurn(hf);
    const sweeps: RunLogEvent[] = [];
    hf.onRunEvent((event) => {
      if (event.event === 'stray_sweep_finished') sweeps.push(event);
    });
    const stray = await provider.create({ labels: { [RUN_LABEL]: run.id } });
    hf.startStraySweeps();
    hf.startStraySweeps(); // idempotent: still one timer
    // The stray goes during a sweep, which reports once it has finished: wait for both.
    for (let waited = 0; (await provider.get(stray.id)) !== undefined || sweeps.length === 0; waited += 50) {
      if (waited > 10_000) throw new Error('the periodic sweep never removed the stray');
      await sleep(50);
    }
    expect(sweeps.some((e) => e.event === 'stray_sweep_finished' && e.removed >= 1)).toBe(true);
    await hf.shutdown({ deadlineMs: 5000 });
    const counted = sweeps.length;
    const late = await provider.create({ labels: { [RUN_LABEL]: run.id } });
    await sleep(500);
    expect(sweeps.length).toBe(counted);
    expect(await provider.get(late.id)).toBeDefined();
    await provider.destroy(late.id);
  });
});
