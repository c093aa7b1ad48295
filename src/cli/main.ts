#!/usr/bin/env node
import { type Command, CommanderError } from 'commander';
import { InputError } from '../errors.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, exitCodeFor, Output, takeRequestedExitCode } from './output.js';
import { buildProgram } from './program.js';

// The AWS SDK warns on every start under Node 20; the CLI's output must stay clean for scripts.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** Commander's ways of ending that are not failures: `--help` asked for, `--version`. */
const BENIGN_EXITS: ReadonlySet<string> = new Set(['commander.helpDisplayed', 'commander.version']);

/**
 * Makes every command, at any depth, throw instead of exiting, so every usage error ends here
 * (exit 2). Under `--json` commander prints nothing itself: the error goes out as the JSON
 * error document every other failure uses.
 */
function overrideExits(command: Command, json: boolean): void {
  command.exitOverride();
  if (json) command.configureOutput({ writeErr: () => undefined, outputError: () => undefined });
  for (const sub of command.commands) overrideExits(sub, json);
}

/**
 * Runs the CLI with `argv` and returns the exit code (0 ok, 1 error, 2 usage). A usage error
 * is any refusal by the parser: an unknown option or command, a bad option value, a missing
 * argument, or a command group given without its subcommand (its help goes to stderr).
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes('--json');
  overrideExits(program, json);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return takeRequestedExitCode() ?? EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      // `holdfast help [cmd]` ends as commander.help with exit code 0; a group without its subcommand with 1.
      if (BENIGN_EXITS.has(error.code) || (error.code === 'commander.help' && error.exitCode === 0)) return EXIT_OK;
      if (json) {
        const message = error.code === 'commander.help' ? 'a command is required: see --help' : error.message.replace(/^error: /, '');
        new Output(true).error(new InputError('INVALID_INPUT', message, { data: { usage: error.code } }));
      }
      return EXIT_USAGE;
    }
    new Output(json).error(error);
    // A command stopped by a signal asked for 128 + its number (130 for Ctrl-C).
    return takeRequestedExitCode() ?? exitCodeFor(error);
  }
}

// A reader that stops early (`holdfast … | head`) closes the pipe: stop quietly, as other
// command-line tools do, instead of dying on an unhandled EPIPE.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(process.exitCode ?? EXIT_OK);
  });
}

// Ctrl-C ends the CLI with 130, as shells report an interrupted command, rather than by the
// signal. A command that handles SIGINT itself (serve drains and stops; sandbox exec stops its
// command first) has its own listener and decides how it ends.
process.on('SIGINT', () => {
  if (process.listenerCount('SIGINT') === 1) process.exit(EXIT_INTERRUPTED);
});

process.exitCode = await runCli(process.argv.slice(2));
