import { isHoldfastError } from '../errors.js';
import { Deployments } from './deployments.js';
import { acquireLease } from './lease.js';
import type { RunHost } from './run-host.js';
import { liveSandbox, saveSandbox } from './run-sandbox.js';

/** What a graceful shutdown did, by run id. */
export interface ShutdownReport {
  /** Idle sandboxes whose workspace was checkpointed (reason `shutdown`). */
  readonly checkpointed: string[];
  /** Runs with nothing to save here: another owner holds them, or their sandbox is gone. */
  readonly skipped: string[];
  /** Work that did not finish inside the deadline or failed, with why. */
  readonly incomplete: { runId: string; what: 'turn' | 'checkpoint'; error: string }[];
  readonly durationMs: number;
}

/**
 * Graceful shutdown of the runs layer: no new turns are accepted; idle sandboxes this process
 * used are checkpointed, a few at a time, while running turns finish; whatever is still
 * running at the deadline is aborted and reported (and logged) as incomplete.
 */
export async function shutdownRuns(host: RunHost, options: { deadlineMs?: number; concurrency?: number } = {}): Promise<ShutdownReport> {
  const started = performance.now();
  const deadlineMs = options.deadlineMs ?? host.settings.shutdownDeadlineMs;
  const concurrency = Math.max(1, options.concurrency ?? host.settings.shutdownConcurrency);
  host.draining = true;
  const expired = new AbortController();
  const timer = setTimeout(() => expired.abort(), deadlineMs);
  const report: ShutdownReport = { checkpointed: [], skipped: [], incomplete: [], durationMs: 0 };
  const turns = [...host.active.values()];
  const idle = [...host.touched.entries()].filter(([runId]) => !host.active.has(runId));
  const saving = new Set<string>(idle.map(([runId]) => runId));

  const saveOne = async ([runId, tenant]: (typeof idle)[number]): Promise<void> => {
    if (expired.signal.aborted) return;
    const lease = await acquireLease(host, runId, 0).catch(() => undefined);
    if (lease === undefined) {
      report.skipped.push(runId);
      saving.delete(runId);
      return;
    }
    try {
      const { run } = lease;
      const scope = { host, tenant, deployments: new Deployments(host.meta, tenant) };
      const sandbox = await liveSandbox(scope, run, await scope.deployments.get(run.deploymentId));
      if (sandbox === undefined) {
        report.skipped.push(runId);
        return;
      }
      await saveSandbox(scope, lease, sandbox, 'shutdown', { signal: expired.signal });
      report.checkpointed.push(runId);
    } catch (error) {
      report.incomplete.push({ runId, what: 'checkpoint', error: isHoldfastError(error) ? error.code : String(error) });
    } finally {
      saving.delete(runId);
      await lease.release();
    }
  };

  const queue = [...idle];
  const workers = Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await saveOne(next);
  });
  const finished = Promise.allSettled([...workers, ...turns.map((t) => t.done)]);
  await Promise.race([finished, new Promise((resolve) => expired.signal.addEventListener('abort', resolve, { once: true }))]);
  clearTimeout(timer);
  if (expired.signal.aborted) {
    for (const turn of host.active.values()) {
      turn.abort.abort();
      report.incomplete.push({ runId: turn.runId, what: 'turn', error: 'TIMEOUT' });
    }
    for (const runId of saving) report.incomplete.push({ runId, what: 'checkpoint', error: 'TIMEOUT' });
  }
  for (const item of report.incomplete) host.log({ event: 'shutdown_incomplete', level: 'warn', msg: 'shutdown incomplete', ...item });
  return { ...report, durationMs: Math.round(performance.now() - started) };
}
