import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHoldfast } from '../src/index.js';
import { storeEnvironment } from './support/cli-env.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
/** Random files, so every byte is new and the checkpoint uploads several 16 MiB packs. */
const FILES = 40;
const FILE_BYTES = 3 * 1024 * 1024;
/** How long a test waits for the first pack to land before it stops the CLI. */
const FIRST_PACK_WAIT_MS = 60_000;

/** Pack blobs in the store's local-disk directory. */
function packsIn(dir: string): string[] {
  const packs = path.join(dir, 'blobs', 'packs');
  if (!fs.existsSync(packs)) return [];
  return (fs.readdirSync(packs, { recursive: true }) as string[]).filter((p) => fs.statSync(path.join(packs, p)).isFile());
}

/** Starts `holdfast checkpoint` of `source`, and resolves once it has uploaded a pack (it is mid-checkpoint then). */
async function checkpointUnderWay(
  dir: string,
  source: string,
  workspace: string,
): Promise<{ child: ChildProcess; exit: Promise<number | null> }> {
  const child = spawn(process.execPath, [bin, 'checkpoint', source, '-w', workspace], { env: storeEnvironment(dir), stdio: 'ignore' });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal === null ? null : -1))));
  const deadline = Date.now() + FIRST_PACK_WAIT_MS;
  while (packsIn(dir).length === 0) {
    if (Date.now() > deadline) throw new Error('the checkpoint uploaded no pack in time');
    await new Promise((r) => setTimeout(r, 25));
  }
  return { child, exit };
}

/** The workspace's checkpoints as the store has them. */
async function checkpointsOf(dir: string, workspace: string) {
  const hf = await openHoldfast({
    meta: `sqlite:${path.join(dir, 'meta.db')}`,
    blobs: `file:${path.join(dir, 'blobs')}`,
    cacheDir: path.join(dir, 'cache'),
  });
  try {
    const ws = await hf.meta.workspaces.getByName(hf.tenant.id, workspace);
    return { head: ws.headCheckpointId, checkpoints: await hf.meta.checkpoints.listByWorkspace(ws.id) };
  } finally {
    await hf.close();
  }
}

describe('a checkpoint stopped before it finishes (a real holdfast CLI process)', () => {
  let dir: string;
  let source: string;

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-interrupt-'));
    source = path.join(dir, 'source');
    fs.mkdirSync(source);
    for (let i = 0; i < FILES; i += 1) fs.writeFileSync(path.join(source, `f${i}.bin`), randomBytes(FILE_BYTES));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('Ctrl-C (SIGINT): exits 130, marks the checkpoint failed INTERRUPTED itself, head unchanged; gc --grace 0s deletes its packs', async () => {
    const { child, exit } = await checkpointUnderWay(dir, source, 'ctrl-c');
    child.kill('SIGINT');
    expect(await exit).toBe(130);
    const { head, checkpoints } = await checkpointsOf(dir, 'ctrl-c');
    expect(head).toBeNull();
    expect(checkpoints).toHaveLength(1);
    expect(checkpoints[0]).toMatchObject({
      status: 'failed',
      error: { code: 'INTERRUPTED', data: { reason: 'signal', signal: 'SIGINT' } },
    });
    expect(packsIn(dir).length).toBeGreaterThan(0);

    const gc = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(process.execPath, [bin, 'gc', '--grace', '0s', '--json'], { env: storeEnvironment(dir) }, (error, stdout) =>
        resolve({ code: error === null ? 0 : Number(error.code), stdout }),
      );
    });
    expect(gc.code).toBe(0);
    expect(JSON.parse(gc.stdout).orphanPacksDeleted).toBeGreaterThan(0);
    expect(packsIn(dir)).toEqual([]);
  }, 180_000);

  it('kill -9: the checkpoint stays pending until the next GC sees its writer gone, marks it failed INTERRUPTED, and deletes its packs', async () => {
    const { child, exit } = await checkpointUnderWay(dir, source, 'killed');
    child.kill('SIGKILL');
    await exit;
    const before = await checkpointsOf(dir, 'killed');
    expect(before.checkpoints.map((c) => c.status)).toEqual(['pending']);
    expect(packsIn(dir).length).toBeGreaterThan(0);

    const hf = await openHoldfast({
      meta: `sqlite:${path.join(dir, 'meta.db')}`,
      blobs: `file:${path.join(dir, 'blobs')}`,
      cacheDir: path.join(dir, 'cache'),
    });
    try {
      // A writer still alive renews its heartbeat: a GC whose timeout it is inside leaves its checkpoint pending.
      const live = await hf.snapshots.gc({ graceMs: 0 });
      expect(live.checkpointsInterrupted).toBe(0);
      expect((await checkpointsOf(dir, 'killed')).checkpoints.map((c) => c.status)).toEqual(['pending']);
      await new Promise((r) => setTimeout(r, 1500));
      const report = await hf.snapshots.gc({ graceMs: 0, writerTimeoutMs: 1000 });
      expect(report.checkpointsInterrupted).toBe(1);
      expect(report.orphanPacksDeleted).toBeGreaterThan(0);
    } finally {
      await hf.close();
    }
    const after = await checkpointsOf(dir, 'killed');
    expect(after.head).toBeNull();
    expect(after.checkpoints[0]).toMatchObject({ status: 'failed', error: { code: 'INTERRUPTED', data: { reason: 'writer_gone' } } });
    expect(packsIn(dir)).toEqual([]);
  }, 180_000);
});
