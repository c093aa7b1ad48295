import { Readable } from 'node:stream';
import { bytesFromText, hasByteEscapes } from '../../../core/name-bytes.js';
import { InputError, IntegrityError, StoreError } from '../../../errors.js';
import type { RunResult, SandboxHandle } from '../../sandbox-provider.js';

/**
 * Longest single argument the shell transport passes: Linux refuses one over 128 KiB
 * (MAX_ARG_STRLEN); half of that leaves room for providers that wrap the command.
 */
export const SHELL_MAX_ARG_BYTES = 64 * 1024;
/** Most bytes of all arguments of one exec together: Linux allows about 2 MiB with the environment. */
export const SHELL_MAX_ARGV_BYTES = 1024 * 1024;
/**
 * Most arguments of one exec: bubblewrap refuses a command line of more than 9,000 arguments
 * (its own setup included), and providers that wrap the command have bounds of their own.
 */
export const SHELL_MAX_ARGS = 4096;
/**
 * Items per exec for scripts that rebuild their argument list item by item (`set -- "$@" …`):
 * sh copies the whole list each time, so the cost is the square of its length (4,096 paths
 * took 10 s in dash).
 */
export const SHELL_REBUILT_ITEMS = 256;
/** An exec of the shell transport that runs longer than this is killed and fails the operation. */
export const SHELL_EXEC_TIMEOUT_MS = 10 * 60 * 1000;
/** Bytes a command's stderr may add to its bound (messages only). */
const STDERR_ALLOWANCE_BYTES = 64 * 1024;

/** How the host reaches the sandbox's shell: stdin streams bytes, or every byte travels in arguments. */
export type ShellMode = 'stdin' | 'args';

/**
 * Shell functions every script starts with (POSIX sh: dash, busybox ash, bash).
 * `d ARG` sets `p` to the path an argument stands for: `r<text>` is the text itself, `o<\ooo…>`
 * is octal escapes of raw bytes (names that are not UTF-8 cannot pass through the provider's
 * string arguments). The `x` guard keeps trailing newlines that `$(…)` would strip.
 */
const PRELUDE = `
d() { case $1 in r*) p=\${1#r} ;; *) p=$(printf "\${1#o}x") && p=\${p%x} ;; esac; }
`;

/**
 * Sets `t` to a new temporary file in the first scratch place where `mktemp` succeeds:
 * `$TMPDIR` (or /tmp), the parent of the current directory (scripts `cd` into the workspace
 * first, so that is the workspace's parent, outside what is scanned), then `$HOME`; the probe
 * tries the same places. Exits 4 when none is writable.
 */
export const MAKE_SCRATCH_FILE =
  't=$(mktemp 2>/dev/null || mktemp -p "$(dirname "$PWD")" 2>/dev/null || mktemp -p "$HOME" 2>/dev/null) || exit 4';

/** A script with the prelude. */
export function script(body: string): string {
  return `${PRELUDE}${body}`;
}

/** The argument standing for a path inside the sandbox (see the prelude's `d`). */
export function pathArg(p: string): string {
  if (!hasByteEscapes(p)) return `r${p}`;
  let out = 'o';
  for (const b of bytesFromText(p)) out += `\\${b.toString(8).padStart(3, '0')}`;
  return out;
}

/** The bytes one argument costs in an exec. */
export function argBytes(arg: string): number {
  return Buffer.byteLength(arg) + 1;
}

/**
 * Splits `items` into groups whose arguments (with `fixed` bytes of other arguments per exec)
 * stay within {@link SHELL_MAX_ARGV_BYTES} and {@link SHELL_MAX_ARGS}; an item's arguments
 * never span two groups.
 */
export function groupByArgBytes<T>(items: readonly T[], argsOf: (item: T) => readonly string[], fixed: number, maxItems = Infinity): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let bytes = fixed;
  let count = 0;
  for (const item of items) {
    const args = argsOf(item);
    const cost = args.reduce((n, a) => n + argBytes(a), 0);
    const full = bytes + cost > SHELL_MAX_ARGV_BYTES || count + args.length > SHELL_MAX_ARGS || current.length >= maxItems;
    if (current.length > 0 && full) {
      groups.push(current);
      current = [];
      bytes = fixed;
      count = 0;
    }
    current.push(item);
    bytes += cost;
    count += args.length;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/** Options of one shell exec. */
export interface ShellRunOptions {
  /** Most bytes of stdout accepted; more fails the call with `LIMIT_EXCEEDED`. */
  readonly maxOutputBytes: number;
  /** Bytes for stdin; only in `stdin` mode. */
  readonly stdin?: Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
  readonly signal?: AbortSignal;
}

/**
 * Runs `sh -c script` in the sandbox with `args` as its positional parameters and returns what
 * it printed. Arguments are held to {@link SHELL_MAX_ARG_BYTES} each and
 * {@link SHELL_MAX_ARGV_BYTES} together (a programming error otherwise: `INVALID_INPUT`).
 * The environment pins the tools' output format (`LC_ALL=C`). A sandbox that cannot run the
 * shell at all is `STORE_UNAVAILABLE`; the exit code is the caller's to judge.
 */
export async function runShell(handle: SandboxHandle, body: string, args: readonly string[], options: ShellRunOptions): Promise<RunResult> {
  const argv = ['sh', '-c', script(body), 'sh', ...args];
  let total = 0;
  for (const a of argv) {
    const n = argBytes(a);
    if (n > SHELL_MAX_ARG_BYTES)
      throw new InputError('INVALID_INPUT', `[shell] an argument of ${n} bytes is over the bound`, { data: { bytes: n } });
    total += n;
  }
  if (total > SHELL_MAX_ARGV_BYTES)
    throw new InputError('INVALID_INPUT', `[shell] ${total} bytes of arguments are over the bound`, { data: { bytes: total } });
  try {
    return await handle.run(argv, {
      env: { LC_ALL: 'C', TZ: 'UTC' },
      timeoutMs: SHELL_EXEC_TIMEOUT_MS,
      maxOutputBytes: options.maxOutputBytes + STDERR_ALLOWANCE_BYTES,
      ...(options.stdin === undefined ? {} : { stdin: Readable.from(options.stdin, { objectMode: false }) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  } catch (error) {
    if (error instanceof InputError && error.code === 'LIMIT_EXCEEDED') {
      throw new InputError('LIMIT_EXCEEDED', `[shell] sandbox ${handle.id} answered more than ${options.maxOutputBytes} bytes; refused`, {
        data: { limit: options.maxOutputBytes, source: 'shell' },
        cause: error,
      });
    }
    throw error;
  }
}

/** Fails unless the command exited 0 (`STORE_UNAVAILABLE`, with what it printed on stderr). */
export function expectSuccess(handle: SandboxHandle, what: string, result: RunResult): RunResult {
  if (result.code === 0 && !result.timedOut) return result;
  const stderr = result.stderr.toString('utf8', 0, Math.min(result.stderr.length, 500)).trim();
  throw new StoreError(
    `[shell] ${what} failed in sandbox ${handle.id} (exit ${result.code ?? result.signal}${result.timedOut ? ', timed out' : ''}): ${stderr}`,
    {
      data: { sandbox: handle.id, exitCode: result.code, timedOut: result.timedOut },
    },
  );
}

/** The error for an answer from the sandbox that no real tool prints. */
export function malformedAnswer(what: string, why: string): IntegrityError {
  return new IntegrityError('INTEGRITY', `[shell] the sandbox's ${what} answer is not what the tools print (${why}); refused`, {
    data: { source: 'shell' },
  });
}
