import { forEachLimit } from '../core/concurrency.js';
import { HoldfastError, isHoldfastError } from '../errors.js';
import type { TouchedRun } from './in-flight.js';
import type { RunHost } from './run-host.js';
import { RunSession } from './run-session.js';

/**
 * How long, past the shutdown deadline, a turn aborted at it gets to settle: its command is
 * killed, its `final` checkpoint saves what it wrote, and it is recorded `failed` with
 * `INTERRUPTED` before the stores close. A turn still unsettled after it is left `running`,
 * and the next owner of the run fails it on takeover.
 */
export const INTERRUPTED_TURN_GRACE_MS = 10_000;

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
 * running at the deadline is aborted and reported (and logged) as incomplete. An aborted turn
 * fails with `INTERRUPTED` (`data.reason` `shutdown_deadline`); the drain waits up to
 * {@link INTERRUPTED_TURN_GRACE_MS} for it to record that and save its `final` checkpoint.
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
    const aborted = host.inFlight.activeTurns();
    for (const turn of aborted) {
      turn.abort.abort(interrupted(turn.runId, deadlineMs));
      report.incomplete.push({ runId: turn.runId, what: 'turn', error: 'TIMEOUT' });
    }
    for (const runId of saving) report.incomplete.push({ runId, what: 'checkpoint', error: 'TIMEOUT' });
    await settled(
      aborted.map((t) => t.done),
      INTERRUPTED_TURN_GRACE_MS,
    );
  }
  for (const item of report.incomplete)
    host.events.log({ event: 'shutdown_incomplete', level: 'warn', msg: 'shutdown incomplete', ...item });
  return { ...report, durationMs: Math.round(performance.now() - started) };
}

/** Why a turn still running at the shutdown deadline stops: the reason its abort carries and the turn fails with. */
function interrupted(runId: string, deadlineMs: number): HoldfastError {
  return new HoldfastError(
    'INTERRUPTED',
    `the server shut down and the turn did not finish inside the shutdown deadline of ${deadlineMs} ms: its command was stopped; run the turn again`,
    { data: { reason: 'shutdown_deadline', runId, deadlineMs } },
  );
}

/** Resolves once every promise of `all` settled, or after `ms`, whichever is first. */
async function settled(all: readonly Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([Promise.allSettled(all), timeout]);
  clearTimeout(timer);
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
