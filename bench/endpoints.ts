/**
 * Every workspace endpoint against the local one and against `tar | zstd`: full checkpoint,
 * no-change checkpoint and full restore of the same workspace (workload A: ~20k files,
 * ~295 MB at full scale), once per endpoint per run, endpoints interleaved within a run;
 * medians of `--runs` (default 3). `--json` prints the raw figures, `--scale small` a quick
 * version, `--only a,b` a subset by endpoint id.
 *
 * Goals (issue 11): agent transports at least 0.7x local throughput for full checkpoint and
 * restore, and a no-change checkpoint at most 1.5x local; the shell fallback within 3x of the
 * agent transport.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import { AgentPool } from '../src/sandbox/agent/host/agent-pool.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { checkpointHandle, restoreHandle } from '../src/sandbox/transport/sandbox-snapshots.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { tarZstdTool } from './reference-tools.js';
import { median, printTable, timeMs } from './stats.js';
import { generateWorkloadA } from './workspace-gen.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
};
const runs = Number(arg('--runs')) || 3;
const json = process.argv.includes('--json');
const scale = arg('--scale') === 'small' ? 'small' : 'full';
const only = arg('--only')?.split(',');

/** One place a workspace can live, with the three operations the benchmark times. */
interface BenchEndpoint {
  readonly id: string;
  readonly label: string;
  /** Makes a workspace at this endpoint holding a copy of `source` (not timed). */
  prepare(source: string, tmp: string): Promise<Prepared>;
}

interface Prepared {
  checkpoint(snapshots: Snapshots): Promise<unknown>;
  /** Restores the head into a fresh, empty workspace at this endpoint. */
  restoreFresh(snapshots: Snapshots): Promise<unknown>;
  dispose(): Promise<void>;
}

function copyTree(from: string, to: string): void {
  fs.cpSync(from, to, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
}

const localEndpoint: BenchEndpoint = {
  id: 'local',
  label: 'local directory',
  async prepare(source, tmp) {
    let restores = 0;
    return {
      checkpoint: (snapshots) => snapshots.checkpoint({ dir: source, workspace: 'w' }),
      restoreFresh: (snapshots) => snapshots.restore({ dir: path.join(tmp, `local-restore-${restores++}`), workspace: 'w' }),
      dispose: async () => undefined,
    };
  },
};

/** A bwrap sandbox reached through the agent; the pool keeps one connection, as runs do. */
function bwrapAgentEndpoint(provider: BwrapSandboxProvider): BenchEndpoint {
  return {
    id: 'bwrap-agent',
    label: 'bwrap + agent',
    async prepare(source) {
      const sandbox = (await provider.create()) as BwrapSandboxHandle;
      fs.rmSync(path.join(sandbox.hostDiskPath, 'workspace'), { recursive: true, force: true });
      copyTree(source, path.join(sandbox.hostDiskPath, 'workspace'));
      const pool = new AgentPool();
      const made = [sandbox.id];
      return {
        checkpoint: (snapshots) => checkpointHandle(snapshots, sandbox, { workspace: 'w' }, pool),
        async restoreFresh(snapshots) {
          const target = await provider.create();
          made.push(target.id);
          return restoreHandle(snapshots, target, { workspace: 'w' }, pool);
        },
        async dispose() {
          await pool.close();
          for (const id of made) await provider.destroy(id);
        },
      };
    },
  };
}

async function openSnapshots(dir: string, workers: ContentWorkers): Promise<{ snapshots: Snapshots; close(): Promise<void> }> {
  const blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
  const meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
  return { snapshots: new Snapshots({ blobs, meta, workers, cacheDir: path.join(dir, 'cache') }), close: () => meta.close() };
}

type Figures = { full: number[]; noChange: number[]; restore: number[] };

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-endpoints-'));
  const workers = new ContentWorkers();
  process.env.HOLDFAST_SANDBOX_DIR = path.join(tmp, 'sandboxes');
  const bwrap = new BwrapSandboxProvider({ root: path.join(tmp, 'sandboxes', 'bwrap') });
  const endpoints = [localEndpoint, bwrapAgentEndpoint(bwrap)].filter((e) => only === undefined || only.includes(e.id));
  const results = new Map<string, Figures>(endpoints.map((e) => [e.id, { full: [], noChange: [], restore: [] }]));
  const tar: Figures = { full: [], noChange: [], restore: [] };
  try {
    const source = path.join(tmp, 'workspace');
    const manifest = await generateWorkloadA(source, 1, scale);
    const tarTool = tarZstdTool();
    await tarTool.preflight();
    for (let run = 0; run < runs; run += 1) {
      const repoDir = path.join(tmp, `tar-${run}`);
      fs.mkdirSync(repoDir);
      const repo = await tarTool.open(repoDir, source);
      tar.full.push((await repo.checkpoint(source)).ms);
      const restoreTar = repo.restore;
      if (restoreTar === undefined) throw new Error('tar|zstd has no restore');
      tar.restore.push((await restoreTar(path.join(tmp, `tar-restore-${run}`))).ms);
      for (const endpoint of endpoints) {
        const figures = results.get(endpoint.id) as Figures;
        const prepared = await endpoint.prepare(source, tmp);
        const store = await openSnapshots(path.join(tmp, `${endpoint.id}-${run}`), workers);
        try {
          figures.full.push(await timeMs(() => prepared.checkpoint(store.snapshots)));
          figures.noChange.push(await timeMs(() => prepared.checkpoint(store.snapshots)));
          figures.restore.push(await timeMs(() => prepared.restoreFresh(store.snapshots)));
        } finally {
          await store.close();
          await prepared.dispose();
        }
      }
      fs.rmSync(path.join(tmp, `tar-restore-${run}`), { recursive: true, force: true });
      process.stderr.write(`[endpoints] run ${run + 1}/${runs} done\n`);
    }
    if (json) {
      const raw = Object.fromEntries(results);
      process.stdout.write(
        `${JSON.stringify({ bench: 'endpoints', files: manifest.files, bytes: manifest.bytes, runs, results: raw, tar }, null, 2)}\n`,
      );
      return;
    }
    const m = median;
    const local = results.get('local');
    const agent = results.get('bwrap-agent');
    const ratio = (x: number[], y: number[] | undefined) => (y === undefined ? '-' : (m(x) / m(y)).toFixed(2));
    printTable(
      `workspace endpoints, ${manifest.files} files / ${(manifest.bytes / 1e6).toFixed(0)} MB, medians of ${runs} (time ratios: higher is slower)`,
      ['endpoint', 'full ms', '/local', '/tar', 'no-change ms', '/local', 'restore ms', '/local', '/tar', 'full /agent', 'restore /agent'],
      [
        ['tar | zstd', m(tar.full).toFixed(0), '', '', '', '', m(tar.restore).toFixed(0), '', '', '', ''],
        ...endpoints.map((e) => {
          const f = results.get(e.id) as Figures;
          return [
            e.label,
            m(f.full).toFixed(0),
            ratio(f.full, local?.full),
            ratio(f.full, tar.full),
            m(f.noChange).toFixed(0),
            ratio(f.noChange, local?.noChange),
            m(f.restore).toFixed(0),
            ratio(f.restore, local?.restore),
            ratio(f.restore, tar.restore),
            ratio(f.full, agent?.full),
            ratio(f.restore, agent?.restore),
          ];
        }),
      ],
    );
    process.stdout.write(
      'goals: agent full and restore /local <= 1.43 (>= 0.7x throughput), agent no-change /local <= 1.5; shell /agent <= 3\n',
    );
  } finally {
    await workers.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
