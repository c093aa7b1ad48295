import { Deployments } from '../../deployments/deployments.js';
import { isHoldfastError } from '../../errors.js';
import type { Run } from '../../metadata/metadata-store.js';
import type { SandboxProvider } from '../../sandbox/sandbox-provider.js';
import type { RunHost } from '../run-host.js';
import { RunSession } from '../run-session.js';
import { COPY_LABEL, RUN_LABEL } from './sandbox-lifecycle.js';

/**
 * Runs one sweep handles at most; the rest wait for the next sweep, so a sweep after a mass
 * failure stays short and shutdown never waits long for one.
 */
export const MAX_RUNS_PER_SWEEP = 1000;

/** A sandbox one provider reported, labelled for a run. */
export interface StraySandbox {
  readonly runId: string;
  readonly provider: string;
  readonly sandbox: string;
}

/** What one stray sweep did. */
export interface StraySweepReport {
  /** Strays destroyed (each also a `sweep remove_stray` step of its run). */
  readonly removed: StraySandbox[];
  /** Runs with strays left for a later sweep: their lease is held by a live owner, or needs recovery. */
  readonly skipped: { runId: string; reason: 'busy' | 'release_recovery_required'; sandboxes: string[] }[];
  /** Sandboxes labelled for a run id this metadata store does not know: another installation's, left alone. */
  readonly foreign: number;
  /** Providers that could not be listed, and strays whose destroy failed, with the error code. */
  readonly failed: { provider: string; sandbox?: string; runId?: string; error: string }[];
  readonly durationMs: number;
}

/**
 * One sweep for stray sandboxes: every provider named by a deployment of any tenant is listed,
 * and every sandbox labelled {@link RUN_LABEL} for a run that is not that run's committed
 * sandbox (`run.sandbox`) is destroyed: an old sandbox whose `destroy_old_sandbox` failed after
 * an upgrade, one a process made and died before committing, one a failed commit could not
 * discard.
 *
 * Fenced: the decision is taken under the run's lease (claimed without waiting), against the
 * run as the claim returned it, so the committed sandbox is never touched and a recovery that
 * has created but not yet committed a sandbox (it holds the lease) is never raced; such a run is
 * skipped until a later sweep. So is a run whose lease is still held by an owner that died (an
 * expired lease): taking it over would mean stopping the committed sandbox (DESIGN section 9),
 * which the sweep never does; the run's next turn takes it over and removes the strays itself.
 *
 * Left alone: sandboxes labelled for a run id this store does not know (another installation may
 * share the provider account, and its runs are not ours to judge; a run deleted here would look
 * the same, so deleting a run must destroy its sandboxes itself), and restored copies
 * ({@link COPY_LABEL}: handed to a caller who owns and destroys them; Holdfast keeps no record
 * of them, so nothing here can tell a copy in use from a forgotten one).
 *
 * Stops early (between runs) once the host is draining. Never throws for a provider or a run:
 * failures are reported, logged and recorded as failed steps.
 */
export async function sweepStrays(host: RunHost): Promise<StraySweepReport> {
  const started = performance.now();
  const report = {
    removed: [] as StraySandbox[],
    skipped: [] as StraySweepReport['skipped'],
    foreign: 0,
    failed: [] as StraySweepReport['failed'],
  };
  const labelled = await listLabelled(host, report.failed);
  let handled = 0;
  for (const [runId, sandboxes] of labelled) {
    if (host.inFlight.isDraining || handled >= MAX_RUNS_PER_SWEEP) break;
    const run = await host.meta.runs.get(runId).catch((error: unknown) => {
      if (isHoldfastError(error, 'NOT_FOUND')) return undefined;
      throw error;
    });
    if (run === undefined) {
      report.foreign += sandboxes.length;
      continue;
    }
    // Only the committed one: nothing to decide, so no lease is taken.
    if (sandboxes.every((s) => isSandbox(run.sandbox, s))) continue;
    handled += 1;
    if (run.lease.state !== 'free') {
      // Held, by a live owner or an expired one: not claimed (see above).
      const reason = run.lease.state === 'release_recovery_required' ? 'release_recovery_required' : 'busy';
      report.skipped.push({ runId: run.id, reason, sandboxes: sandboxes.filter((s) => !isSandbox(run.sandbox, s)).map((s) => s.sandbox) });
      continue;
    }
    await sweepRun(host, run, sandboxes, report);
  }
  const durationMs = Math.round(performance.now() - started);
  host.events.log({
    event: 'stray_sweep_finished',
    level: report.failed.length === 0 ? 'info' : 'warn',
    msg: 'stray sweep finished',
    removed: report.removed.length,
    skipped: report.skipped.length,
    foreign: report.foreign,
    failed: report.failed.length,
    durationMs,
  });
  return { ...report, durationMs };
}

/** Sandboxes labelled for a run, by run id, from every provider the deployments use. */
async function listLabelled(host: RunHost, failed: StraySweepReport['failed']): Promise<Map<string, StraySandbox[]>> {
  const names = new Set<string>();
  for (const tenant of await host.meta.tenants.list()) {
    for (const deployment of await new Deployments(host.meta, tenant).list()) names.add(deployment.spec.provider);
  }
  const byRun = new Map<string, StraySandbox[]>();
  for (const name of [...names].sort()) {
    let infos: Awaited<ReturnType<SandboxProvider['list']>>;
    try {
      infos = await host.sandboxes.provider(name).list();
    } catch (error) {
      failed.push({ provider: name, error: errorCode(error) });
      host.events.log({
        event: 'stray_sweep_list_failed',
        level: 'warn',
        msg: 'stray sweep could not list a provider',
        provider: name,
        error,
      });
      continue;
    }
    for (const info of infos) {
      const runId = info.labels[RUN_LABEL];
      if (typeof runId !== 'string' || runId === '' || info.labels[COPY_LABEL] !== undefined) continue;
      const list = byRun.get(runId) ?? [];
      list.push({ runId, provider: name, sandbox: info.id });
      byRun.set(runId, list);
    }
  }
  return byRun;
}

/** Claims the run's lease without waiting and destroys its strays under it. */
async function sweepRun(
  host: RunHost,
  run: Run,
  sandboxes: readonly StraySandbox[],
  report: Omit<StraySweepReport, 'durationMs'>,
): Promise<void> {
  let session: RunSession;
  try {
    session = await RunSession.claim(host, run.id, { waitMs: 0 });
  } catch (error) {
    const reason =
      isHoldfastError(error, 'CONFLICT') && error.data?.reason === 'release_recovery_required' ? 'release_recovery_required' : 'busy';
    const strays = sandboxes.filter((s) => !isSandbox(run.sandbox, s));
    report.skipped.push({ runId: run.id, reason, sandboxes: strays.map((s) => s.sandbox) });
    return;
  }
  try {
    // Claimed and expired in the moment since the run was read: now ours, the takeover must be
    // completed as a turn's would be (its stop of the dead owner's sandbox recorded), or
    // releasing would erase that a takeover happened. A no-op without a takeover.
    const current = await session.completeTakeover();
    // The committed sandbox, and after a takeover the one the takeover procedure already stopped.
    const kept = [session.claimed.sandbox, current.sandbox];
    const recorder = host.sandboxes.recorder(run.id, 'sweep');
    for (const stray of sandboxes) {
      if (kept.some((k) => isSandbox(k, stray))) continue;
      try {
        await recorder.step(
          'remove_stray',
          () => host.sandboxes.stop(stray.provider, stray.sandbox),
          () => ({ sandbox: stray.sandbox, provider: stray.provider }),
        );
        report.removed.push(stray);
      } catch (error) {
        report.failed.push({ provider: stray.provider, sandbox: stray.sandbox, runId: run.id, error: errorCode(error) });
      }
    }
  } catch (error) {
    // A takeover whose stop was uncertain: the run now needs lease recovery, as after a turn's takeover.
    report.failed.push({ provider: run.sandbox?.provider ?? '', runId: run.id, error: errorCode(error) });
  } finally {
    await session.release();
  }
}

function isSandbox(committed: Run['sandbox'], stray: StraySandbox): boolean {
  return committed !== null && committed.provider === stray.provider && committed.id === stray.sandbox;
}

function errorCode(error: unknown): string {
  return isHoldfastError(error) ? error.code : 'INTERNAL';
}

/**
 * The service's periodic stray sweep: one {@link sweepStrays} every `straySweepIntervalMs`
 * (0 disables the timer), never two at once. `runOnce` sweeps now, after the sweep in flight if
 * any; `stop` cancels the timer and waits for the sweep in flight, which stops at its next run
 * once the host drains.
 */
export class StraySweeper {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<StraySweepReport> | undefined;

  constructor(private readonly host: RunHost) {}

  /** Starts the timer (idempotent); a non-positive or infinite interval never ticks. */
  start(): void {
    const interval = this.host.settings.straySweepIntervalMs;
    if (this.timer !== undefined || !(interval > 0) || !Number.isFinite(interval)) return;
    this.timer = setInterval(() => {
      if (this.inFlight === undefined) this.runOnce().catch(() => undefined);
    }, interval);
    this.timer.unref();
  }

  /** Whether the timer is running. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  /**
   * One sweep now, after the one in flight. Rejects only when the metadata store fails (listing
   * tenants, deployments or runs); providers and runs that fail are in the report.
   */
  async runOnce(): Promise<StraySweepReport> {
    await this.inFlight?.catch(() => undefined);
    const sweep = sweepStrays(this.host).catch((error: unknown) => {
      this.host.events.log({ event: 'stray_sweep_failed', level: 'warn', msg: 'stray sweep failed', error });
      throw error;
    });
    this.inFlight = sweep;
    try {
      return await sweep;
    } finally {
      if (this.inFlight === sweep) this.inFlight = undefined;
    }
  }

  /** Stops the timer and resolves once the sweep in flight (if any) has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight?.catch(() => undefined);
  }
}
