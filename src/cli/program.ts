import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { type HoldfastConfig, loadConfig } from '../config.js';
import { registerInit } from './commands/init.js';
import { Output } from './output.js';

/** Options every command inherits from the program. */
export interface GlobalOptions {
  readonly store?: string;
  readonly json?: boolean;
}

/** What a command's action receives besides its own arguments. */
export interface CommandContext {
  readonly config: HoldfastConfig;
  readonly output: Output;
}

/** The package version, read from package.json beside the compiled code. */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Resolves the config and output mode from the global flags of `command`. */
export function contextOf(command: Command): CommandContext {
  const opts = command.optsWithGlobals<GlobalOptions>();
  const output = new Output(opts.json === true);
  return { config: loadConfig(opts.store === undefined ? {} : { store: opts.store }), output };
}

/** Builds the `holdfast` command tree. Commands load their heavy modules when they run. */
export function buildProgram(): Command {
  const program = new Command('holdfast')
    .description('Durable runs and workspaces for agent sandboxes.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('--store <dir>', 'use SQLite + local disk under DIR (overrides HOLDFAST_META / HOLDFAST_BLOBS)')
    .option('--json', 'print machine-readable JSON on stdout')
    .showHelpAfterError('(run holdfast --help for usage)')
    .addHelpText(
      'after',
      `
Configuration (environment):
  HOLDFAST_META   sqlite:PATH | postgres://user@host:5432/db   (default sqlite:./.holdfast/meta.db)
  HOLDFAST_BLOBS  file:PATH | s3://bucket/prefix?endpoint=URL&region=R&forcePathStyle=true
                  (default file:./.holdfast/blobs; S3 credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)

Exit codes: 0 ok, 1 error, 2 usage.`,
    );
  registerInit(program);
  return program;
}
