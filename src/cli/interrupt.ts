import os from 'node:os';
import { HoldfastError } from '../errors.js';
import { requestExitCode } from './output.js';

/** The signals that stop a long command (Ctrl-C, `kill`). */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * Runs `fn` with a signal that aborts on the first SIGINT or SIGTERM with an `INTERRUPTED`
 * error (data: `reason: 'signal'`, `signal`), so the work can record why it stopped (a
 * checkpoint marks itself failed with that error) before the process exits with
 * 128 + the signal's number (130 for Ctrl-C), as shells expect. A second signal exits at once.
 */
export async function withInterrupt<T>(what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    const code = 128 + (os.constants.signals[signal] ?? 0);
    if (controller.signal.aborted) process.exit(code);
    requestExitCode(code);
    controller.abort(
      new HoldfastError('INTERRUPTED', `${what} was stopped by ${signal} before it finished; run it again`, {
        data: { reason: 'signal', signal },
      }),
    );
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
  }
}
