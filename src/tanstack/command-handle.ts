import { PassThrough } from 'node:stream';
import type { SandboxHandle as TanStackSandboxHandle } from '@tanstack/ai-sandbox';
import { shellQuote } from '../core/shell-quote.js';
import { InputError, IntegrityError } from '../errors.js';
import { runBuffered } from '../sandbox/run-buffered.js';
import {
  EXEC_SIGNALS,
  type ExecExit,
  type ExecOptions,
  type ExecProcess,
  type ExecSignal,
  type SandboxHandle,
} from '../sandbox/sandbox-provider.js';

/** Quotes one argument for a POSIX shell (one implementation, in `core/shell-quote.ts`). */
export { shellQuote };

/** The workspace root TanStack sandboxes present when a handle names none. */
export const TANSTACK_WORKSPACE_ROOT = '/workspace';
/** Longest `$HOME` accepted from a sandbox, in characters. */
const MAX_HOME_LENGTH = 4096;

/**
 * The command line that runs `argv` in `cwd` with its stdout and stderr captured to files and
 * printed back base64-encoded, then its exit status: three lines of ASCII, whatever bytes the
 * command wrote. So a text-only exec (a string `stdout`, as TanStack's) carries bytes exactly.
 */
export function byteSafeCommand(argv: readonly string[], cwd: string): string {
  const run = `cd -- ${shellQuote(cwd)} && exec ${argv.map(shellQuote).join(' ')}`;
  return [
    't=$(mktemp -d) || exit 125',
    `(${run}) >"$t/o" 2>"$t/e" </dev/null; rc=$?`,
    `base64 <"$t/o" | tr -d '\\n'; printf '\\n'; base64 <"$t/e" | tr -d '\\n'; printf '\\n%s\\n' "$rc"; rm -rf "$t"`,
  ].join('\n');
}

/** Parses what {@link byteSafeCommand} printed; anything else is `INTEGRITY` (the sandbox is untrusted). */
export function parseByteSafeAnswer(text: string): { stdout: Buffer; stderr: Buffer; code: number } {
  const m = /^([A-Za-z0-9+/=]*)\n([A-Za-z0-9+/=]*)\n([0-9]{1,3})\n?$/.exec(text);
  if (m === null)
    throw new IntegrityError('INTEGRITY', 'the sandbox answered a command with something other than its encoded output and status');
  return { stdout: Buffer.from(m[1] as string, 'base64'), stderr: Buffer.from(m[2] as string, 'base64'), code: Number(m[3]) };
}

/**
 * A Holdfast {@link SandboxHandle} over a TanStack sandbox that can run commands, so Holdfast's
 * checkpoint and restore reach its workspace through the shell route (no stdin: the
 * arguments-only transport). Every exec is one `process.exec` of {@link byteSafeCommand}, so
 * bytes survive a text-only exec; `timeoutMs` and `signal` abort that exec through TanStack's
 * own `signal` (`killableProcesses` is what the TanStack provider makes of it).
 */
export async function commandHandle(tanstack: TanStackSandboxHandle, workspaceRoot?: string): Promise<SandboxHandle> {
  const root = workspaceRoot ?? tanstack.workspaceRoot ?? TANSTACK_WORKSPACE_ROOT;
  const home = await tanstack.process.exec('printf %s "$HOME"');
  const agentHome = home.exitCode === 0 && home.stdout.startsWith('/') && home.stdout.length <= MAX_HOME_LENGTH ? home.stdout : '/tmp';
  const exec = (argv: readonly string[], options: ExecOptions = {}): ExecProcess => {
    if (argv.length === 0) throw new InputError('INVALID_INPUT', 'exec needs a command');
    if (options.stdin !== undefined) {
      throw new InputError('INVALID_INPUT', `sandbox ${tanstack.id} is reached through text commands only: it takes no stdin`);
    }
    const cwd = options.cwd === undefined ? root : options.cwd.startsWith('/') ? options.cwd : `${root}/${options.cwd}`;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const abort = new AbortController();
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            abort.abort();
          }, options.timeoutMs);
    const onAbort = () => abort.abort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const killed: ExecExit = { code: null, signal: 'SIGKILL', timedOut: false };
    const exit = (async (): Promise<ExecExit> => {
      try {
        const result = await tanstack.process.exec(byteSafeCommand(argv, cwd), {
          ...(options.env === undefined ? {} : { env: options.env }),
          signal: abort.signal,
        });
        if (abort.signal.aborted) return { ...killed, timedOut };
        const answer = parseByteSafeAnswer(result.stdout);
        stdout.end(answer.stdout);
        stderr.end(answer.stderr);
        return { code: answer.code, signal: null, timedOut: false };
      } catch (error) {
        if (abort.signal.aborted) return { ...killed, timedOut };
        throw error;
      } finally {
        if (timer !== undefined) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (!stdout.writableEnded) stdout.end();
        if (!stderr.writableEnded) stderr.end();
      }
    })();
    // A TanStack command runs through a text exec that can only be stopped: every signal stops
    // it, and its pid is never known.
    const kill = (signal?: ExecSignal): void => {
      if (signal !== undefined && !(EXEC_SIGNALS as readonly string[]).includes(signal)) {
        throw new InputError('INVALID_INPUT', `kill: ${String(signal).slice(0, 32)} is not one of ${EXEC_SIGNALS.join(', ')}`, {
          data: { field: 'signal' },
        });
      }
      abort.abort();
    };
    return { stdout, stderr, stdin: undefined, exit, pid: Promise.resolve(undefined), kill };
  };
  return {
    id: tanstack.id,
    provider: tanstack.provider,
    workspaceRoot: root,
    agentHome,
    labels: {},
    exec,
    run: (argv, options) => runBuffered(exec, argv, options),
  };
}
