/**
 * `cli/`: the `holdfast` command line: the commander program, one file per command
 * (`commands/`), progress and `--json` rendering.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { type HoldfastConfig, loadConfig } from '../config.js';
import { NotFoundError } from '../errors.js';
import type { Holdfast } from '../index.js';
import { registerBrowse } from './commands/browse.js';
import { registerCheckpoint } from './commands/checkpoint.js';
import { registerCompletion } from './commands/completion.js';
import { registerDeployment } from './commands/deployment.js';
import { registerFolder } from './commands/folder.js';
import { registerInit } from './commands/init.js';
import { registerLease } from './commands/lease.js';
import { registerMaintenance } from './commands/maintenance.js';
import { registerRestore } from './commands/restore.js';
import { registerRun } from './commands/run.js';
import { registerSandbox } from './commands/sandbox.js';
import { registerServe } from './commands/serve.js';
import { registerToken } from './commands/token.js';
import { registerUser } from './commands/user.js';
import { registerVersion } from './commands/version.js';
import { Output } from './output.js';

/** Options every command inherits from the program. */
export interface GlobalOptions {
  readonly store?: string;
  readonly json?: boolean;
  readonly quiet?: boolean;
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

/** The output mode from the global flags of `command` (`--json`, `--quiet`). */
export function outputOf(command: Command): Output {
  const opts = command.optsWithGlobals<GlobalOptions>();
  return new Output(opts.json === true, process.stdout, process.stderr, opts.quiet === true);
}

/** Resolves the config and output mode from the global flags of `command`. */
export function contextOf(command: Command): CommandContext {
  const opts = command.optsWithGlobals<GlobalOptions>();
  return { config: loadConfig(opts.store === undefined ? {} : { store: opts.store }), output: outputOf(command) };
}

/**
 * Opens Holdfast for one command, runs `fn`, and closes it again; a store that does not exist
 * yet is created (as `holdfast init` would). The library (and with it the storage drivers) is
 * imported here, when a command runs, so `--help` stays fast.
 */
export async function withHoldfast<T>(command: Command, fn: (hf: Holdfast, context: CommandContext) => Promise<T>): Promise<T> {
  return openFor(contextOf(command), fn);
}

/**
 * {@link withHoldfast} for a command that only reads: a local store (SQLite file, blob
 * directory) that does not exist is `NOT_FOUND` (exit 1), and nothing is created, so a command
 * that looks in the wrong directory leaves no empty `.holdfast` behind. PostgreSQL and S3 are
 * named explicitly (`HOLDFAST_META`, `HOLDFAST_BLOBS`) and opened as configured.
 */
export async function readHoldfast<T>(command: Command, fn: (hf: Holdfast, context: CommandContext) => Promise<T>): Promise<T> {
  const context = contextOf(command);
  requireExistingStore(context.config);
  return openFor(context, fn);
}

function requireExistingStore(config: HoldfastConfig): void {
  const missing =
    config.meta.kind === 'sqlite' && !existsSync(config.meta.path)
      ? { part: 'meta', path: config.meta.path }
      : config.blobs.kind === 'local-disk' && !existsSync(config.blobs.path)
        ? { part: 'blobs', path: config.blobs.path }
        : undefined;
  if (missing === undefined) return;
  throw new NotFoundError(
    `no Holdfast store is configured here (${missing.path} does not exist): pass --store DIR or set HOLDFAST_META and HOLDFAST_BLOBS, or create one with holdfast init`,
    { data: { store: missing.part, path: missing.path } },
  );
}

async function openFor<T>(context: CommandContext, fn: (hf: Holdfast, context: CommandContext) => Promise<T>): Promise<T> {
  const { openHoldfast } = await import('../index.js');
  const hf = await openHoldfast({ config: context.config });
  try {
    return await fn(hf, context);
  } finally {
    await hf.close();
  }
}

/** Parses a positive integer option. */
export function positiveInt(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive integer`);
    return n;
  };
}

/** A parser for an option whose value must be one of `choices` (a usage error, exit 2, otherwise). */
export function oneOf<T extends string>(name: string, choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) throw new InvalidArgumentError(`${name} must be one of ${choices.join(', ')}`);
    return value as T;
  };
}

/** Collects a repeatable option into a list. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Builds the `holdfast` command tree. Commands load their heavy modules when they run. */
export function buildProgram(): Command {
  const program = new Command('holdfast')
    .description('Durable runs and workspaces for agent sandboxes.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('--store <dir>', 'use SQLite + local disk under DIR (overrides HOLDFAST_META / HOLDFAST_BLOBS)')
    .option('--json', 'print machine-readable JSON on stdout')
    .option('-q, --quiet', 'print no progress and no notes on stderr (results and errors still)')
    .showHelpAfterError('(run holdfast --help for usage)')
    .addHelpText(
      'after',
      `
Configuration (environment):
  HOLDFAST_META   sqlite:PATH | postgres://user@host:5432/db   (default sqlite:./.holdfast/meta.db)
  HOLDFAST_BLOBS  file:PATH | s3://bucket/prefix?endpoint=URL&region=R&forcePathStyle=true
                  (default file:./.holdfast/blobs; S3 credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)

Exit codes: 0 ok, 1 error, 2 usage (bad arguments, INVALID_INPUT, INVALID_PATH, SECRET_EXCLUDED),
  130 interrupted (Ctrl-C); sandbox exec passes on its command's code (124 timeout, 128+N signal N).`,
    );
  registerInit(program);
  registerCheckpoint(program);
  registerRestore(program);
  registerBrowse(program);
  registerMaintenance(program);
  registerSandbox(program);
  registerServe(program);
  registerToken(program);
  registerUser(program);
  registerDeployment(program);
  registerRun(program);
  registerLease(program);
  registerFolder(program);
  registerVersion(program);
  registerCompletion(program);
  return program;
}
