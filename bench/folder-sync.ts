/**
 * Work-folder sync through a real sandbox against `tar | zstd` of the same files (issue 13):
 * hydration of a cold sandbox, a no-change save and a save of 10 changed files, through the
 * in-sandbox agent (bwrap) and through the shell fallback (bwrap, stdin), measured in the same
 * run; medians of `--runs` (default 3). Full scale: 10,000 files / 100 MB; `--scale small`:
 * 1,000 files / 10 MB. `--json` prints the raw figures.
 *
 * The reference: `tar | zstd` archiving the files (what a save that ships everything costs)
 * and extracting them (a hydration from one archive).
 */

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalDiskBlobStore } from '../src/blob-store/drivers/local-disk.js';
import { Folders } from '../src/folders/folders.js';
import { FolderSync } from '../src/folders/sandbox-sync.js';
import type { SyncEndpoints } from '../src/folders/sync/sync-engine.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { ContentWorkers } from '../src/objects/content-workers.js';
import type { RunSandboxContext } from '../src/runs/run-extension.js';
import { AgentPool } from '../src/sandbox/agent/host/agent-pool.js';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { probeSandbox } from '../src/sandbox/endpoints/shell/probe.js';
import { shellEndpoints } from '../src/sandbox/endpoints/shell/shell-endpoints.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { tarZstdTool } from './reference-tools.js';
import { median, printTable, timeMs } from './stats.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
};
const runs = Number(arg('--runs')) || 3;
const json = process.argv.includes('--json');
const small = arg('--scale') === 'small';
/** Files and bytes of the collection (the 10,000 files / 100 MB). */
const FILES = small ? 1_000 : 10_000;
const FILE_BYTES = 10_000;
const FILES_PER_DIR = 100;
/** Files a "changed" save edits. */
const CHANGED_FILES = 10;

/** Deterministic, incompressible-ish files in directories of {@link FILES_PER_DIR}. */
function generate(root: string): string[] {
  const paths: string[] = [];
  let x = 0x9e3779b9;
  const next = (): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
  for (let i = 0; i < FILES; i += 1) {
    const rel = `d${Math.floor(i / FILES_PER_DIR)}/f${i}.bin`;
    const bytes = Buffer.alloc(FILE_BYTES);
    for (let k = 0; k < FILE_BYTES; k += 4) bytes.writeUInt32LE(next(), k);
    fs.mkdirSync(path.join(root, path.dirname(rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), bytes);
    paths.push(rel);
  }
  return paths;
}

/** The shell transport forced (the sandbox has Node, so the route would be the agent). */
const shellRoute: SyncEndpoints = {
  async checkpoint(snapshots, handle, input) {
    const { source } = shellEndpoints(handle, { transport: 'shell-stdin', probe: await probeSandbox(handle) });
    return snapshots.checkpoint({ ...input, source });
  },
  async restore(snapshots, handle, input) {
    const { target } = shellEndpoints(handle, { transport: 'shell-stdin', probe: await probeSandbox(handle) });
    return snapshots.restore({ ...input, target });
  },
};

type Figures = { hydrate: number[]; noChange: number[]; changed: number[] };

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-folder-sync-'));
  const workers = new ContentWorkers();
  const blobs = await LocalDiskBlobStore.open({ path: path.join(tmp, 'store', 'blobs') });
  const meta = await openMetadataStore({ kind: 'sqlite', path: path.join(tmp, 'store', 'meta.db') });
  const bwrap = new BwrapSandboxProvider({ root: path.join(tmp, 'sandboxes', 'bwrap') });
  const local = new LocalSandboxProvider({ root: path.join(tmp, 'sandboxes', 'local') });
  const pool = new AgentPool();
  const agentRoute = new SandboxEndpoints((name) => (name === 'local' ? local : bwrap), { agents: pool });
  const folders = new Folders({ meta, blobs, workers });
  const syncOver = (endpoints: SyncEndpoints) =>
    new FolderSync({ meta, blobs, workers, cacheDir: path.join(tmp, 'cache'), folders, endpoints });
  const made: Array<{ provider: { destroy(id: string): Promise<void> }; id: string }> = [];
  const routes = [
    { id: 'agent', label: 'bwrap + agent', sync: syncOver(agentRoute) },
    { id: 'shell', label: 'bwrap + shell, stdin', sync: syncOver(shellRoute) },
  ];
  const results = new Map<string, Figures>(routes.map((r) => [r.id, { hydrate: [], noChange: [], changed: [] }]));
  const tar = { archive: [] as number[], extract: [] as number[] };
  try {
    const source = path.join(tmp, 'source');
    const paths = generate(source);
    const tenant = await new Snapshots({ blobs, meta, workers, cacheDir: path.join(tmp, 'cache') }).tenant(true);
    const deploymentId = randomUUID().replace(/-/g, '').padEnd(64, '0');
    await meta.deployments.put({ tenantId: tenant.id, id: deploymentId, spec: '{"provider":"bwrap"}' });
    const newRun = async () => {
      const workspace = await meta.workspaces.create({ tenantId: tenant.id, name: `bench-${randomUUID()}` });
      return meta.runs.create({ tenantId: tenant.id, workspaceId: workspace.id, channel: null, deploymentId, bindings: { task: 'bench' } });
    };
    // Seeding (not timed): a local sandbox holding the files saves them into the collection.
    const seed = await local.create();
    made.push({ provider: local, id: seed.id });
    fs.cpSync(source, path.join(seed.agentHome, 'task'), { recursive: true });
    const seedCtx: RunSandboxContext = { tenant, run: await newRun(), sandbox: seed, epoch: 0 };
    const seeding = syncOver(agentRoute);
    await seeding.attach(seedCtx, 'cold');
    await seeding.save(seedCtx, 'turn_end');
    const tarTool = tarZstdTool();
    await tarTool.preflight();
    for (let run = 0; run < runs; run += 1) {
      const repo = await tarTool.open(fs.mkdtempSync(path.join(tmp, 'tar-')), source);
      tar.archive.push((await repo.checkpoint(source)).ms);
      const extract = repo.restore;
      if (extract === undefined) throw new Error('tar|zstd has no restore');
      const into = path.join(tmp, `tar-restore-${run}`);
      tar.extract.push((await extract(into)).ms);
      fs.rmSync(into, { recursive: true, force: true });
      for (const route of routes) {
        const figures = results.get(route.id) as Figures;
        const sandbox = await bwrap.create();
        made.push({ provider: bwrap, id: sandbox.id });
        const ctx: RunSandboxContext = { tenant, run: await newRun(), sandbox, epoch: 0 };
        figures.hydrate.push(await timeMs(() => route.sync.attach(ctx, 'cold')));
        // The first save after a hydration records the real tree; the second is the no-change one.
        await route.sync.save(ctx, 'periodic');
        figures.noChange.push(await timeMs(() => route.sync.save(ctx, 'periodic')));
        const edit = paths.slice(run * CHANGED_FILES, (run + 1) * CHANGED_FILES).map((p) => `task/${p}`);
        const result = await sandbox.run(['sh', '-c', 'for f in "$@"; do echo changed >> "$f"; done', 'edit', ...edit], {
          cwd: sandbox.agentHome,
        });
        if (result.code !== 0) throw new Error(`editing failed: ${result.stderr.toString()}`);
        figures.changed.push(await timeMs(() => route.sync.save(ctx, 'periodic')));
        const last = (xs: number[]) => (xs.at(-1) as number).toFixed(0);
        process.stderr.write(
          `[folder-sync] run ${run + 1} ${route.id}: hydrate ${last(figures.hydrate)} ms, no-change ${last(figures.noChange)} ms, ${CHANGED_FILES} changed ${last(figures.changed)} ms\n`,
        );
        await bwrap.destroy(sandbox.id);
        agentRoute.forget(sandbox.provider, sandbox.id);
      }
    }
    if (json) {
      process.stdout.write(
        `${JSON.stringify({ bench: 'folder-sync', files: FILES, bytes: FILES * FILE_BYTES, runs, results: Object.fromEntries(results), tar }, null, 2)}\n`,
      );
      return;
    }
    const m = median;
    const ratio = (x: number[], y: number[]) => (m(x) / m(y)).toFixed(2);
    printTable(
      `work-folder sync, ${FILES} files / ${((FILES * FILE_BYTES) / 1e6).toFixed(0)} MB, medians of ${runs} (ratios to tar | zstd: higher is slower)`,
      ['route', 'hydrate ms', '/untar', 'no-change save ms', '/tar', `${CHANGED_FILES} changed ms`, '/tar'],
      [
        ['tar | zstd', `${m(tar.extract).toFixed(0)} (untar)`, '', `${m(tar.archive).toFixed(0)} (tar)`, '', '', ''],
        ...routes.map((r) => {
          const f = results.get(r.id) as Figures;
          return [
            r.label,
            m(f.hydrate).toFixed(0),
            ratio(f.hydrate, tar.extract),
            m(f.noChange).toFixed(0),
            ratio(f.noChange, tar.archive),
            m(f.changed).toFixed(0),
            ratio(f.changed, tar.archive),
          ];
        }),
      ],
    );
  } finally {
    await pool.close();
    for (const s of made) await s.provider.destroy(s.id).catch(() => undefined);
    await workers.close();
    await meta.close();
    await blobs.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
