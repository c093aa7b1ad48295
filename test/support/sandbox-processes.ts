import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import type { SandboxHandle } from '../../src/sandbox/sandbox-provider.js';

/** How long {@link survivors} gives the kernel to finish killing and reaping. */
const SURVIVOR_WAIT_MS = 5_000;
const SURVIVOR_POLL_MS = 100;

/**
 * Fails (never skips) when bubblewrap is missing: the bwrap tests are the only proof of the
 * sandbox's isolation, so CI must not pass without them.
 */
export function expectBwrapInstalled(): void {
  const dirs = ['/usr/bin', ...(process.env.PATH ?? '').split(path.delimiter)];
  const found = dirs.some((dir) => fs.existsSync(path.join(dir, 'bwrap')));
  expect(found, 'bubblewrap is not installed: apt-get install bubblewrap (.ci/run installs it)').toBe(true);
}

/** Host pids whose command line contains `marker`, once they stop disappearing (at most 5 s). */
export async function survivors(marker: string): Promise<string[]> {
  const deadline = Date.now() + SURVIVOR_WAIT_MS;
  while (pgrep(marker).length > 0 && Date.now() < deadline) await sleep(SURVIVOR_POLL_MS);
  return pgrep(marker);
}

/** Host pids whose command line contains `marker`, right now. */
export function pgrep(marker: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', marker], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Runs a Node script in the sandbox and returns its stdout; a non-zero exit fails the test with its stderr. */
export async function runNode(handle: SandboxHandle, script: string, timeoutMs = 120_000): Promise<string> {
  const result = await handle.run(['node', '-e', script], { timeoutMs });
  expect(result.code, result.stderr.toString()).toBe(0);
  return result.stdout.toString();
}
