import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHoldfast } from '../src/index.js';
import { beginStaging, endStaging, STAGING_MARK } from '../src/snapshot/restore/restore-staging.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

const bin = path.join(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..'), 'dist', 'bin', 'main.js');
const MiB = 1024 * 1024;

/** Staging directories beside `target`. */
function stagingBeside(target: string): string[] {
  return fs.readdirSync(path.dirname(target)).filter((n) => n.startsWith(`.${path.basename(target)}${STAGING_MARK}`));
}

/** Runs `holdfast restore` and kills it with SIGKILL as soon as its staging directory exists. */
function restoreKilledWhileStaging(store: string, target: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  return new Promise((resolve) => {
    const child: ChildProcess = spawn(process.execPath, [bin, '--store', store, 'restore', target, '-w', 'ws'], { env, stdio: 'ignore' });
    const poll = setInterval(() => {
      if (stagingBeside(target).length > 0) child.kill('SIGKILL');
    }, 2);
    child.on('exit', (_code, signal) => {
      clearInterval(poll);
      resolve(signal === 'SIGKILL');
    });
  });
}

describe('staging left by a restore killed with kill -9', () => {
  let dir: string;
  let store: string;
  let cacheDir: string;
  let env: NodeJS.ProcessEnv;
  let hf: Awaited<ReturnType<typeof openHoldfast>>;
  let want: ReturnType<typeof describeTree>;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-staging-'));
    store = path.join(dir, 'store');
    cacheDir = path.join(dir, 'cache');
    env = { ...process.env, HOLDFAST_CACHE_DIR: cacheDir, HOLDFAST_META: '', HOLDFAST_BLOBS: '' };
    const workspace = path.join(dir, 'ws');
    for (let i = 0; i < 400; i += 1) writeFile(workspace, `src/file-${i}.txt`, `file ${i}\n`.repeat(100));
    for (let i = 0; i < 4; i += 1) writeFile(workspace, `data/big-${i}.bin`, seededBytes(24 * MiB, `staging-${i}`));
    want = describeTree(workspace);
    const config = {
      meta: { kind: 'sqlite', path: path.join(store, 'meta.db') },
      blobs: { kind: 'local-disk', path: path.join(store, 'blobs') },
    } as const;
    hf = await openHoldfast({ config, cacheDir });
    await hf.snapshots.checkpoint({ dir: workspace, workspace: 'ws' });
  }, 180_000);
  afterAll(async () => {
    await hf?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A restore killed mid-staging; retried until one is killed before it publishes. */
  async function killedRestore(target: string): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      fs.rmSync(target, { recursive: true, force: true });
      if ((await restoreKilledWhileStaging(store, target, env)) && stagingBeside(target).length > 0) return;
    }
    throw new Error('no restore was killed while staging');
  }

  it('is removed by the next restore to the same target, which then succeeds', async () => {
    const target = path.join(dir, 'target-a');
    await killedRestore(target);
    expect(stagingBeside(target)).toHaveLength(1);
    await hf.snapshots.restore({ dir: target, workspace: 'ws' });
    expect(stagingBeside(target)).toEqual([]);
    expect(describeTree(target)).toEqual(want);
    expect(fs.readdirSync(path.join(cacheDir, 'staging'))).toEqual([]);
  }, 120_000);

  it('is removed by gc', async () => {
    const target = path.join(dir, 'target-b');
    await killedRestore(target);
    const report = await hf.snapshots.gc({ graceMs: 0 });
    expect(report.stagingRemoved).toBe(1);
    expect(stagingBeside(target)).toEqual([]);
  }, 120_000);

  it('owned by a restore still running is kept, by the next restore and by gc', async () => {
    const target = path.join(dir, 'target-c');
    // Staging owned by this (live) process, as a concurrent restore to the same target would hold it.
    const live = beginStaging(cacheDir, target);
    writeFile(live, 'half-written', 'in progress');
    await hf.snapshots.restore({ dir: target, workspace: 'ws' });
    expect((await hf.snapshots.gc({ graceMs: 0 })).stagingRemoved).toBe(0);
    expect(fs.readFileSync(path.join(live, 'half-written'), 'utf8')).toBe('in progress');
    expect(describeTree(target)).toEqual(want);
    fs.rmSync(live, { recursive: true });
    endStaging(cacheDir, live);
  }, 120_000);
});
