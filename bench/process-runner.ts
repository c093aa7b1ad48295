/**
 * Runs the benchmark's child processes under GNU time, so every measurement carries the wall time
 * (measured here, with `hrtime`) and the peak resident set size (GNU time's `%M`, from the kernel's
 * rusage of the child). Nothing here needs root; the page cache is never dropped.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** GNU time; Debian package `time` (listed in `.ci/run`'s APT_PACKAGES). */
export const GNU_TIME = '/usr/bin/time';
/** Most stderr kept for an error message. */
const MAX_STDERR_CHARS = 4000;

/** One command line, run without a shell. */
export interface Command {
  readonly argv: readonly string[];
  readonly cwd?: string;
  /** Added to (and overriding) the benchmark's own environment. */
  readonly env?: Readonly<Record<string, string>>;
}

/** What one measured command (or pipeline) cost. */
export interface Measured {
  readonly ms: number;
  /** Peak RSS in KiB; for a pipeline, the sum over its concurrently running stages. */
  readonly peakRssKiB: number;
  readonly stdout: string;
}

/** Throws a message saying what to install when GNU time is missing. */
export function requireGnuTime(): void {
  if (!existsSync(GNU_TIME)) {
    throw new Error(`${GNU_TIME} not found: install GNU time (apt-get install time; it is in .ci/run's APT_PACKAGES)`);
  }
}

/** Runs `command` under GNU time; rejects with its stderr when it exits non-zero. */
export async function runMeasured(command: Command): Promise<Measured> {
  const rssFile = tempFile('rss');
  try {
    const [program, ...args] = command.argv;
    if (program === undefined) throw new Error('runMeasured: empty argv');
    const { ms, stdout } = await run([GNU_TIME, '-f', '%M', '-o', rssFile, program, ...args], command);
    return { ms, peakRssKiB: await readRss(rssFile), stdout };
  } finally {
    await fs.rm(rssFile, { force: true });
  }
}

/**
 * Runs `left | right` through bash (bytes flow straight from one process to the other, not through
 * Node), each stage under its own GNU time. The pipeline fails if either stage fails.
 */
export async function runPipelineMeasured(left: Command, right: Command, cwd?: string): Promise<Measured> {
  const leftRss = tempFile('rss-left');
  const rightRss = tempFile('rss-right');
  try {
    const stage = (c: Command, rss: string) => [GNU_TIME, '-f', '%M', '-o', rss, ...c.argv].map(shellQuote).join(' ');
    const script = `${stage(left, leftRss)} | ${stage(right, rightRss)}`;
    const { ms, stdout } = await run(['bash', '-o', 'pipefail', '-c', script], { cwd, env: { ...left.env, ...right.env } });
    return { ms, peakRssKiB: (await readRss(leftRss)) + (await readRss(rightRss)), stdout };
  } finally {
    await fs.rm(leftRss, { force: true });
    await fs.rm(rightRss, { force: true });
  }
}

/** Runs commands one after another: times add up, the peak is the largest single peak. */
export async function runSequenceMeasured(commands: readonly Command[]): Promise<Measured> {
  let ms = 0;
  let peakRssKiB = 0;
  let stdout = '';
  for (const command of commands) {
    const one = await runMeasured(command);
    ms += one.ms;
    peakRssKiB = Math.max(peakRssKiB, one.peakRssKiB);
    stdout += one.stdout;
  }
  return { ms, peakRssKiB, stdout };
}

/** Runs `command` unmeasured (setup work such as `restic init`); rejects when it exits non-zero. */
export async function runQuiet(command: Command): Promise<string> {
  return (await run(command.argv, command)).stdout;
}

/**
 * Flushes dirty pages to disk (`sync`, no root needed) so one tool's unwritten data is not written
 * back during, and charged to, the next tool's measurement. The page cache itself stays warm.
 */
export async function flushDirtyPages(): Promise<void> {
  await runQuiet({ argv: ['sync'] });
}

/** True when `program` can be found on PATH (or is an existing absolute path). */
export function onPath(program: string): boolean {
  if (path.isAbsolute(program)) return existsSync(program);
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && existsSync(path.join(dir, program)));
}

async function run(argv: readonly string[], options: { cwd?: string | undefined; env?: Readonly<Record<string, string>> | undefined }) {
  const [program, ...args] = argv;
  if (program === undefined) throw new Error('run: empty argv');
  const started = process.hrtime.bigint();
  const child = spawn(program, args, {
    cwd: options.cwd ?? process.cwd(),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    err = (err + chunk.toString('utf8')).slice(-MAX_STDERR_CHARS);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (exitCode) => resolve(exitCode));
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (code !== 0) {
    throw new Error(`command failed (exit ${code}): ${argv.map(shellQuote).join(' ')}\n${err.trim()}`);
  }
  return { ms, stdout: Buffer.concat(out).toString('utf8') };
}

/** GNU time writes "Command exited with non-zero status N" before the format line; take the last number. */
async function readRss(file: string): Promise<number> {
  const lines = (await fs.readFile(file, 'utf8')).trim().split('\n');
  const value = Number(lines[lines.length - 1]);
  if (!Number.isFinite(value)) throw new Error(`could not read peak RSS from GNU time output: ${lines.join(' / ')}`);
  return value;
}

let tempCounter = 0;
function tempFile(label: string): string {
  tempCounter += 1;
  return path.join(os.tmpdir(), `hf-bench-${process.pid}-${tempCounter}-${label}`);
}

/** Quotes one argument for bash. */
export function shellQuote(arg: string): string {
  return /^[A-Za-z0-9_./=:,@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}
