import { setTimeout as sleep } from 'node:timers/promises';
import { ConflictError } from '../errors.js';
import type { Run } from '../metadata/metadata-store.js';
import type { RunHost } from './run-host.js';

/** First and largest pause between claim attempts while another owner holds the lease. */
const CLAIM_POLL_FIRST_MS = 25;
const CLAIM_POLL_MAX_MS = 500;

/** A lease this process holds on a run, kept alive by heartbeats until released. */
export interface HeldLease {
  /** The run as the claim returned it (epoch, and `lease.takenFrom` on a takeover). */
  readonly run: Run;
  readonly epoch: number;
  /** Aborted with a `STALE_LEASE` error when a heartbeat finds the lease lost. */
  readonly lost: AbortSignal;
  /** Stops the heartbeat and frees the lease (a no-op when it was lost). Never throws. */
  release(): Promise<void>;
}

/**
 * Claims the lease of `runId`: first the in-process queue, then the database claim (one
 * UPDATE bumping the epoch), polled until `waitMs` has passed. A run in
 * `release_recovery_required` fails at once with `CONFLICT` (data.reason says so); a lease
 * still held after the wait fails with `CONFLICT` reason `busy`.
 */
export async function acquireLease(host: RunHost, runId: string, waitMs: number): Promise<HeldLease> {
  const deadline = Date.now() + waitMs;
  const unlock = await host.mutex.acquire(runId, waitMs);
  try {
    const run = await claimUntil(host, runId, deadline, waitMs);
    const { takenFrom, epoch } = run.lease;
    if (takenFrom !== null) {
      host.events.log({ event: 'lease_taken_over', level: 'warn', msg: 'lease taken over', runId, epoch, from: takenFrom });
    }
    return startHeartbeat(host, run, unlock);
  } catch (error) {
    unlock();
    throw error;
  }
}

async function claimUntil(host: RunHost, runId: string, deadline: number, waitMs: number): Promise<Run> {
  let pause = CLAIM_POLL_FIRST_MS;
  for (;;) {
    const claimed = await host.meta.runs.claim(runId, host.owner, host.settings.leaseTtlMs);
    if (claimed !== undefined) return claimed;
    const current = await host.meta.runs.get(runId);
    if (current.lease.state === 'release_recovery_required') throw recoveryRequired(current);
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new ConflictError('CONFLICT', `run ${runId} is busy: its lease is held by ${current.lease.owner}; waited ${waitMs} ms`, {
        data: { runId, reason: 'busy', owner: current.lease.owner, waitedMs: waitMs },
      });
    }
    await sleep(Math.min(pause, left));
    pause = Math.min(CLAIM_POLL_MAX_MS, Math.ceil(pause * 1.5));
  }
}

/** The error of a run in `release_recovery_required`: its last stop was uncertain, or its sandbox was kept for unsaved work. */
export function recoveryRequired(run: Run): ConflictError {
  const sandbox = run.sandbox?.id ?? '';
  const why =
    run.lease.error?.reason === 'work_folder_save_required'
      ? `its sandbox ${sandbox} was kept because the work it holds could not be saved (${String(run.lease.error.code ?? 'failed')}); holdfast lease resolve ${run.id} saves it again first, --discard-unsaved destroys it anyway`
      : `stopping its sandbox ${sandbox} did not certainly succeed; check the provider, then run holdfast lease resolve ${run.id}`;
  return new ConflictError('CONFLICT', `run ${run.id} needs lease recovery: ${why}`, {
    data: { runId: run.id, reason: 'release_recovery_required', error: run.lease.error },
  });
}

function startHeartbeat(host: RunHost, run: Run, unlock: () => void): HeldLease {
  const epoch = run.lease.epoch;
  const lost = new AbortController();
  const timer = setInterval(() => {
    host.meta.runs
      .heartbeat(run.id, epoch, host.settings.leaseTtlMs)
      .then((alive) => {
        if (alive || lost.signal.aborted) return;
        clearInterval(timer);
        host.events.log({ event: 'lease_lost', level: 'warn', msg: 'lease lost', runId: run.id, epoch });
        lost.abort(
          new ConflictError('STALE_LEASE', `run ${run.id}: lease epoch ${epoch} was taken over; this turn can write nothing`, {
            data: { runId: run.id, epoch },
          }),
        );
      })
      // A store hiccup is retried at the next beat; if the lease expires meanwhile, the fence refuses our writes.
      .catch(() => undefined);
  }, host.settings.heartbeatMs);
  timer.unref();
  let released: Promise<void> | undefined;
  return {
    run,
    epoch,
    lost: lost.signal,
    release() {
      released ??= (async () => {
        clearInterval(timer);
        try {
          if (!lost.signal.aborted) await host.meta.runs.release(run.id, epoch);
        } catch (error) {
          host.events.log({
            event: 'lease_release_failed',
            level: 'warn',
            msg: 'lease release failed; it expires on its own',
            runId: run.id,
            epoch,
            error,
          });
        } finally {
          unlock();
        }
      })();
      return released;
    },
  };
}
