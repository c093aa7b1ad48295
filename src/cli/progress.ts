import type { Output } from './output.js';
import { plural } from './output.js';

/**
 * What a long operation is doing now, in the terms of what really happens: the step, items
 * counted (files, packs, steps) and bytes with the verb that says what was done with them
 * (`examined` is not `uploaded`). Absent figures are not shown; a step without figures is
 * shown as the step alone.
 */
export interface ProgressState {
  /** The step in words: `scanning`, `reading changed files`, `committing`. */
  readonly step: string;
  readonly items?: { readonly done: number; readonly total: number; readonly noun: string } | undefined;
  readonly bytes?: { readonly done: number; readonly total: number; readonly verb: string } | undefined;
}

/** A progress display for one long operation. */
export interface Progress {
  report(state: ProgressState): void;
  stop(): void;
}

/** Without a TTY, a line is printed at most this often, and only once work has lasted this long. */
export const PLAIN_INTERVAL_MS = 10_000;
/** An ETA is shown only once a step has run this long (earlier rates are noise). */
export const ETA_AFTER_MS = 3000;
/** A TTY line is redrawn at most this often. */
const TTY_REDRAW_MS = 100;

/**
 * Progress on stderr: one redrawn line on a TTY; without one (CI logs, pipes) a plain line
 * every {@link PLAIN_INTERVAL_MS} once work has lasted that long, so short commands print
 * nothing; nothing at all with `--json` (stdout stays one JSON document) or `--quiet`. Each line says the
 * step and its real figures, with an ETA on long steps.
 */
export function startProgress(output: Output, label: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (output.json || output.quiet) return { report() {}, stop() {} };
  const eta = new EtaClock();
  const tty = stream.isTTY === true;
  let last = tty ? 0 : Date.now();
  let drawn = false;
  return {
    report(state) {
      const now = Date.now();
      const line = `${label}: ${describeProgress(state, eta.estimate(state, now))}`;
      if (now - last < (tty ? TTY_REDRAW_MS : PLAIN_INTERVAL_MS)) return;
      last = now;
      if (tty) {
        const width = stream.columns > 0 ? stream.columns - 1 : line.length;
        stream.write(`\r\x1b[2K${line.slice(0, width)}`);
        drawn = true;
      } else stream.write(`${line}\n`);
    },
    stop() {
      if (drawn) stream.write('\r\x1b[2K');
    },
  };
}

/** `reading changed files: 1200/5000 files, 120.0 MiB/300.0 MiB examined, about 40 s left`. */
export function describeProgress(state: ProgressState, etaMs?: number): string {
  const parts: string[] = [];
  if (state.items !== undefined) parts.push(`${state.items.done}/${plural(state.items.total, state.items.noun)}`);
  if (state.bytes !== undefined) parts.push(`${formatBytes(state.bytes.done)}/${formatBytes(state.bytes.total)} ${state.bytes.verb}`);
  if (etaMs !== undefined) parts.push(`about ${formatDuration(etaMs)} left`);
  return parts.length === 0 ? state.step : `${state.step}: ${parts.join(', ')}`;
}

/** Estimates the time left in a step from its rate so far (bytes when known, else items). */
class EtaClock {
  private step = '';
  private startedAt = 0;

  estimate(state: ProgressState, now: number): number | undefined {
    if (state.step !== this.step) {
      this.step = state.step;
      this.startedAt = now;
    }
    const elapsed = now - this.startedAt;
    const measure = state.bytes !== undefined && state.bytes.total > 0 ? state.bytes : state.items;
    if (measure === undefined || elapsed < ETA_AFTER_MS || measure.done <= 0 || measure.done >= measure.total) return undefined;
    return (elapsed * (measure.total - measure.done)) / measure.done;
  }
}

/** 1536 -> "1.5 KiB". */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** 42_000 -> "42 s", 150_000 -> "2 min 30 s", 4_000_000 -> "1 h 6 min". */
export function formatDuration(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min${s % 60 === 0 ? '' : ` ${s % 60} s`}`;
  return `${Math.floor(m / 60)} h${m % 60 === 0 ? '' : ` ${m % 60} min`}`;
}
