import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast, type RunLogEvent, type TurnContext } from '../src/index.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { createApp } from '../src/server/app.js';
import { silentLogger } from '../src/server/logger.js';
import { Metrics } from '../src/server/metrics.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const exec =
  (script: string) =>
  ({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>) =>
    sandbox.run(['sh', '-c', script], { cwd: sandbox.workspaceRoot, signal });

/** A recovery is seen where operators look: its steps as typed run events, and counted in `/metrics`. */
describe('run steps in /metrics', () => {
  let opened: OpenedBackends;
  let hf: Holdfast;
  let provider: BwrapSandboxProvider;

  beforeAll(async () => {
    expectBwrapInstalled();
    opened = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    provider = new BwrapSandboxProvider({ root: path.join(opened.dir, 'sandboxes') });
    hf = await openHoldfast({
      blobs: opened.blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, 'cache'),
      providers: () => provider,
    });
  });
  afterAll(async () => {
    await hf?.close();
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it('a recovery after the sandbox was destroyed behind Holdfast’s back shows its steps and the turns', async () => {
    const metrics = new Metrics();
    const app = createApp({ hf, log: silentLogger, metrics, version: 'test' });
    const events: RunLogEvent[] = [];
    hf.onRunEvent((e) => events.push(e));
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    await hf.runs.turn(run.id, exec('echo one > one.txt'));
    const sandbox = (await hf.runs.get(run.id)).sandbox;
    if (sandbox === null) throw new Error('no sandbox committed');
    await provider.destroy(sandbox.id);
    const next = await hf.runs.turn(run.id, exec('cat one.txt'));
    expect(next.value.stdout.toString()).toBe('one\n');

    const steps = events.flatMap((e) => (e.event === 'step' && e.kind === 'recovery' ? [`${e.step}:${e.status}`] : []));
    expect(steps).toEqual(['detect_missing:ok', 'create_sandbox:ok', 'restore:ok', 'setup:ok', 'validate:ok', 'commit:ok']);
    const text = await (await app.request('/metrics')).text();
    expect(text).toMatch(/holdfast_run_steps_total\{kind="recovery",status="ok",step="restore"\} 1\n/);
    expect(text).toMatch(/holdfast_run_step_duration_seconds_count\{kind="recovery",step="restore"\} 1\n/);
    expect(text).toMatch(/holdfast_turns_total\{outcome="completed"\} 2\n/);
  });
});
