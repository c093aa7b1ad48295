import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../src/errors.js';
import { type Holdfast, openHoldfast, type RunSettings, type TurnContext } from '../src/index.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';
import { FaultyProvider } from './support/faulty-provider.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';

const sh = (script: string) => ['sh', '-c', script];

const PROVIDERS: readonly RunProviderCase[] = [BWRAP_RUNS, dockerRuns('lifecycle')];

/** Every backend pair on bwrap; docker on the first pair (the provider, not the stores, is what differs). */
const CASES: ReadonlyArray<{ name: string; backend: BackendCase; sandboxes: RunProviderCase }> = [
  ...BACKENDS.map((backend) => ({ name: `${backend.name} on bwrap`, backend, sandboxes: PROVIDERS[0] as RunProviderCase })),
  {
    name: `${(BACKENDS[0] as BackendCase).name} on docker`,
    backend: BACKENDS[0] as BackendCase,
    sandboxes: PROVIDERS[1] as RunProviderCase,
  },
];

describe.each(CASES)('run lifecycle through the library: $name', ({ backend, sandboxes }) => {
  let opened: OpenedBackends;
  let provider: FaultyProvider;
  const instances: Holdfast[] = [];

  /** A Holdfast on the shared stores, as one server of several. */
  const server = async (
    owner: string,
    settings: Partial<RunSettings> = {},
    blobs = opened.blobs,
    meta: OpenedBackends['meta'] = opened.meta,
  ): Promise<Holdfast> => {
    const hf = await openHoldfast({
      blobs,
      meta,
      cacheDir: path.join(opened.dir, `cache-${owner}`),
      providers: () => provider,
      owner,
      runSettings: settings,
    });
    instances.push(hf);
    return hf;
  };
  const newRun = async (hf: Holdfast) => {
    const image = sandboxes.image();
    const deployment = await hf.deployments.create({ provider: sandboxes.name, ...(image === null ? {} : { image }) });
    return hf.runs.create({ deploymentId: deployment.id });
  };
  const exec =
    (script: string) =>
    ({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>) =>
      sandbox.run(sh(script), { cwd: sandbox.workspaceRoot, signal });

  beforeAll(async () => {
    opened = await backend.open();
    provider = new FaultyProvider(sandboxes.open(opened.dir));
  });
  afterAll(async () => {
    for (const hf of instances) await hf.close();
    provider.destroyMode = 'real';
    for (const s of (await provider?.list()) ?? []) await provider.destroy(s.id);
    await opened?.cleanup();
  });

  it('periodic checkpoints run while a turn runs, never two at once, and the turn ends with its own checkpoint', async () => {
    const hf = await server('periodic', { checkpointIntervalMs: 200 });
    const run = await newRun(hf);
    const outcome = await hf.runs.turn(run.id, async (ctx) => {
      await exec('for i in 1 2 3 4 5 6 7 8; do echo $i > f$i; sleep 0.2; done')(ctx);
      // However loaded the machine, the turn lasts until two periodic checkpoints have finished (bounded).
      const until = Date.now() + 30_000;
      const finished = async () =>
        (await hf.checkpoints.list(run.id)).filter((c) => c.reason === 'periodic' && c.status !== 'pending').length;
      while ((await finished()) < 2 && Date.now() < until) await sleep(50);
    });
    expect(outcome.periodic.started).toBeGreaterThanOrEqual(2);
    const checkpoints = (await hf.checkpoints.list(run.id)).reverse();
    const periodic = checkpoints.filter((c) => c.reason === 'periodic');
    expect(periodic.length).toBe(outcome.periodic.started);
    expect(periodic.some((c) => c.status === 'ready')).toBe(true);
    expect(checkpoints.at(-1)).toMatchObject({ id: outcome.checkpoint.id, reason: 'turn', status: 'ready' });
    for (let i = 1; i < checkpoints.length; i += 1) {
      const [prev, next] = [checkpoints[i - 1], checkpoints[i]];
      expect(next?.createdAt).toBeGreaterThanOrEqual(prev?.finishedAt ?? Number.POSITIVE_INFINITY);
    }
    const files = await hf.checkpoints.ls(outcome.checkpoint.id);
    expect(files.kind === 'dir' && files.entries.map((e) => e.name)).toEqual(['f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7', 'f8']);
  });

  it('a turn whose body throws still saves its work (final checkpoint) and fails with the body error', async () => {
    const hf = await server('final');
    const run = await newRun(hf);
    const failing = hf.runs.turn(run.id, async (ctx) => {
      await exec('echo partial > work.txt')(ctx);
      throw new Error('agent crashed');
    });
    await expect(failing).rejects.toThrow('agent crashed');
    const [latest] = await hf.checkpoints.list(run.id);
    expect(latest).toMatchObject({ reason: 'final', status: 'ready' });
    const [turn] = await hf.runs.turns(run.id);
    expect(turn).toMatchObject({ status: 'failed', error: { code: 'INTERNAL' } });
    const chunks: Uint8Array[] = [];
    for await (const chunk of hf.checkpoints.cat(latest?.id ?? '', 'work.txt')) chunks.push(chunk);
    const bytes = Buffer.concat(chunks);
    expect(bytes.toString()).toBe('partial\n');
  });

  it('a turn whose failure could not be recorded (the store refused it then) is failed by the next turn, never left running', async () => {
    // A fault double around the real store: the next `failed` end of a turn is refused as the store being down.
    let refuseFailedEnd = false;
    const real = opened.meta;
    const meta = new Proxy(real, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (prop !== 'turns') return typeof value === 'function' ? value.bind(target) : value;
        const turns = value as typeof real.turns;
        return {
          ...turns,
          finish: (id: string, outcome: Parameters<typeof turns.finish>[1]) => {
            if (outcome.status === 'failed' && refuseFailedEnd) {
              refuseFailedEnd = false;
              return Promise.reject(new StoreError('injected: the store is down'));
            }
            return turns.finish(id, outcome);
          },
        };
      },
    });
    const hf = await server('unrecorded', {}, opened.blobs, meta);
    const run = await newRun(hf);
    refuseFailedEnd = true;
    const failing = hf.runs.turn(run.id, async (ctx) => {
      await exec('echo one > a.txt')(ctx);
      throw new Error('agent crashed');
    });
    await expect(failing).rejects.toThrow('agent crashed');
    expect(refuseFailedEnd).toBe(false);
    // What the store holds after that: the turn still running, its end never written.
    expect((await hf.runs.turns(run.id)).map((t) => [t.seq, t.status])).toEqual([[1, 'running']]);
    const next = await hf.runs.turn(run.id, exec('echo two > b.txt'));
    const turns = await hf.runs.turns(run.id);
    expect(turns.map((t) => [t.seq, t.status])).toEqual([
      [2, 'completed'],
      [1, 'failed'],
    ]);
    expect(turns[1]).toMatchObject({ error: { code: 'STALE_LEASE' } });
    expect(turns[1]?.finishedAt).not.toBeNull();
    expect(turns[0]?.checkpointId).toBe(next.checkpoint.id);
  });

  it('shutdown checkpoints idle sandboxes inside the deadline and reports the turn that did not finish, which fails INTERRUPTED', async () => {
    const hf = await server('drain');
    const [a, b, busy] = [await newRun(hf), await newRun(hf), await newRun(hf)];
    await hf.runs.turn(a.id, exec('echo a > a.txt'));
    await hf.runs.turn(b.id, exec('echo b > b.txt'));
    const started = hf.runs.turn(busy.id, exec('sleep 20')).catch((error: unknown) => error);
    while (hf.activeTurns() === 0) await sleep(20);
    const report = await hf.shutdown({ deadlineMs: 2000, concurrency: 2 });
    expect(report.checkpointed.sort()).toEqual([a.id, b.id].sort());
    expect(report.incomplete).toEqual([{ runId: busy.id, what: 'turn', error: 'TIMEOUT' }]);
    expect(report.durationMs).toBeLessThan(2000 + 3000);
    for (const run of [a, b]) expect((await hf.checkpoints.list(run.id))[0]).toMatchObject({ reason: 'shutdown', status: 'ready' });
    // The turn cut at the deadline did not finish: it fails with INTERRUPTED, and so does its row.
    expect(await started).toMatchObject({ code: 'INTERRUPTED', data: { reason: 'shutdown_deadline', deadlineMs: 2000 } });
    expect((await hf.runs.turns(busy.id))[0]).toMatchObject({ status: 'failed', error: { code: 'INTERRUPTED' } });
    await expect(hf.runs.turn(a.id, exec('true'))).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('a stale owner cannot move the head: its checkpoint commit is fenced with STALE_LEASE after another server took over', async () => {
    const slowBlobs = new FaultInjectingBlobStore(opened.blobs);
    const a = await server('server-a', { leaseTtlMs: 1000, heartbeatMs: 3_600_000 }, slowBlobs);
    const b = await server('server-b', { leaseTtlMs: 1000 });
    const run = await newRun(a);
    await a.runs.turn(run.id, exec('echo one > one.txt'));
    // A's next checkpoint stalls in the upload long enough for its lease (never renewed) to expire.
    slowBlobs.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'latency', ms: 3000 } });
    const stale = a.runs.turn(run.id, exec('echo from-a > a.txt')).catch((error: unknown) => error);
    await sleep(1200);
    // The provider "stops" A's sandbox without doing it: A keeps running, as in a split brain.
    provider.destroyMode = 'lie';
    const taken = await b.runs.turn(run.id, exec('echo from-b > b.txt'), { waitMs: 10_000 });
    provider.destroyMode = 'real';
    expect(await stale).toMatchObject({ code: 'STALE_LEASE' });
    const workspace = await b.meta.workspaces.get(run.workspaceId);
    expect(workspace.headCheckpointId).toBe(taken.checkpoint.id);
    const names = await b.checkpoints.ls(taken.checkpoint.id);
    expect(names.kind === 'dir' && names.entries.map((e) => e.name)).toEqual(['b.txt', 'one.txt']);
    const rejected = (await b.checkpoints.list(run.id)).find((c) => c.status === 'failed');
    expect(rejected?.error).toMatchObject({ code: 'STALE_LEASE' });
    const events = await b.runs.events(run.id);
    expect(events.some((e) => e.kind === 'lease' && e.step === 'takeover' && e.data?.from === 'server-a')).toBe(true);
    slowBlobs.clear();
  });

  it('an uncertain stop leaves release_recovery_required, which blocks turns until resolved', async () => {
    const a = await server('rr-a', { leaseTtlMs: 500, heartbeatMs: 3_600_000 });
    const b = await server('rr-b', { leaseTtlMs: 500 });
    const run = await newRun(a);
    await a.runs.turn(run.id, exec('echo kept > kept.txt'));
    const claimed = await a.meta.runs.claim(run.id, 'rr-a', 500); // A "dies" holding the lease
    expect(claimed?.lease.state).toBe('held');
    await sleep(600);
    provider.destroyMode = 'fail';
    await expect(b.runs.turn(run.id, exec('true'))).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'release_recovery_required' },
    });
    expect((await b.runs.get(run.id)).lease.state).toBe('release_recovery_required');
    await expect(b.runs.turn(run.id, exec('true'), { waitMs: 100 })).rejects.toMatchObject({
      code: 'CONFLICT',
      data: { reason: 'release_recovery_required' },
    });
    await expect(b.runs.resolveLease(run.id)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect((await b.runs.get(run.id)).lease.state).toBe('release_recovery_required');
    provider.destroyMode = 'real';
    const resolved = await b.runs.resolveLease(run.id);
    expect(resolved.lease.state).toBe('free');
    expect(resolved.sandbox).toBeNull();
    const after = await b.runs.turn(run.id, exec('cat kept.txt'));
    expect(after.value.stdout.toString()).toBe('kept\n');
  });

  it('a sandbox left for the run by a crash between create and commit is removed by the next recovery; restored copies are left alone', async () => {
    const hf = await server('strays');
    const run = await newRun(hf);
    await hf.runs.turn(run.id, exec('echo kept > kept.txt'));
    const copy = await hf.runs.restore(run.id);
    const stray = await provider.create({ labels: { 'holdfast.run': run.id } });
    const current = (await hf.runs.get(run.id)).sandbox?.id ?? '';
    await provider.destroy(current);
    const after = await hf.runs.turn(run.id, exec('cat kept.txt'));
    expect(after.value.stdout.toString()).toBe('kept\n');
    const mine = (await provider.list()).filter((s) => s.labels['holdfast.run'] === run.id).map((s) => s.id);
    expect(mine).toEqual([(await hf.runs.get(run.id)).sandbox?.id]);
    expect(mine).not.toContain(stray.id);
    expect(await provider.get(copy.sandbox.id)).toBeDefined();
    const removed = (await hf.runs.events(run.id)).find((e) => e.step === 'remove_strays');
    expect(removed).toMatchObject({ kind: 'recovery', status: 'ok', data: { sandboxes: [stray.id] } });
  });

  it.each([
    ['while its command runs', true],
    ['after its command, before the turn saves', false],
  ])(
    'a sandbox destroyed behind our back %s fails the turn with CONFLICT sandbox_lost, and the next turn rebuilds it from the head',
    async (_when, runAfter) => {
      const hf = await server(`lost-${runAfter ? 'mid' : 'end'}`);
      const run = await newRun(hf);
      await hf.runs.turn(run.id, exec('echo kept > kept.txt'));
      const first = (await hf.runs.get(run.id)).sandbox?.id ?? '';
      const failed = await hf.runs
        .turn(run.id, async (ctx) => {
          await provider.destroy(ctx.sandbox.id);
          if (runAfter) await exec('echo lost > lost.txt')(ctx);
        })
        .catch((e: unknown) => e);
      expect(failed).toMatchObject({ code: 'CONFLICT', data: { reason: 'sandbox_lost', sandbox: first } });
      const [turn] = await hf.runs.turns(run.id);
      expect(turn).toMatchObject({ seq: 2, status: 'failed', error: { code: 'CONFLICT' } });
      const next = await hf.runs.turn(run.id, exec('cat kept.txt; ls'));
      expect(next.value.stdout.toString()).toBe('kept\nkept.txt\n');
      expect((await hf.runs.get(run.id)).sandbox?.id).not.toBe(first);
    },
  );

  it('checkpoint, destroy behind our back, restore through the agent: the new sandbox has the same bytes, modes, mtimes and symlinks', async () => {
    const hf = await server('restore-compare');
    const run = await newRun(hf);
    const summary =
      'find . -mindepth 1 | sort | while read -r f; do stat -c \'%n %A %s\' "$f"; done; find . -type f | sort | while read -r f; do stat -c \'%n %Y\' "$f"; done; find . -type f | sort | xargs sha256sum; find . -type l | sort | while read -r f; do echo "$f -> $(readlink "$f")"; done';
    const made = await hf.runs.turn(
      run.id,
      exec(
        `mkdir -p d/e && head -c 300000 /dev/urandom > d/e/big && echo hi > a && chmod 751 a && ln -s a link && ln -s ../missing d/dangling && printf x > d/x && touch -d '2020-01-02 03:04:05' d/x && ${summary}`,
      ),
    );
    const before = made.value.stdout.toString();
    expect(before).toContain('./link -> a');
    const first = (await hf.runs.get(run.id)).sandbox?.id ?? '';
    await provider.destroy(first);
    const after = await hf.runs.turn(run.id, exec(summary));
    expect((await hf.runs.get(run.id)).sandbox?.id).not.toBe(first);
    expect(after.value.stdout.toString()).toBe(before);
  });
});
