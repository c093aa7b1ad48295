import type { Readable } from 'node:stream';
import { InputError } from '../errors.js';
import { type ExecProcess, MAX_RUN_OUTPUT_BYTES, type RunOptions, type RunResult } from './sandbox-provider.js';

/**
 * Implements {@link SandboxHandle.run} over any `exec`: buffers stdout and stderr until the
 * command exits. Past `maxOutputBytes` (both streams together) the command is killed and the
 * promise rejects with `LIMIT_EXCEEDED`, so a runaway command cannot exhaust memory.
 */
export async function runBuffered(
  exec: (argv: readonly string[], options: RunOptions) => ExecProcess,
  argv: readonly string[],
  options: RunOptions = {},
): Promise<RunResult> {
  const maxOutputBytes = options.maxOutputBytes ?? MAX_RUN_OUTPUT_BYTES;
  const proc = exec(argv, options);
  let total = 0;
  let exceeded = false;
  const collect = (stream: Readable): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > maxOutputBytes) {
          exceeded = true;
          proc.kill();
          stream.resume();
        } else if (!exceeded) parts.push(chunk);
      });
      stream.once('end', () => resolve(Buffer.concat(parts)));
      stream.once('error', reject);
    });
  const [stdout, stderr, exit] = await Promise.all([collect(proc.stdout), collect(proc.stderr), proc.exit]);
  if (exceeded) {
    throw new InputError('LIMIT_EXCEEDED', `command printed more than ${maxOutputBytes} bytes; use exec() to stream its output`, {
      data: { argv0: argv[0] ?? '', maxOutputBytes },
    });
  }
  return { code: exit.code, signal: exit.signal, stdout, stderr, timedOut: exit.timedOut };
}
