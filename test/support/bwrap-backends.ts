import path from 'node:path';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { BACKENDS, type OpenedBackends } from './backends.js';
import { expectBwrapInstalled } from './sandbox-processes.js';

/** The first backend pair with a bubblewrap provider whose sandboxes live in its directory. */
export interface BwrapBackends {
  readonly b: OpenedBackends;
  readonly provider: BwrapSandboxProvider;
}

/**
 * Opens the first backend pair (SQLite + local disk) and a bwrap provider rooted in its
 * directory; `HOLDFAST_SANDBOX_DIR` points there, so `checkpointSandbox` / `restoreSandbox`
 * find sandboxes the way the CLI does. Fails (never skips) without bubblewrap.
 */
export async function openBwrapBackends(): Promise<BwrapBackends> {
  expectBwrapInstalled();
  const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
  const sandboxes = path.join(b.dir, 'sandboxes');
  process.env.HOLDFAST_SANDBOX_DIR = sandboxes;
  return { b, provider: new BwrapSandboxProvider({ root: path.join(sandboxes, 'bwrap') }) };
}
