import type { ExecOptions } from './sandbox-provider.js';

/** An exec's deadline and abort signal, armed: both call `kill`; `timedOut` says whether the deadline did. */
export interface ArmedKill {
  readonly timedOut: boolean;
  /** Clears the timer and the abort listener (once the command has ended). */
  disarm(): void;
}

/**
 * Arms `options.timeoutMs` and `options.signal` of one exec to call `kill` (at once when the
 * signal is already aborted): what every exec implementation does the same way.
 */
export function armKill(options: Pick<ExecOptions, 'timeoutMs' | 'signal'>, kill: () => void): ArmedKill {
  let timedOut = false;
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          kill();
        }, options.timeoutMs);
  const signal = options.signal;
  signal?.addEventListener('abort', kill, { once: true });
  if (signal?.aborted === true) kill();
  return {
    get timedOut() {
      return timedOut;
    },
    disarm() {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener('abort', kill);
    },
  };
}
