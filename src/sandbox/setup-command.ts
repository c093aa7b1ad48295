import { HoldfastError } from '../errors.js';
import { withholdSecrets } from '../rules/withhold-secrets.js';
import type { SandboxHandle } from './sandbox-provider.js';

/** Bytes of a failed command's stderr kept in its error. */
export const SETUP_STDERR_TAIL_BYTES = 4096;
/** Output a setup, validation or install command may print before it is stopped. */
export const SETUP_OUTPUT_BYTES = 8 * 1024 * 1024;

/** How one setup command runs and how its failure is named. */
export interface SetupCommand {
  readonly argv: readonly string[];
  /** Working directory in the sandbox (default: its workspace root). */
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  /** What the command is, for the message (`setup command 2`, `validation`, `bundle unpack`). */
  readonly what: string;
  /** Output (both streams) past which the command is stopped (default {@link SETUP_OUTPUT_BYTES}). */
  readonly maxOutputBytes?: number;
  /** Further detail for the error's `data` (which repository, which step). */
  readonly data?: Readonly<Record<string, unknown>>;
}

/**
 * Runs one command Holdfast runs for a deployment (setup, validation, a bundle install step, a
 * repository's setup) in `sandbox`: the one runner of such commands. A non-zero exit, a
 * signal or a timeout is `SETUP_FAILED` whose `data` has the argv, exit code, signal,
 * `timedOut` and the tail of stderr with every credential it printed withheld (the error is
 * kept with the run's events and logged); output past {@link SETUP_OUTPUT_BYTES} is
 * `LIMIT_EXCEEDED`.
 */
export async function runSetupCommand(sandbox: SandboxHandle, command: SetupCommand): Promise<void> {
  const { argv } = command;
  const result = await sandbox.run(argv, {
    cwd: command.cwd ?? sandbox.workspaceRoot,
    env: { ...command.env },
    timeoutMs: command.timeoutMs,
    maxOutputBytes: command.maxOutputBytes ?? SETUP_OUTPUT_BYTES,
  });
  if (result.code === 0) return;
  const tail = result.stderr.subarray(Math.max(0, result.stderr.length - SETUP_STDERR_TAIL_BYTES)).toString('utf8');
  throw new HoldfastError(
    'SETUP_FAILED',
    `${command.what} ${JSON.stringify(argv)} failed in sandbox ${sandbox.id}: exit ${result.code ?? result.signal}${result.timedOut ? ' (timed out)' : ''}`,
    {
      data: {
        ...command.data,
        argv,
        exitCode: result.code,
        signal: result.signal,
        timedOut: result.timedOut,
        stderr: withholdSecrets(tail).value,
      },
    },
  );
}
