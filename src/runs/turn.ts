import type { Deployment } from '../deployments/deployments.js';
import { ConflictError, errorToJson, HoldfastError, isHoldfastError } from '../errors.js';
import type { Checkpoint, Run, Turn } from '../metadata/metadata-store.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import type { CheckpointNote } from '../snapshot/checkpoint-note.js';
import { PeriodicCheckpoints } from './periodic-checkpoints.js';
import type { RunHost } from './run-host.js';
import type { RunSession } from './run-session.js';

/** What a turn's body gets: the run's live sandbox and a signal that fires when the turn must stop. */
export interface TurnContext {
  /** The run's sandbox; its commands get the run extensions' environment (under their own `env`). */
  readonly sandbox: SandboxHandle;
  readonly run: Run;
  readonly turn: Turn;
  /** The deployment the sandbox is of (its `spec.cwd` says where a turn's command starts). */
  readonly deployment: Deployment;
  /** Aborted when the lease is lost, the caller's signal fires, or the server shuts down. */
  readonly signal: AbortSignal;
}

/** The work of one turn. Whatever it leaves in the workspace is checkpointed when it returns (or throws). */
export type TurnBody<T> = (context: TurnContext) => Promise<T>;

/** Options of a turn. */
export interface TurnOptions<T> {
  /** How long to wait for the previous turn to release the run; default 30 s. */
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
  /** Turns the body's value into the JSON stored with the turn (default: nothing stored). */
  readonly summarize?: (value: T) => Readonly<Record<string, unknown>>;
  /** The label and metadata of the turn's own checkpoint (periodic ones get none); checked before the turn starts. */
  readonly checkpoint?: CheckpointNote | undefined;
}

/** A completed turn: its row, the ready checkpoint that completed it, and the body's value. */
export interface TurnOutcome<T> {
  readonly turn: Turn;
  readonly checkpoint: Checkpoint;
  readonly value: T;
  /** Periodic checkpoints started and ticks skipped (one was still in flight) during the turn. */
  readonly periodic: { readonly started: number; readonly skipped: number };
}

/**
 * One turn of `session`'s run: ensure the sandbox and attach the run extensions, count the
 * turn, run the body with periodic saves (never two at once), then the extensions' `turn_end`
 * save and the turn's own checkpoint, fenced by the lease and completing the turn in the same
 * transaction, then the extensions' `boundary`. A body that throws, or a `turn_end` save that
 * fails, still gets a `final` checkpoint, so the work is not lost, and the turn fails with that
 * error (the body's first).
 *
 * A turn stopped before its body finished (its signal fired: the server shut down, the lease
 * was lost, the caller cancelled) did not finish, whatever the body returned (a killed
 * command's result): it fails with the reason of the stop (`INTERRUPTED` from the shutdown
 * drain, `STALE_LEASE`, else `CANCELLED`), after its `final` checkpoint, and the run's events
 * get an `interrupted` step of kind `turn` naming that reason.
 */
export async function executeTurn<T>(
  host: RunHost,
  session: RunSession,
  body: TurnBody<T>,
  options: TurnOptions<T>,
): Promise<TurnOutcome<T>> {
  const abort = new AbortController();
  const stop = (signal: AbortSignal) => abort.abort(signal.reason);
  session.lost.addEventListener('abort', () => stop(session.lost), { once: true });
  options.signal?.addEventListener('abort', () => stop(options.signal as AbortSignal), { once: true });
  const done = runTurn(host, session, body, options, abort);
  host.inFlight.trackTurn(session.run.id, abort, done);
  return done;
}

async function runTurn<T>(
  host: RunHost,
  session: RunSession,
  body: TurnBody<T>,
  options: TurnOptions<T>,
  abort: AbortController,
): Promise<TurnOutcome<T>> {
  await session.ensureSandbox({ upgrade: true });
  const { run, sandbox, deployment } = await session.attach(abort.signal);
  let turn = await session.startTurn();
  const periodic = new PeriodicCheckpoints(host.settings.checkpointIntervalMs, async () => {
    try {
      await session.save('periodic', 'periodic', { signal: abort.signal });
    } catch (error) {
      host.events.log({ event: 'periodic_checkpoint_failed', level: 'warn', msg: 'periodic checkpoint failed', runId: run.id, error });
      if (isHoldfastError(error, 'STALE_LEASE')) abort.abort(error);
    }
  });
  periodic.start();
  let value: T | undefined;
  let bodyError: unknown;
  let failed = false;
  const bodyStarted = performance.now();
  try {
    value = await body({ sandbox, run, turn, deployment, signal: abort.signal });
  } catch (error) {
    failed = true;
    bodyError = error;
  }
  if (abort.signal.aborted) {
    failed = true;
    bodyError = stopReason(abort.signal.reason, turn);
    await host.sandboxes
      .recorder(run.id, 'turn')
      .record('interrupted', 'failed', performance.now() - bodyStarted, { turn: turn.id, error: errorToJson(bodyError) });
  }
  await periodic.stop();
  try {
    // A lost lease can write nothing: say so at once rather than after reading a sandbox that may be gone.
    await session.fence();
    // The extensions' final flush; whether it failed or not, the workspace checkpoint follows.
    const unsaved = await session.saveExtensions('turn_end');
    const completes = !failed && unsaved === undefined;
    const saved = await session.checkpoint(completes ? 'turn' : 'final', {
      note: options.checkpoint,
      onCommit: async (tx, checkpoint) => {
        if (!completes) return;
        const result = value === undefined || options.summarize === undefined ? undefined : options.summarize(value);
        turn = await tx.turns.finish(turn.id, {
          status: 'completed',
          checkpointId: checkpoint.id,
          ...(result === undefined ? {} : { result }),
        });
      },
    });
    if (failed) throw bodyError;
    if (unsaved !== undefined) throw unsaved.error;
    host.events.log({
      event: 'turn_completed',
      level: 'info',
      msg: 'turn completed',
      runId: run.id,
      turn: turn.id,
      checkpoint: saved.checkpoint.id,
    });
    await session.boundary();
    return { turn, checkpoint: saved.checkpoint, value: value as T, periodic: { ...periodic.counts } };
  } catch (caught) {
    const error = await sandboxLost(
      host,
      sandbox,
      session.lost.aborted && !isHoldfastError(caught, 'STALE_LEASE') ? session.lost.reason : caught,
    );
    await host.meta.turns.finish(turn.id, { status: 'failed', error: errorToJson(error) }).catch(() => undefined);
    host.events.log({ event: 'turn_failed', level: 'warn', msg: 'turn failed', runId: run.id, turn: turn.id, error });
    throw error;
  }
}

/**
 * A turn's failure, told as `CONFLICT` (`data.reason: 'sandbox_lost'`, the failure as its
 * cause) when the run's sandbox is gone afterwards: destroyed behind the run's back while the
 * turn ran, whatever error that gave the command or the save (a provider's `NOT_FOUND` would
 * read as "no such run"). The run is not lost: the next turn rebuilds its sandbox from the last
 * ready checkpoint. A lost lease stays `STALE_LEASE`; a provider that cannot answer leaves the
 * failure as it was.
 */
async function sandboxLost(host: RunHost, sandbox: SandboxHandle, error: unknown): Promise<unknown> {
  if (isHoldfastError(error, 'STALE_LEASE')) return error;
  const found = await host.sandboxes
    .provider(sandbox.provider)
    .get(sandbox.id)
    .catch(() => null);
  if (found !== undefined) return error;
  return new ConflictError(
    'CONFLICT',
    `the run's sandbox ${sandbox.id} was destroyed while the turn ran; the next turn rebuilds it from the last ready checkpoint`,
    { cause: error, data: { reason: 'sandbox_lost', sandbox: sandbox.id, provider: sandbox.provider, error: errorToJson(error) } },
  );
}

/** What a turn stopped by its signal fails with: the abort's own error when it is one, else `CANCELLED`. */
function stopReason(reason: unknown, turn: Turn): HoldfastError {
  if (isHoldfastError(reason)) return reason;
  return new HoldfastError('CANCELLED', `turn ${turn.id} was cancelled before its command finished`, {
    cause: reason,
    data: { reason: 'cancelled', turn: turn.id },
  });
}
