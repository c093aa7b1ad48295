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

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import { AgentPool } from '../src/sandbox/agent/host/agent-pool.js';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { probeSandbox } from '../src/sandbox/endpoints/shell/probe.js';
import { shellEndpoints } from '../src/sandbox/endpoints/shell/shell-endpoints.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import type { SandboxHandle, SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { nodeImage } from '../test/support/docker-images.js';
import { withoutStdin } from '../test/support/shell-handles.js';
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
    const made: string[] = [];
    return {
      checkpoint: (snapshots) => snapshots.checkpoint({ dir: source, workspace: 'w' }),
      restoreFresh: (snapshots) => {
        const dir = fs.mkdtempSync(path.join(tmp, 'local-restore-'));
        made.push(dir);
        return snapshots.restore({ dir, workspace: 'w', replace: false });
      },
      dispose: async () => {
        for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

/** Copies `source` into a sandbox's workspace with `tar` through one exec's stdin (a provider whose disk the host cannot reach). */
async function fillThroughTar(handle: SandboxHandle, source: string): Promise<void> {
  const tar = spawn('tar', ['-cf', '-', '-C', source, '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const result = await handle.run(['tar', '-xf', '-', '-C', handle.workspaceRoot], { stdin: tar.stdout });
  if (result.code !== 0) throw new Error(`filling ${handle.id} failed: ${result.stderr.toString()}`);
}

/** How one sandbox endpoint fills a new sandbox and reaches its workspace. */
interface SandboxRoute {
  readonly id: string;
  readonly label: string;
  readonly provider: SandboxProvider;
  fill(handle: SandboxHandle, source: string): Promise<void>;
  /** Wraps the handle the transport sees (a provider without stdin). */
  readonly wrap?: (handle: SandboxHandle) => SandboxHandle;
  /** Forces the shell transport (the sandbox has Node, so the choice would be the agent). */
  readonly shell?: 'shell-stdin' | 'shell-args';
}

function fillBwrap(handle: SandboxHandle, source: string): Promise<void> {
  const disk = (handle as BwrapSandboxHandle).hostDiskPath;
  fs.rmSync(path.join(disk, 'workspace'), { recursive: true, force: true });
  copyTree(source, path.join(disk, 'workspace'));
  return Promise.resolve();
}

/** A sandbox endpoint: the agent through SandboxEndpoints (one pooled connection, as runs keep), or the shell transport forced. */
function sandboxEndpoint(route: SandboxRoute): BenchEndpoint {
  return {
    id: route.id,
    label: route.label,
    async prepare(source) {
      const pool = new AgentPool();
      const endpoints = new SandboxEndpoints(() => route.provider, { agents: pool });
      const made: string[] = [];
      const create = async (): Promise<{ raw: SandboxHandle; seen: SandboxHandle }> => {
        const raw = await route.provider.create();
        made.push(raw.id);
        return { raw, seen: route.wrap?.(raw) ?? raw };
      };
      const via = async (snapshots: Snapshots, handle: SandboxHandle, op: 'checkpoint' | 'restore') => {
        if (route.shell === undefined) {
          return op === 'checkpoint'
            ? endpoints.checkpoint(snapshots, handle, { workspace: 'w' })
            : endpoints.restore(snapshots, handle, { workspace: 'w' });
        }
        const { source: from, target } = shellEndpoints(handle, { transport: route.shell, probe: await probeSandbox(handle) });
        return op === 'checkpoint' ? snapshots.checkpoint({ workspace: 'w', source: from }) : snapshots.restore({ workspace: 'w', target });
      };
      const sandbox = await create();
      await route.fill(sandbox.raw, source);
      return {
        checkpoint: (snapshots) => via(snapshots, sandbox.seen, 'checkpoint'),
        restoreFresh: async (snapshots) => via(snapshots, (await create()).seen, 'restore'),
        async dispose() {
          await endpoints.close();
          for (const id of made) await route.provider.destroy(id);
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
  const docker = new DockerSandboxProvider({ image: nodeImage(), scope: `bench-endpoints-${process.pid}` });
  const endpoints = [
    localEndpoint,
    sandboxEndpoint({ id: 'bwrap-agent', label: 'bwrap + agent', provider: bwrap, fill: fillBwrap }),
    sandboxEndpoint({ id: 'docker-agent', label: 'docker + agent', provider: docker, fill: fillThroughTar }),
    sandboxEndpoint({ id: 'shell-stdin', label: 'bwrap + shell, stdin', provider: bwrap, fill: fillBwrap, shell: 'shell-stdin' }),
    sandboxEndpoint({
      id: 'shell-args',
      label: 'bwrap + shell, no stdin',
      provider: bwrap,
      fill: fillBwrap,
      shell: 'shell-args',
      wrap: withoutStdin,
    }),
  ].filter((e) => only === undefined || only.includes(e.id));
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
          const last = (xs: number[]) => (xs[xs.length - 1] as number).toFixed(0);
          process.stderr.write(
            `[endpoints] run ${run + 1} ${endpoint.id}: full ${last(figures.full)} ms, no-change ${last(figures.noChange)} ms, restore ${last(figures.restore)} ms\n`,
          );
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
    // The shell rows compare with the agent on the same provider (bwrap).
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
