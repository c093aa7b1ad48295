import { constants as osConstants } from 'node:os';
import type { Command } from 'commander';
import { InputError, NotFoundError } from '../../errors.js';
import { findSandbox, listSandboxes, openSandboxProvider, SANDBOX_PROVIDER_NAMES } from '../../sandbox/open-provider.js';
import type { ExecExit, SandboxInfo } from '../../sandbox/sandbox-provider.js';
import { EXIT_INTERRUPTED, renderTable, requestExitCode } from '../output.js';
import { collect, outputOf, positiveInt } from '../program.js';

/** Exit status for a command killed by its timeout, as timeout(1) reports it. */
const EXIT_TIMED_OUT = 124;

/** `holdfast sandbox create | exec | ls | destroy`: thin edges over the sandbox providers. */
export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('create sandboxes, run commands in them, list and destroy them')
    .addHelpText('after', '\nState lives under $HOLDFAST_SANDBOX_DIR/<provider> (default ~/.local/share/holdfast/sandboxes/<provider>).');

  sandbox
    .command('create')
    .description('create a sandbox and print its id')
    .option('-p, --provider <name>', `${SANDBOX_PROVIDER_NAMES.join(' | ')} (local has no isolation: development only)`, 'bwrap')
    .option('-l, --label <key=value>', 'label the sandbox (repeatable)', collect, [])
    .option('-e, --env <name=value>', 'variable for every command in the sandbox (repeatable)', collect, [])
    .option('--image <name>', 'image to create it from (docker; providers without images refuse it)')
    .action(async (flags: { provider: string; label: string[]; env: string[]; image?: string }, command: Command) => {
      const output = outputOf(command);
      const provider = openSandboxProvider(flags.provider);
      const handle = await provider.create({
        labels: pairs(flags.label, '--label'),
        env: pairs(flags.env, '--env'),
        ...(flags.image === undefined ? {} : { image: flags.image }),
      });
      output.result(
        { id: handle.id, provider: handle.provider, workspaceRoot: handle.workspaceRoot, agentHome: handle.agentHome },
        () => handle.id,
      );
    });

  sandbox
    .command('exec')
    .description('run a command in a sandbox, streaming its output; exits with its exit code (124 on timeout, 128+N on signal N)')
    .argument('<id>', 'sandbox id, a unique prefix of it (8+ characters), or latest')
    .argument('<command...>', 'the command and its arguments, after --')
    .option('-p, --provider <name>', 'provider of the sandbox (default: look in each)')
    .option('-i, --stdin', 'forward this process\u2019s stdin to the command (default: empty stdin)')
    .option('-e, --env <name=value>', 'variable for this command (repeatable)', collect, [])
    .option('-C, --cwd <dir>', 'working directory inside the sandbox (default: the workspace)')
    .option('-t, --timeout <ms>', 'kill the command and everything it started after MS milliseconds', positiveInt('--timeout'))
    .action(async (id: string, argv: string[], flags: ExecFlags) => {
      const handle = await findSandbox(id, flags.provider);
      const proc = handle.exec(argv, {
        env: pairs(flags.env, '--env'),
        ...(flags.stdin === true ? { stdin: process.stdin } : {}),
        ...(flags.cwd === undefined ? {} : { cwd: flags.cwd }),
        ...(flags.timeout === undefined ? {} : { timeoutMs: flags.timeout }),
      });
      // The CLI must not outlive its command silently, nor leave it running when interrupted;
      // after Ctrl-C it exits 130, as an interrupted command does, whatever the killed command reported.
      let interrupted = false;
      const onInterrupt = (): void => {
        interrupted = true;
        proc.kill();
      };
      const onTerminate = (): void => proc.kill();
      process.once('SIGINT', onInterrupt).once('SIGTERM', onTerminate);
      proc.stdout.pipe(process.stdout);
      proc.stderr.pipe(process.stderr);
      const exit = await proc.exit;
      process.off('SIGINT', onInterrupt).off('SIGTERM', onTerminate);
      if (flags.stdin === true) process.stdin.destroy();
      requestExitCode(interrupted ? EXIT_INTERRUPTED : exitCodeOf(exit));
    });

  sandbox
    .command('ls')
    .description('list sandboxes')
    .option('-p, --provider <name>', 'only this provider (default: all)')
    .action(async (flags: { provider?: string }, command: Command) => {
      const output = outputOf(command);
      const infos = await listSandboxes(flags.provider);
      output.result(infos, () => renderList(infos));
    });

  sandbox
    .command('destroy')
    .description('destroy sandboxes: kill their processes and delete their files (a missing id is not an error)')
    .argument('<id...>', 'sandbox ids (or unique prefixes of 8+ characters, or latest)')
    .option('-p, --provider <name>', 'provider of the sandboxes (default: look in each)')
    .action(async (ids: string[], flags: { provider?: string }, command: Command) => {
      const output = outputOf(command);
      const results: Array<{ id: string; destroyed: boolean }> = [];
      for (const id of ids) {
        const handle = await findSandbox(id, flags.provider).catch((error: unknown) => {
          if (error instanceof NotFoundError) return undefined;
          throw error;
        });
        if (handle !== undefined) await openSandboxProvider(handle.provider).destroy(handle.id);
        results.push({ id: handle?.id ?? id, destroyed: handle !== undefined });
      }
      output.result(results, () => results.map((r) => `${r.id}: ${r.destroyed ? 'destroyed' : 'not found (nothing to do)'}`).join('\n'));
    });
}

interface ExecFlags {
  readonly provider?: string;
  readonly stdin?: boolean;
  readonly env: string[];
  readonly cwd?: string;
  readonly timeout?: number;
}

/** Parses repeated `key=value` flags. */
function pairs(values: readonly string[], flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const value of values) {
    const eq = value.indexOf('=');
    if (eq <= 0) throw new InputError('INVALID_INPUT', `${flag} takes key=value, got ${JSON.stringify(value)}`, { data: { flag } });
    out[value.slice(0, eq)] = value.slice(eq + 1);
  }
  return out;
}

/** A shell-style exit status for how the command ended. */
function exitCodeOf(exit: ExecExit): number {
  if (exit.timedOut) return EXIT_TIMED_OUT;
  if (exit.code !== null) return exit.code;
  const signal = exit.signal === null ? undefined : osConstants.signals[exit.signal as NodeJS.Signals];
  return 128 + (signal ?? 0);
}

function renderList(infos: readonly SandboxInfo[]): string {
  if (infos.length === 0) return 'no sandboxes';
  const rows = infos.map((i) => [
    i.id,
    i.provider,
    new Date(i.createdAt).toISOString(),
    Object.entries(i.labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(','),
  ]);
  return renderTable(['ID', 'PROVIDER', 'CREATED', 'LABELS'], rows);
}
