import { type ErrorCode, errorToJson, isHoldfastError } from '../errors.js';

/** Exit codes of the CLI: 0 ok, 1 a failed operation, 2 a usage error, 130 interrupted (Ctrl-C). */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
/** Ended by Ctrl-C (SIGINT): 128 + 2, what shells report for a command SIGINT ended. */
export const EXIT_INTERRUPTED = 130;

/**
 * The codes that mean the caller's own input is wrong (an argument, a path, a variable, a
 * value that would store a credential): fixing the command line, not retrying, is the remedy,
 * so they exit {@link EXIT_USAGE}. `LIMIT_EXCEEDED` is not here: it also reports workspace
 * contents past a limit, which no change to the command fixes.
 */
export const USAGE_ERROR_CODES: readonly ErrorCode[] = Object.freeze(['INVALID_INPUT', 'INVALID_PATH', 'SECRET_EXCLUDED']);

/** The exit code for a command that failed with `error`: 2 for the caller's bad input, else 1. */
export function exitCodeFor(error: unknown): number {
  return isHoldfastError(error) && USAGE_ERROR_CODES.includes(error.code) ? EXIT_USAGE : EXIT_FAILURE;
}

let requestedExitCode: number | undefined;

/**
 * Lets a command that ran to completion choose the process exit code (e.g. `sandbox exec`
 * passes on its command's code). Read once by `runCli`.
 */
export function requestExitCode(code: number): void {
  requestedExitCode = code;
}

/** The code a command requested, cleared by reading it. */
export function takeRequestedExitCode(): number | undefined {
  const code = requestedExitCode;
  requestedExitCode = undefined;
  return code;
}

/**
 * Renders command results: a JSON document on stdout with `--json` (for scripts), readable
 * text otherwise. Progress and diagnostics go to stderr so stdout stays parseable; `quiet`
 * (`--quiet`) suppresses both, never a result nor an error.
 */
export class Output {
  constructor(
    readonly json: boolean,
    private readonly stdout: NodeJS.WritableStream = process.stdout,
    private readonly stderr: NodeJS.WritableStream = process.stderr,
    readonly quiet = false,
  ) {}

  /** Prints a command's result: `data` as JSON, or the text `human` renders. */
  result(data: unknown, human: () => string): void {
    this.stdout.write(this.json ? `${JSON.stringify(data, null, 2)}\n` : `${human()}\n`);
  }

  /** A diagnostic line on stderr (suppressed in JSON mode and with `quiet`). */
  note(line: string): void {
    if (!this.json && !this.quiet) this.stderr.write(`${line}\n`);
  }

  /** Reports a failure on stderr, as `{"error": {code, message, data}}` in JSON mode. */
  error(error: unknown): void {
    const body = errorToJson(error);
    if (this.json) this.stderr.write(`${JSON.stringify({ error: body })}\n`);
    else this.stderr.write(`holdfast: ${body.code}: ${body.message}\n`);
  }
}

/** Renders rows under `header` as left-aligned columns two spaces apart. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, col) => Math.max(h.length, ...rows.map((r) => (r[col] ?? '').length)));
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, col) => cell.padEnd(widths[col] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** An epoch-milliseconds time as ISO 8601, or `-` when absent. */
export function isoTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString();
}

/**
 * `count` with its noun in the right number: `plural(1, 'checkpoint')` is "1 checkpoint",
 * `plural(2, 'checkpoint')` "2 checkpoints"; irregular nouns name their plural.
 */
export function plural(count: number, noun: string, nounPlural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nounPlural}`;
}

/**
 * At most `shown` of `items` rendered one per line with `indent`, then "… and M more" naming
 * where the rest is (`--json`), so long listings stay readable.
 */
export function listFirst<T>(items: readonly T[], shown: number, indent: string, render: (item: T) => string): string[] {
  const lines = items.slice(0, shown).map((item) => `${indent}${render(item)}`);
  if (items.length > shown) lines.push(`${indent}… and ${items.length - shown} more (--json lists all)`);
  return lines;
}
