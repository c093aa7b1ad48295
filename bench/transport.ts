/**
 * Exec transport against the local transport: checkpoint and restore of the same workspace,
 * once read straight from the host filesystem and once from inside a bubblewrap sandbox through
 * the in-sandbox agent. Runs are interleaved; medians of `--runs` (default 3). `--json` prints
 * the raw figures. Targets: full checkpoint and restore through exec at least 70% of local
 * throughput; a no-change checkpoint through exec at most 1.5x local.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import { AgentPool } from '../src/sandbox/agent/host/agent-pool.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { checkpointHandle, checkpointSandbox, restoreSandbox } from '../src/sandbox/transport/sandbox-snapshots.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { median, printTable, timeMs } from './stats.js';
import { generateWorkloadA } from './workspace-gen.js';

const runs = Number(process.argv[process.argv.indexOf('--runs') + 1]) || 3;
const json = process.argv.includes('--json');
const scale = process.argv.includes('--scale') && process.argv[process.argv.indexOf('--scale') + 1] === 'small' ? 'small' : 'full';

async function openSnapshots(dir: string, workers: ContentWorkers): Promise<{ snapshots: Snapshots; close(): Promise<void> }> {
  const blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
  const meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
  return { snapshots: new Snapshots({ blobs, meta, workers, cacheDir: path.join(dir, 'cache') }), close: () => meta.close() };
}

function copyTree(from: string, to: string): void {
  fs.cpSync(from, to, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
}

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-transport-'));
  const workers = new ContentWorkers();
  const results = {
    local: { full: [] as number[], noChange: [] as number[], restore: [] as number[] },
    exec: { full: [] as number[], noChange: [] as number[], restore: [] as number[] },
    /** No-change checkpoints through an agent kept open between operations (what runs do). */
    pooled: { noChange: [] as number[] },
  };
  try {
    const source = path.join(tmp, 'workspace');
    const manifest = await generateWorkloadA(source, 1, scale);
    const bytes = manifest.bytes;
    process.env.HOLDFAST_SANDBOX_DIR = path.join(tmp, 'sandboxes');
    const provider = new BwrapSandboxProvider({ root: path.join(tmp, 'sandboxes', 'bwrap') });
    for (let run = 0; run < runs; run += 1) {
      // Local: the workspace on the host.
      const local = await openSnapshots(path.join(tmp, `local-${run}`), workers);
      results.local.full.push(await timeMs(() => local.snapshots.checkpoint({ dir: source, workspace: 'w' })));
      results.local.noChange.push(await timeMs(() => local.snapshots.checkpoint({ dir: source, workspace: 'w' })));
      results.local.restore.push(
        await timeMs(() => local.snapshots.restore({ dir: path.join(tmp, `local-restore-${run}`), workspace: 'w' })),
      );
      await local.close();
      // Exec: the same files inside a bwrap sandbox, reached only through the agent.
      const sandbox = (await provider.create()) as BwrapSandboxHandle;
      fs.rmSync(path.join(sandbox.hostDiskPath, 'workspace'), { recursive: true, force: true });
      copyTree(source, path.join(sandbox.hostDiskPath, 'workspace'));
      const exec = await openSnapshots(path.join(tmp, `exec-${run}`), workers);
      results.exec.full.push(await timeMs(() => checkpointSandbox(exec.snapshots, { sandbox: sandbox.id, workspace: 'w' })));
      results.exec.noChange.push(await timeMs(() => checkpointSandbox(exec.snapshots, { sandbox: sandbox.id, workspace: 'w' })));
      const pool = new AgentPool();
      await checkpointHandle(exec.snapshots, sandbox, { workspace: 'w' }, pool);
      results.pooled.noChange.push(await timeMs(() => checkpointHandle(exec.snapshots, sandbox, { workspace: 'w' }, pool)));
      await pool.close();
      const target = await provider.create();
      results.exec.restore.push(await timeMs(() => restoreSandbox(exec.snapshots, { sandbox: target.id, workspace: 'w' })));
      await exec.close();
      await provider.destroy(sandbox.id);
      await provider.destroy(target.id);
      process.stderr.write(`[transport] run ${run + 1}/${runs} done\n`);
    }
    const m = (xs: number[]) => median(xs);
    // Time ratios compare durations; throughput ratios compare bytes per second (the inverse).
    const row = (op: string, local: number[], exec: number[], kind: 'time' | 'throughput', target: string) =>
      [op, m(local), m(exec), kind, kind === 'time' ? m(exec) / m(local) : m(local) / m(exec), target] as const;
    const rows = [
      row('full checkpoint', results.local.full, results.exec.full, 'throughput', '>= 0.70'),
      row('no-change checkpoint', results.local.noChange, results.exec.noChange, 'time', '<= 1.5'),
      row('no-change checkpoint, pooled agent', results.local.noChange, results.pooled.noChange, 'time', '<= 1.5'),
      row('full restore', results.local.restore, results.exec.restore, 'throughput', '>= 0.70'),
    ];
    if (json) {
      process.stdout.write(`${JSON.stringify({ bench: 'transport', bytes, files: manifest.files, runs, results }, null, 2)}\n`);
      return;
    }
    printTable(
      `exec transport (bwrap + agent) vs local, ${manifest.files} files / ${(bytes / 1e6).toFixed(0)} MB, medians of ${runs}`,
      ['operation', 'local ms', 'exec ms', 'ratio of', 'exec/local', 'target'],
      rows.map(([op, l, e, kind, ratio, target]) => [op, l.toFixed(0), e.toFixed(0), kind, ratio.toFixed(2), target]),
    );
  } finally {
    await workers.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
