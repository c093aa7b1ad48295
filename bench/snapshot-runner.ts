/**
 * Drives the snapshot benchmark's measurements. Page caches are never dropped (that needs root);
 * instead every operation is run by each tool in turn within a run (tool A run 1, tool B run 1, …)
 * with the order rotated from run to run, so all tools meet comparable, warm cache state, and
 * `sync` runs before each measurement so nobody is charged for another tool's writeback.
 *
 * Nothing is deleted while measuring: repositories, restored trees and workspaces stay until the
 * caller removes the base directory at the very end. ext4's inode allocator skips inodes deleted
 * in the last 60-360 s (perf on the benchmark machine: `recently_deleted`, `find_inode_bit` and
 * inode-table lookups took most of a restore's time right after a cleanup), so deleting one
 * tool's 20k restored files would slow the next tool's restore several times over.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { compareTrees, storeSize } from './dir-stats.js';
import { measureFloor } from './floor.js';
import { flushDirtyPages } from './process-runner.js';
import { checkpointRecord, log, noteLeftOut, type OpenRepo, type RunContext, restoreRecord, uncheckedPaths } from './run-context.js';
import { formatValue } from './snapshot-report.js';
import { addSample, type OpId, type WorkloadResult } from './snapshot-results.js';
import type { SnapshotTool } from './snapshot-tool.js';
import { pickRenameDir, treeFacts } from './tree-facts.js';
import { warmRestores } from './warm-restores.js';
import { WORKLOADS } from './workloads.js';
import { modifyFiles, type Scale, type WorkloadName } from './workspace-gen.js';

export { log } from './run-context.js';

/** Files changed before the third checkpoint of each run of workload A. */
const CHANGED_FILES = 10;
/** Unchanged files compared byte for byte after each restore, besides the changed and large ones. */
const VERIFY_SAMPLE_FILES = 10;

/** Files in the directory the rename measurement moves (the closest directory is taken). */
const RENAME_DIR_FILES = 1000;

/**
 * Disk space one run of each workload leaves behind at full scale (workspace, stores of every
 * tool, restored trees, with margin); small scale needs about a tenth.
 */
const FULL_RUN_BYTES: Readonly<Record<WorkloadName, number>> = { A: 2.5e9, B: 1e9, N: 0.8e9, K: 7e9, M: 1.5e9, T: 1.5e9 };
const FULL_RUN_INODES: Readonly<Record<WorkloadName, number>> = { A: 150_000, B: 150_000, N: 40_000, K: 700_000, M: 2_000, T: 150_000 };

/** What {@link benchWorkload} needs to know. */
export interface WorkloadPlan {
  readonly name: WorkloadName;
  /** Directory that holds the workspace and every tool's repositories; must exist. */
  readonly base: string;
  readonly scale: Scale;
  readonly seed: number;
  readonly runs: number;
  readonly tools: readonly SnapshotTool[];
  /** Where the npm trees are cached. */
  readonly treeCache: string;
}

/**
 * Builds the workload (not timed), measures its floor once, then measures it `runs` times. Every
 * workload: full and no-change checkpoints and store size; then, as its spec says, 10 changed
 * files and a third checkpoint, a cold restore by every tool, and Holdfast's warm restores. The
 * S3 variant of Holdfast runs on A only: it is there to count blob writes per incremental checkpoint.
 */
export async function benchWorkload(plan: WorkloadPlan): Promise<WorkloadResult> {
  const spec = WORKLOADS[plan.name];
  const root = path.join(plan.base, `workspace-${plan.name.toLowerCase()}`);
  log(`building workload ${plan.name} (${plan.scale}, seed ${plan.seed}) in ${root}`);
  const manifest = await spec.build({ root, seed: plan.seed, scale: plan.scale, treeCache: plan.treeCache, log });
  log(`measuring the floor of workload ${plan.name} (walk, read, SHA-256, zstd -3 in one process)`);
  const floor = measureFloor(root);
  const renameDir = spec.renameDir ? pickRenameDir(await treeFacts(root), RENAME_DIR_FILES) : undefined;
  const { editable, ...rest } = manifest;
  const duplicateFiles = spec.packages === undefined ? rest.duplicateFiles : floor.duplicateFiles;
  const result: WorkloadResult = {
    manifest: { ...rest, duplicateFiles, editableFiles: editable.length },
    floor,
    ...(renameDir === undefined ? {} : { renameDir }),
    samples: {},
  };
  const tools = spec.s3 ? plan.tools : plan.tools.filter((t) => t.id !== 'holdfast-s3');
  for (let run = 0; run < plan.runs; run += 1) {
    const repos: OpenRepo[] = [];
    for (const tool of rotate(tools, run)) {
      const dir = await fs.mkdtemp(path.join(plan.base, `${tool.id}-${manifest.name}-r${run}-`));
      repos.push({ tool, repo: await tool.open(dir, `bench-${manifest.name.toLowerCase()}`), dir });
    }
    await runOnce({ manifest, result, repos, run, tag: `${manifest.name} run ${run + 1}/${plan.runs}`, renameDir, leftOut: new Map() });
  }
  return result;
}

/**
 * Throws, before anything is built, when `dir` cannot hold what `runs` runs of `workloads` leave
 * behind (nothing is deleted until the end).
 */
export async function requireFreeSpace(dir: string, runs: number, scale: Scale, workloads: readonly WorkloadName[]): Promise<void> {
  const factor = (scale === 'full' ? 1 : 0.1) * runs;
  const needBytes = workloads.reduce((n, w) => n + FULL_RUN_BYTES[w], 0) * factor;
  const needInodes = workloads.reduce((n, w) => n + FULL_RUN_INODES[w], 0) * factor;
  const stats = await fs.statfs(dir);
  const bytes = stats.bavail * stats.bsize;
  if (bytes < needBytes || stats.ffree < needInodes) {
    throw new Error(
      `${dir} has ${(bytes / 1e9).toFixed(1)} GB and ${stats.ffree} inodes free; ${runs} run(s) of ${workloads.join(',')} at scale ${scale} ` +
        `need about ${(needBytes / 1e9).toFixed(1)} GB and ${Math.round(needInodes)} inodes (nothing is deleted until the end): ` +
        'pass --tmp on a larger disk, fewer --runs or fewer --workload',
    );
  }
}

async function runOnce(ctx: RunContext): Promise<void> {
  const spec = WORKLOADS[ctx.manifest.name];
  await checkpointAll(ctx, 'full');
  await checkpointAll(ctx, 'noChange');
  let changed: string[] = [];
  if (spec.changed10) {
    changed = await modifyFiles(ctx.manifest, ctx.run, CHANGED_FILES);
    await checkpointAll(ctx, 'changed10');
  }
  await measureStores(ctx);
  if (!spec.restore) return;
  await restoreAll(ctx, changed);
  await warmRestores(ctx);
}

async function checkpointAll(ctx: RunContext, op: OpId): Promise<void> {
  for (const { tool, repo } of ctx.repos) {
    await flushDirtyPages();
    const m = await repo.checkpoint(ctx.manifest.root);
    noteLeftOut(ctx, tool, m);
    addSample(ctx.result, op, tool.id, checkpointRecord(ctx.run, m));
    log(`${ctx.tag} ${op}: ${tool.label} ${formatValue('ms', m.ms)} s, ${formatValue('peakRssKiB', m.peakRssKiB)} MB RSS`);
  }
}

async function measureStores(ctx: RunContext): Promise<void> {
  for (const { tool, repo } of ctx.repos) {
    if (repo.storeDir === undefined) continue;
    const size = await storeSize(repo.storeDir);
    addSample(ctx.result, 'store', tool.id, { run: ctx.run, diskBytes: size.diskBytes, apparentBytes: size.apparentBytes });
  }
}

/** Restores into a fresh directory per tool and checks the result against the workspace. */
async function restoreAll(ctx: RunContext, changed: readonly string[]): Promise<void> {
  const { manifest } = ctx;
  const sample = [
    ...changed,
    ...manifest.editable.slice(-VERIFY_SAMPLE_FILES),
    ...manifest.largeBinaryBytes.map((_, i) => `data/blob-${i}.bin`),
    ...(manifest.bigFile === undefined ? [] : [manifest.bigFile]),
  ];
  for (const { tool, repo, dir } of ctx.repos) {
    if (repo.restore === undefined) continue;
    const target = path.join(dir, 'restored');
    await flushDirtyPages();
    const m = await repo.restore(target);
    const verifyError = await compareTrees(manifest.root, target, sample, uncheckedPaths(ctx, tool));
    addSample(ctx.result, 'restore', tool.id, restoreRecord(ctx.run, m, verifyError));
    log(
      `${ctx.tag} restore: ${tool.label} ${formatValue('ms', m.ms)} s${verifyError === undefined ? '' : `: CHECK FAILED, ${verifyError}`}`,
    );
  }
}

/** Tools in a different order each run, so none always goes first (or right after the same other). */
function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % Math.max(1, items.length);
  return [...items.slice(k), ...items.slice(0, k)];
}
