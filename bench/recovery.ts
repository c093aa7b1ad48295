/**
 * Recovery timeline: a run's sandbox is destroyed behind Holdfast's back (by another provider
 * instance, so nothing Holdfast remembers knows of it), and the next turn rebuilds it (detect,
 * create, restore the head through the agent, setup, validate, commit) before its body starts.
 * Reports the median of `--runs` (default 5) for every step and for "sandbox gone -> turn body
 * running", on local disk + SQLite and on S3 (s3rver) + PostgreSQL, for each provider of
 * `--provider bwrap|docker|both` (default both; docker runs the Node test image of
 * test/support/docker-images.ts in a scope of its own), against a reference measured in the
 * same run: a new sandbox plus `zstd -dc | tar -x` of the same workspace into it (no
 * verification, no agent): onto its host disk for bwrap, through an exec's stdin for docker,
 * whose disk the host cannot reach. `--scale small|full` picks the workspace (workload A of the
 * snapshot bench). `--root DIR` puts the bwrap sandboxes on another filesystem (a tmpfs such as
 * /dev/shm measures the software alone; the default, under the OS temp directory, measures it
 * with this machine's disk).
 *
 * Both sides start from the same disk state: the reference, like the recovery, runs just after
 * a sandbox holding the workspace was destroyed (and the same settle). On ext4 this matters
 * more than anything measured here: for minutes after many files are deleted, each new inode
 * is allocated past the recently deleted ones (`recently_deleted` in the kernel's inode
 * allocator), which made `tar -x` itself 1.3 s on a quiet disk and 8-17 s right after a delete
 * on this machine's disk.
 *
 * Then, per provider, restores alone (local disk + SQLite store, interleaved within each run,
 * the same reference measured again beside them): into a fresh host directory, into a fresh
 * sandbox through the agent, and into a fresh sandbox through the shell transport (no Node).
 * The goals table (issue 26, item 2) says for each goal its figure and whether it is met:
 * recovery through the agent at most 1.0x the reference, the shell route (new sandbox + shell
 * restore) at most 2.0x it, and the agent's restore at least 0.8x local restore throughput.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
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
import { median, printTable, timeMs } from './stats.js';
import { generateWorkloadA, type WorkspaceManifest } from './workspace-gen.js';

const runs = Number(process.argv[process.argv.indexOf('--runs') + 1]) || 5;
const json = process.argv.includes('--json');
const scale = process.argv.includes('--scale') && process.argv[process.argv.indexOf('--scale') + 1] === 'full' ? 'full' : 'small';
const rootArg = process.argv.includes('--root') ? process.argv[process.argv.indexOf('--root') + 1] : undefined;
const PROVIDER_CHOICES = ['bwrap', 'docker', 'both'] as const;
const providerArg = process.argv.includes('--provider') ? process.argv[process.argv.indexOf('--provider') + 1] : 'both';
if (!(PROVIDER_CHOICES as readonly (string | undefined)[]).includes(providerArg)) {
  throw new Error(`--provider must be one of ${PROVIDER_CHOICES.join(', ')}, not ${providerArg}`);
}

/** Pause after deleting a sandbox, so every measurement starts with the disk at rest. */
const SETTLE_MS = 3000;
const OTHER = 'other (lease, lookups, turn row)';

async function settle(): Promise<void> {
  execFileSync('sync');
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

/** A provider the recovery is measured on. */
interface SandboxCase {
  readonly name: 'bwrap' | 'docker';
  /** A provider instance; called twice with the same `dir`, both see the same sandboxes. */
  open(dir: string): SandboxProvider;
  /** What the run's deployment names besides its setup. */
  deployment(): { provider: string; image?: string };
  /**
   * Fills the (empty) workspace of `sandbox` with the benchmark tree: `source` as a directory,
   * `tarball` as tar.zst. A turn's handle is a view of the provider's, so `provider` gives the raw one.
   */
  fill(provider: SandboxProvider, sandbox: SandboxHandle, source: string, tarball: string): Promise<void>;
  /** The reference's extraction: `zstd -dc tarball | tar -x` into the workspace of `sandbox`. */
  untar(sandbox: SandboxHandle, tarball: string): Promise<void>;
}

/** Streams `zstd -dc tarball` into `tar -x` run in the sandbox's workspace, through the exec's stdin. */
async function untarThroughExec(sandbox: SandboxHandle, tarball: string): Promise<void> {
  const zstd = spawn('zstd', ['-q', '-dc', tarball], { stdio: ['ignore', 'pipe', 'inherit'] });
  const closed = once(zstd, 'close') as Promise<[number | null]>;
  const result = await sandbox.run(['tar', '-xf', '-', '-C', sandbox.workspaceRoot], { stdin: zstd.stdout });
  const [zstdCode] = await closed;
  if (result.code !== 0 || zstdCode !== 0) {
    throw new Error(`zstd -dc | tar -x into ${sandbox.id} failed (tar ${result.code}, zstd ${zstdCode}): ${result.stderr.toString()}`);
  }
}

const SANDBOXES: SandboxCase[] = [
  {
    name: 'bwrap',
    open: (dir) =>
      new BwrapSandboxProvider({
        root:
          rootArg === undefined ? path.join(dir, 'sandboxes') : path.join(rootArg, path.basename(path.dirname(dir)), path.basename(dir)),
      }),
    deployment: () => ({ provider: 'bwrap' }),
    async fill(provider, sandbox, source) {
      const disk = ((await provider.get(sandbox.id)) as BwrapSandboxHandle).hostDiskPath;
      fs.rmSync(path.join(disk, 'workspace'), { recursive: true, force: true });
      fs.cpSync(source, path.join(disk, 'workspace'), { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    },
    async untar(sandbox, tarball) {
      const disk = (sandbox as BwrapSandboxHandle).hostDiskPath;
      execFileSync('sh', ['-c', `zstd -q -dc "${tarball}" | tar -C "${path.join(disk, 'workspace')}" -xf -`]);
    },
  },
  {
    name: 'docker',
    // One scope per bench process: list() and the cleanup see only this run's containers.
    open: () => new DockerSandboxProvider({ image: nodeImage(), scope: `bench-recovery-${process.pid}` }),
    deployment: () => ({ provider: 'docker', image: nodeImage() }),
    fill: (_provider, sandbox, _source, tarball) => untarThroughExec(sandbox, tarball),
    untar: untarThroughExec,
  },
];

interface Backend {
  readonly name: string;
  open(dir: string, provider: SandboxProvider): Promise<{ hf: Holdfast; close(): Promise<void> }>;
}

const BACKENDS: Backend[] = [
  {
    name: 'local disk + SQLite',
    async open(dir, provider) {
      const { loadConfig } = await import('../src/config.js');
      const hf = await openHoldfast({
        config: loadConfig({ store: path.join(dir, 'store') }),
        cacheDir: path.join(dir, 'cache'),
        providers: () => provider,
      });
      return { hf, close: () => hf.close() };
    },
  },
  {
    name: 'S3 (s3rver) + PostgreSQL',
    async open(dir, provider) {
      const { startS3Server } = await import('../test/support/s3-server.js');
      const { createTestDatabase } = await import('../test/support/postgres.js');
      const { createS3BlobStore } = await import('../src/blob-store/drivers/s3.js');
      const { openMetadataStore } = await import('../src/metadata/metadata-store.js');
      const s3 = await startS3Server({ bucket: 'bench' });
      const db = await createTestDatabase();
      const blobs = await createS3BlobStore({
        kind: 's3',
        bucket: s3.bucket,
        prefix: 'recovery',
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: true,
        credentials: { ...s3.credentials },
      });
      const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
      const hf = await openHoldfast({ blobs, meta, cacheDir: path.join(dir, 'cache'), providers: () => provider });
      return {
        hf,
        async close() {
          await hf.close();
          await meta.close();
          await blobs.close();
          await db.drop();
          await s3.close();
        },
      };
    },
  },
];

interface Measured {
  readonly steps: Map<string, number[]>;
  readonly total: number[];
  readonly reference: number[];
}

async function measure(backend: Backend, sandboxes: SandboxCase, tmp: string, source: string, tarball: string): Promise<Measured> {
  const dir = fs.mkdtempSync(path.join(tmp, 'backend-'));
  const provider = sandboxes.open(dir);
  const outside = sandboxes.open(dir);
  const { hf, close } = await backend.open(dir, provider);
  const steps = new Map<string, number[]>();
  const total: number[] = [];
  const reference: number[] = [];
  try {
    const deployment = await hf.deployments.create({ ...sandboxes.deployment(), setup: [['sh', '-c', 'echo ready > /home/agent/ready']] });
    const run = await hf.runs.create({ deploymentId: deployment.id });
    // Put the workspace into the run's sandbox, then let a turn checkpoint it.
    await hf.runs.turn(run.id, ({ sandbox }) => sandboxes.fill(outside, sandbox, source, tarball));
    const add = (step: string, ms: number) => steps.set(step, [...(steps.get(step) ?? []), ms]);
    for (let i = 0; i < runs; i += 1) {
      const before = (await hf.runs.events(run.id, 1000)).length;
      await outside.destroy((await hf.runs.get(run.id)).sandbox?.id ?? '');
      // The sandbox vanished elsewhere: its deletion's disk work (TRIM on this VM's disk slowed
      // file creation 2x for seconds) must not be billed to the recovery.
      await settle();
      const started = performance.now();
      let bodyAt = 0;
      await hf.runs.turn(run.id, async () => {
        bodyAt = performance.now() - started;
      });
      total.push(bodyAt);
      const recovery = (await hf.runs.events(run.id, 1000)).slice(before).filter((e) => e.kind === 'recovery');
      for (const e of recovery) add(e.step, e.durationMs ?? 0);
      add(OTHER, bodyAt - recovery.reduce((sum, e) => sum + (e.durationMs ?? 0), 0));

      // The reference starts where the recovery did: a sandbox holding the workspace just destroyed.
      const held = await outside.create();
      await sandboxes.fill(outside, held, source, tarball);
      await outside.destroy(held.id);
      await settle();
      let fresh: SandboxHandle | undefined;
      reference.push(
        await timeMs(async () => {
          fresh = await outside.create();
          await sandboxes.untar(fresh, tarball);
        }),
      );
      await outside.destroy(fresh?.id ?? '');
      await settle();
      process.stderr.write(`[recovery] ${backend.name}, ${sandboxes.name}: run ${i + 1}/${runs} done\n`);
    }
  } finally {
    await close();
    for (const s of await outside.list()) await outside.destroy(s.id);
  }
  return { steps, total, reference };
}

/** Restores alone, per run: into a host directory, through the agent, through the shell; and the reference beside them. */
interface RestoreFigures {
  readonly local: number[];
  readonly agent: number[];
  readonly shell: number[];
  readonly reference: number[];
}

/** The restores of {@link RestoreFigures} on `sandboxes`, from a local-disk + SQLite store holding `source`, interleaved within each run. */
async function measureRestores(sandboxes: SandboxCase, tmp: string, source: string, tarball: string): Promise<RestoreFigures> {
  const dir = fs.mkdtempSync(path.join(tmp, 'restores-'));
  const provider = sandboxes.open(dir);
  const workers = new ContentWorkers();
  const blobs = await LocalDiskBlobStore.open({ path: path.join(dir, 'blobs') });
  const meta = await openMetadataStore({ kind: 'sqlite', path: path.join(dir, 'meta.db') });
  const snapshots = new Snapshots({ blobs, meta, workers, cacheDir: path.join(dir, 'cache') });
  const endpoints = new SandboxEndpoints(() => provider, { agents: new AgentPool() });
  const figures: RestoreFigures = { local: [], agent: [], shell: [], reference: [] };
  const fresh = async (use: (sandbox: SandboxHandle) => Promise<unknown>): Promise<number> => {
    await settle();
    let made: SandboxHandle | undefined;
    const ms = await timeMs(async () => {
      made = await provider.create();
      await use(made);
    });
    await provider.destroy(made?.id ?? '');
    return ms;
  };
  try {
    await snapshots.checkpoint({ dir: source, workspace: 'w' });
    for (let i = 0; i < runs; i += 1) {
      // On the sandboxes' filesystem, so both restores write to the same kind of disk.
      const into = path.join(rootArg === undefined ? dir : path.join(rootArg, path.basename(tmp)), `local-${i}`);
      await settle();
      figures.local.push(await timeMs(() => snapshots.restore({ dir: into, workspace: 'w' })));
      fs.rmSync(into, { recursive: true, force: true });
      figures.agent.push(await fresh((sandbox) => endpoints.restore(snapshots, sandbox, { workspace: 'w' })));
      figures.shell.push(
        await fresh(async (sandbox) => {
          const { target } = shellEndpoints(sandbox, { transport: 'shell-stdin', probe: await probeSandbox(sandbox) });
          return snapshots.restore({ workspace: 'w', target });
        }),
      );
      figures.reference.push(await fresh((sandbox) => sandboxes.untar(sandbox, tarball)));
      process.stderr.write(`[recovery] restores, ${sandboxes.name}: run ${i + 1}/${runs} done\n`);
    }
  } finally {
    await endpoints.close();
    await meta.close();
    await workers.close();
    for (const s of await provider.list()) await provider.destroy(s.id);
  }
  return figures;
}

/** Each goal of issue 26 item 2 with its figure (medians) and whether it is met. */
function reportGoals(results: ReadonlyMap<string, Measured>, restores: ReadonlyMap<string, RestoreFigures>): void {
  const rows: string[][] = [];
  const goal = (name: string, figure: number, met: boolean, how: string) =>
    rows.push([name, figure.toFixed(2), met ? 'met' : 'NOT met', how]);
  for (const [name, m] of results) {
    const ratio = median(m.total) / median(m.reference);
    goal(
      `recovery through the agent <= 1.0x tar (${name})`,
      ratio,
      ratio <= 1,
      `${median(m.total).toFixed(0)} / ${median(m.reference).toFixed(0)} ms`,
    );
  }
  for (const [name, r] of restores) {
    const shell = median(r.shell) / median(r.reference);
    goal(`shell route <= 2.0x tar (${name})`, shell, shell <= 2, `${median(r.shell).toFixed(0)} / ${median(r.reference).toFixed(0)} ms`);
    const throughput = median(r.local) / median(r.agent);
    goal(
      `agent restore >= 0.8x local throughput (${name})`,
      throughput,
      throughput >= 0.8,
      `local ${median(r.local).toFixed(0)} / agent ${median(r.agent).toFixed(0)} ms`,
    );
  }
  printTable(`Goals (issue 26, item 2), medians of ${runs}`, ['goal', 'figure', 'status', 'from'], rows);
}

function report(manifest: WorkspaceManifest, results: ReadonlyMap<string, Measured>): void {
  const names = [...results.keys()];
  const all = [...results.values()];
  const stepNames = [...new Set(all.flatMap((m) => [...m.steps.keys()]))];
  const cell = (xs: readonly number[] | undefined) => (xs === undefined || xs.length === 0 ? '-' : median(xs).toFixed(0));
  const rows = stepNames.map((step) => [step, ...all.map((m) => cell(m.steps.get(step)))]);
  rows.push(['sandbox gone -> turn body running', ...all.map((m) => cell(m.total))]);
  rows.push(['reference: new sandbox + zstd -dc | tar -x', ...all.map((m) => cell(m.reference))]);
  rows.push(['ratio holdfast / reference', ...all.map((m) => (median(m.total) / median(m.reference)).toFixed(2))]);
  printTable(
    `Recovery timeline, ms (${manifest.files} files, ${(manifest.bytes / 1e6).toFixed(0)} MB; medians of ${runs})`,
    ['step', ...names],
    rows,
  );
}

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-recovery-'));
  try {
    const source = path.join(tmp, 'workspace');
    const manifest = await generateWorkloadA(source, 1, scale);
    const tarball = path.join(tmp, 'ws.tar.zst');
    execFileSync('sh', ['-c', `tar -C "${source}" -cf - . | zstd -q -3 -o "${tarball}"`]);
    const results = new Map<string, Measured>();
    const restores = new Map<string, RestoreFigures>();
    const chosen = SANDBOXES.filter((c) => providerArg === 'both' || c.name === providerArg);
    for (const sandboxes of chosen) {
      for (const backend of BACKENDS)
        results.set(`${backend.name}, ${sandboxes.name}`, await measure(backend, sandboxes, tmp, source, tarball));
      restores.set(sandboxes.name, await measureRestores(sandboxes, tmp, source, tarball));
    }
    if (json) {
      const out = Object.fromEntries(
        [...results].map(([name, m]) => [name, { steps: Object.fromEntries(m.steps), total: m.total, reference: m.reference }]),
      );
      const alone = Object.fromEntries(restores);
      process.stdout.write(`${JSON.stringify({ files: manifest.files, bytes: manifest.bytes, results: out, restores: alone })}\n`);
    } else {
      report(manifest, results);
      reportGoals(results, restores);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (rootArg !== undefined) fs.rmSync(path.join(rootArg, path.basename(tmp)), { recursive: true, force: true });
  }
}

await main();
