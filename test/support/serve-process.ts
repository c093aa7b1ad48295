import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { storeEnvironment } from './cli-env.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The compiled CLI (`npm run build`). */
export const HOLDFAST_BIN = path.join(root, 'dist', 'bin', 'main.js');
/** How long `serve` may take to print its listening line, and to exit after SIGTERM. */
const SERVE_START_TIMEOUT_MS = 15_000;
const SERVE_STOP_TIMEOUT_MS = 10_000;

/** What one run of the compiled CLI printed, and its exit code (-1 when it was killed). */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the compiled CLI with `args` and `env`; never rejects (the exit code says how it went). */
export function runHoldfast(args: readonly string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOLDFAST_BIN, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

/** A store in a fresh temp directory (SQLite, local disk, bwrap sandboxes) and the CLI over it. */
export interface CliStore {
  readonly dir: string;
  readonly env: Record<string, string>;
  /** Runs `holdfast args…`; rejects with stderr when it exits non-zero. Resolves with stdout. */
  holdfast(args: readonly string[]): Promise<string>;
  /** Starts `holdfast serve --port 0` on this store, with `extraEnv` over the store's environment. */
  serve(args?: readonly string[], extraEnv?: Readonly<Record<string, string>>): Promise<ServeProcess>;
  /** Removes the directory (stop every server first). */
  cleanup(): void;
}

/** A running `holdfast serve`. */
export interface ServeProcess {
  readonly url: string;
  /** The serve process's id (for CPU accounting or a kill -9). */
  readonly pid: number;
  /** Its stdout so far (JSON log lines). */
  log(): string;
  /** SIGTERM, then SIGKILL after the stop timeout. */
  stop(): Promise<void>;
}

/** A fresh store for the compiled CLI; fails when it has not been built. */
export function openCliStore(prefix: string): CliStore {
  if (!fs.existsSync(HOLDFAST_BIN)) throw new Error(`${HOLDFAST_BIN} is missing: run npm run build first (npm test does)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const env = storeEnvironment(dir);
  return {
    dir,
    env,
    async holdfast(args) {
      const run = await runHoldfast(args, env);
      if (run.code !== 0) throw new Error(`holdfast ${args.join(' ')} failed: ${run.stderr}`);
      return run.stdout;
    },
    serve: (args = [], extraEnv = {}) => startServe({ ...env, ...extraEnv }, args),
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** Starts the compiled `holdfast serve` on a free port with `env` and `args`, once it logs `listening`. */
export async function startServe(env: Record<string, string>, args: readonly string[]): Promise<ServeProcess> {
  const child = spawn(process.execPath, [HOLDFAST_BIN, 'serve', '--port', '0', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not listen: ${stdout}${stderr}`)), SERVE_START_TIMEOUT_MS);
    const check = (): void => {
      for (const line of stdout.split('\n').slice(0, -1)) {
        const record = JSON.parse(line) as { msg?: string; url?: string };
        if (record.msg === 'listening' && record.url !== undefined) {
          clearTimeout(timer);
          resolve(record.url);
        }
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stdout}${stderr}`)));
  });
  return {
    url,
    pid: child.pid ?? 0,
    log: () => stdout,
    stop: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), SERVE_STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
