import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnContext } from '../src/index.js';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

const PROMTOOL = '/usr/bin/promtool';

async function inTurn({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>, script: string): Promise<Buffer> {
  const result = await sandbox.run(['sh', '-c', script], { cwd: sandbox.workspaceRoot, signal });
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr.toString()}`);
  return result.stdout;
}

/** The value of one series in /metrics text (labels written in name order, as the registry writes them); undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const inner = Object.entries(labels)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  const prefix = inner === '' ? `${name} ` : `${name}{${inner}} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

/** Every series of a family as `labels -> value`, labels as written. */
function series(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match !== null) out.set(match[1] ?? '', Number(match[2]));
  }
  return out;
}

/**
 * The engine's families against a live service: a turn (with work-folder saves), restores, a
 * takeover, a failed save, a failed checkpoint and a GC sweep move them; /metrics stays valid
 * exposition text (promtool when installed) and no label carries an id, tenant name or path.
 */
describe('engine metrics in /metrics', () => {
  let svc: TestService;
  let scratch: string;

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number], { settings: { leaseTtlMs: 1000 } });
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'engine-metrics-'));
  });
  afterAll(async () => {
    await svc?.close();
    if (scratch !== undefined) await fs.rm(scratch, { recursive: true, force: true });
  });

  const scrape = async () => (await svc.app.request('/metrics')).text();

  it('a turn, restores, a takeover, a failed save, a failed checkpoint and a GC sweep each move their family', async () => {
    const { hf } = svc;
    const before = await scrape();
    expect(sample(before, 'holdfast_build_info', { node: process.version, version: 'test' })).toBe(1);
    expect(sample(before, 'holdfast_checkpoints_total', { outcome: 'ready', reason: 'turn' })).toBe(0);
    expect(sample(before, 'holdfast_lease_takeovers_total')).toBe(0);
    expect(sample(before, 'holdfast_leases_lost_total')).toBe(0);
    expect(sample(before, 'holdfast_gc_sweeps_total', { outcome: 'swept' })).toBe(0);
    for (const scope of ['task', 'agent', 'user', 'project']) {
      expect(sample(before, 'holdfast_work_folder_unsaved_age_seconds', { scope })).toBe(0);
    }

    // A turn that writes the workspace and the task folder.
    const task = `task-${crypto.randomUUID()}`;
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const run = await hf.runs.create({ deploymentId: deployment.id, bindings: { task } });
    const first = await hf.runs.turn(run.id, (ctx) =>
      inTurn(ctx, 'head -c 100000 /dev/urandom > big.bin; echo one > "$HOLDFAST_TASK_DIR/a.txt"'),
    );
    let text = await scrape();
    expect(sample(text, 'holdfast_checkpoints_total', { outcome: 'ready', reason: 'turn' })).toBe(1);
    expect(sample(text, 'holdfast_checkpoint_duration_seconds_count', { outcome: 'ready', reason: 'turn' })).toBe(1);
    expect(sample(text, 'holdfast_checkpoint_files_total', { reason: 'turn' })).toBe((first.checkpoint.stats as { files: number }).files);
    expect(sample(text, 'holdfast_checkpoint_bytes_new_total', { reason: 'turn' })).toBeGreaterThanOrEqual(100_000);
    // The task folder's save ran through its own checkpoints; its final save left nothing unsaved.
    expect(sample(text, 'holdfast_work_folder_unsaved_age_seconds', { scope: 'task' })).toBe(0);

    // Restores: one into a host directory, one of a checkpoint that does not exist.
    const receipt = await hf.snapshots.restore({ dir: path.join(scratch, 'restored'), checkpoint: first.checkpoint.id });
    const missing = await hf.snapshots
      .restore({ dir: path.join(scratch, 'nothing'), checkpoint: 'ck_0000000000000000' })
      .catch((e: unknown) => e);
    const missingCode = (missing as { code: string }).code;
    expect(typeof missingCode).toBe('string');
    text = await scrape();
    expect(sample(text, 'holdfast_restores_total', { outcome: 'ok' })).toBe(1);
    expect(sample(text, 'holdfast_restores_total', { outcome: 'failed' })).toBe(1);
    expect(sample(text, 'holdfast_restore_duration_seconds_count', { outcome: 'ok' })).toBe(1);
    expect(sample(text, 'holdfast_restore_bytes_fetched_total')).toBe(receipt.bytesFetched);
    expect(receipt.bytesFetched).toBeGreaterThanOrEqual(100_000);
    expect(sample(text, 'holdfast_restore_failures_total', { code: missingCode })).toBe(1);

    // A takeover: another owner claims the lease and dies holding it; this one's next turn takes it over.
    expect(await hf.meta.runs.claim(run.id, 'dead-owner', 200)).toBeDefined();
    await sleep(400);
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'true'), { waitMs: 10_000 });
    text = await scrape();
    expect(sample(text, 'holdfast_lease_takeovers_total')).toBe(1);
    expect(sample(text, 'holdfast_leases_lost_total')).toBe(0);
    // The recovery of a takeover restores too: every restore counts, not only the ones asked for.
    expect(sample(text, 'holdfast_restores_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(1);

    // A failed save: the store refuses every write while the turn's final save runs; the sandbox keeps the edit.
    const failing = hf.runs.turn(run.id, async (ctx) => {
      svc.faults.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
      return inTurn(ctx, 'echo two > "$HOLDFAST_TASK_DIR/a.txt"');
    });
    const failed = await failing.catch((e: unknown) => e);
    const failedCode = (failed as { code: string }).code;
    expect(failedCode).toBe('STORE_UNAVAILABLE');
    // A checkpoint of a host directory while the store still refuses writes.
    const dir = path.join(scratch, 'source');
    await fs.mkdir(dir);
    await fs.writeFile(path.join(dir, 'new.txt'), `fresh ${crypto.randomUUID()}\n`);
    const refused = await hf.snapshots.checkpoint({ dir, workspace: 'metrics-manual' }).catch((e: unknown) => e);
    svc.faults.clear();
    text = await scrape();
    expect(sample(text, 'holdfast_work_folder_save_failures_total', { code: 'STORE_UNAVAILABLE', scope: 'task' })).toBeGreaterThanOrEqual(
      1,
    );
    expect(sample(text, 'holdfast_work_folder_unsaved_age_seconds', { scope: 'task' })).toBeGreaterThan(0);
    expect(sample(text, 'holdfast_work_folder_unsaved_age_seconds', { scope: 'project' })).toBe(0);
    // Two failed checkpoints of reason manual: the task folder's save (a work-folder save is a checkpoint of its own) and the host directory's.
    expect((refused as { code: string }).code).toBe('STORE_UNAVAILABLE');
    expect(sample(text, 'holdfast_checkpoints_total', { outcome: 'failed', reason: 'manual' })).toBe(2);
    expect(sample(text, 'holdfast_checkpoint_failures_total', { code: 'STORE_UNAVAILABLE', reason: 'manual' })).toBe(2);
    expect(sample(text, 'holdfast_checkpoint_duration_seconds_count', { outcome: 'failed', reason: 'manual' })).toBe(2);

    // The next turn's warm start saves the kept edit: nothing is unsaved again.
    await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'true'));
    text = await scrape();
    expect(sample(text, 'holdfast_work_folder_unsaved_age_seconds', { scope: 'task' })).toBe(0);

    // How each ready checkpoint was scanned: a later turn of the same sandbox reads only what changed (its agent's watches).
    const delta = await hf.runs.turn(run.id, (ctx) => inTurn(ctx, 'echo three >> small.txt'));
    expect((delta.checkpoint.stats as { scan?: { mode: string } }).scan?.mode).toBe('delta');
    text = await scrape();
    const scans = ['delta', 'full', 'unknown'].map((mode) => sample(text, 'holdfast_checkpoint_scans_total', { mode }) ?? -1);
    const ready = [...series(text, 'holdfast_checkpoints_total')]
      .filter(([labels]) => labels.includes('outcome="ready"'))
      .reduce((n, [, v]) => n + v, 0);
    expect(scans[0]).toBeGreaterThanOrEqual(1);
    expect(scans[1]).toBeGreaterThanOrEqual(1);
    expect(scans.reduce((a, b) => a + b, 0)).toBe(ready);
    expect(sample(text, 'holdfast_agent_watch_missed_total')).toBe(0);

    // A GC sweep.
    const sweep = await hf.sweepGarbage();
    expect(sweep.kind).toBe('swept');
    text = await scrape();
    expect(sample(text, 'holdfast_gc_sweeps_total', { outcome: 'swept' })).toBe(1);
    expect(sample(text, 'holdfast_gc_sweep_duration_seconds_count', { outcome: 'swept' })).toBe(1);
    expect(sample(text, 'holdfast_gc_bytes_freed_total')).toBe(sweep.kind === 'swept' ? sweep.report.bytesFreed : -1);

    // No label carries an id, a tenant name or a path.
    const forbidden = [run.id, deployment.id, task, first.checkpoint.id, hf.tenant.name, hf.tenant.id, scratch, 'dead-owner'];
    for (const line of text.split('\n').filter((l) => l.startsWith('holdfast_'))) {
      for (const value of forbidden) expect(line, line).not.toContain(value);
    }
    for (const [labels] of series(text, 'holdfast_checkpoint_failures_total'))
      expect(labels).toMatch(/^\{code="[A-Z_]+",reason="[a-z]+"\}$/);
  });

  it('/metrics passes promtool check metrics (.ci/setup installs it; a missing promtool fails here)', async () => {
    const text = await scrape();
    expect(text).not.toMatch(/^# TYPE \S+_total gauge$/m);
    expect(existsSync(PROMTOOL), `${PROMTOOL} is missing: npm run setup installs it`).toBe(true);
    const child = promisify(execFile)(PROMTOOL, ['check', 'metrics']);
    child.child.stdin?.end(text);
    const { stdout, stderr } = await child.catch((error: { stdout: string; stderr: string }) => ({ ...error, failed: true }));
    expect(`${stdout}${stderr}`).toBe('');
  });
});
