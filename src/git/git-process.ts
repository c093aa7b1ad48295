import { spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';

/** How often a watched git command's directory is measured. */
const WATCH_INTERVAL_MS = 100;

/** What one host git command gets: its directory, environment, bounds and optional watch. */
export interface GitProcessOptions {
  readonly cwd?: string;
  /** The whole environment (nothing of the service's is added). */
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** Receives stdout as it comes; a throw stops the command (its process group is killed) and is rethrown. */
  readonly onStdout?: (chunk: Buffer) => void;
  /** Characters of stderr kept (the tail). */
  readonly stderrChars: number;
  /** A directory whose size is measured while the command runs; past `maxBytes` the command is killed. */
  readonly watch?: { readonly dir: string; readonly maxBytes: number };
}

/** How a host git command ended: its exit code (-1 when killed), its stderr tail and why it was killed, if it was. */
export interface GitProcessResult {
  readonly code: number;
  readonly stderr: string;
  readonly killed?: 'timeout' | 'watch' | 'aborted';
  /** What `onStdout` threw, when it stopped the command. */
  readonly stdoutError?: unknown;
}

/**
 * Runs `git` with `args` in its own process group with stdin closed (nothing can wait on
 * it), and kills the whole group (git's transport helpers and index-pack too) when the time
 * is up, the signal fires, `onStdout` throws or the watched directory grows past its bound
 * (measured every {@link WATCH_INTERVAL_MS} and once more when git exits, so a bound passed
 * between two measurements still counts: `killed: 'watch'`).
 * Never rejects: the caller reads the result.
 */
export function runGit(args: readonly string[], options: GitProcessOptions): Promise<GitProcessResult> {
  return new Promise((resolve) => {
    const child = spawn('git', args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stderr = '';
    let killed: GitProcessResult['killed'];
    let stdoutError: unknown;
    let measuring = false;
    const kill = (why: NonNullable<GitProcessResult['killed']>) => {
      killed ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    const timer = setTimeout(() => kill('timeout'), options.timeoutMs);
    const onAbort = () => kill('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    const watch = options.watch;
    const watcher =
      watch === undefined
        ? undefined
        : setInterval(() => {
            if (measuring) return;
            measuring = true;
            void treeBytes(watch.dir)
              .then((bytes) => {
                if (bytes > watch.maxBytes) kill('watch');
              })
              .finally(() => {
                measuring = false;
              });
          }, WATCH_INTERVAL_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdoutError !== undefined || options.onStdout === undefined) return;
      try {
        options.onStdout(chunk);
      } catch (error) {
        stdoutError = error;
        kill('aborted');
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderr = (stderr + text).slice(-options.stderrChars);
    });
    child.on('error', (error) => {
      stderr = `${stderr}${error.message}`.slice(-options.stderrChars);
    });
    child.on('close', async (code) => {
      clearTimeout(timer);
      if (watcher !== undefined) clearInterval(watcher);
      options.signal?.removeEventListener('abort', onAbort);
      // A fast transfer can finish between two measurements: the last one decides too.
      if (watch !== undefined && killed === undefined && (await treeBytes(watch.dir)) > watch.maxBytes) killed = 'watch';
      resolve({
        code: killed === undefined && typeof code === 'number' ? code : -1,
        stderr,
        ...(killed === undefined ? {} : { killed }),
        ...(stdoutError === undefined ? {} : { stdoutError }),
      });
    });
  });
}

/** Bytes of the regular files under `dir` (0 while it does not exist); entries that vanish mid-walk are skipped. */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: import('node:fs').Dirent[];
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) total += await treeBytes(p);
    else if (entry.isFile())
      total += await fsp.lstat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}
