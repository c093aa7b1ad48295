import { forEachLimit } from '../core/concurrency.js';
import { isHoldfastError } from '../errors.js';
import type { TouchedRun } from './in-flight.js';
import type { RunHost } from './run-host.js';
import { RunSession } from './run-session.js';

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
  host.inFlight.startDrain();
  const expired = new AbortController();
  const timer = setTimeout(() => expired.abort(), deadlineMs);
  const report: ShutdownReport = { checkpointed: [], skipped: [], incomplete: [], durationMs: 0 };
  const turns = host.inFlight.activeTurns();
  const idle = host.inFlight.idleRuns();
  const saving = new Set<string>(idle.map((r) => r.runId));

  const saveOne = async ({ runId, tenant }: TouchedRun): Promise<void> => {
    try {
      if (expired.signal.aborted) return;
      const outcome = await saveIdle(host, runId, tenant, expired.signal);
      report[outcome].push(runId);
    } catch (error) {
      report.incomplete.push({ runId, what: 'checkpoint', error: isHoldfastError(error) ? error.code : String(error) });
    } finally {
      saving.delete(runId);
    }
  };

  const finished = Promise.allSettled([forEachLimit(idle, concurrency, saveOne), ...turns.map((t) => t.done)]);
  await Promise.race([finished, new Promise((resolve) => expired.signal.addEventListener('abort', resolve, { once: true }))]);
  clearTimeout(timer);
  if (expired.signal.aborted) {
    for (const turn of host.inFlight.activeTurns()) {
      turn.abort.abort();
      report.incomplete.push({ runId: turn.runId, what: 'turn', error: 'TIMEOUT' });
    }
    for (const runId of saving) report.incomplete.push({ runId, what: 'checkpoint', error: 'TIMEOUT' });
  }
  for (const item of report.incomplete)
    host.events.log({ event: 'shutdown_incomplete', level: 'warn', msg: 'shutdown incomplete', ...item });
  return { ...report, durationMs: Math.round(performance.now() - started) };
}

/** Checkpoints one idle run's live sandbox under its lease (claimed without waiting); `skipped` when there is nothing to save here. */
async function saveIdle(
  host: RunHost,
  runId: string,
  tenant: TouchedRun['tenant'],
  signal: AbortSignal,
): Promise<'checkpointed' | 'skipped'> {
  const session = await RunSession.claim(host, runId, { waitMs: 0, tenant }).catch(() => undefined);
  if (session === undefined) return 'skipped';
  try {
    if ((await session.findSandbox()) === undefined) return 'skipped';
    await session.save('shutdown', 'shutdown', { signal });
    return 'checkpointed';
  } finally {
    await session.release();
  }
}
