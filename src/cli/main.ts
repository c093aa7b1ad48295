#!/usr/bin/env node
import { CommanderError } from 'commander';
import { EXIT_OK, EXIT_USAGE, exitCodeFor, Output, takeRequestedExitCode } from './output.js';
import { buildProgram } from './program.js';

// The AWS SDK warns on every start under Node 20; the CLI's output must stay clean for scripts.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** Runs the CLI with `argv` and returns the exit code (0 ok, 1 error, 2 usage). */
export async function runCli(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  program.exitOverride();
  for (const sub of program.commands) sub.exitOverride();
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return takeRequestedExitCode() ?? EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      const benign = error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help';
      return benign ? EXIT_OK : EXIT_USAGE;
    }
    new Output(argv.includes('--json')).error(error);
    return exitCodeFor(error);
  }
}

process.exitCode = await runCli(process.argv.slice(2));
