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
import { flushDirtyPages } from './process-runner.js';
import { formatValue } from './snapshot-report.js';
import { addSample, type OpId, type RunRecord, type WorkloadResult } from './snapshot-results.js';
import type { CheckpointMeasured, SnapshotTool, ToolRepo } from './snapshot-tool.js';
import { generateWorkloadA, generateWorkloadB, modifyFiles, type Scale, type WorkspaceManifest } from './workspace-gen.js';

/** Files changed before the third checkpoint of each run of workload A. */
const CHANGED_FILES = 10;
/** Unchanged files compared byte for byte after each restore, besides the changed and large ones. */
const VERIFY_SAMPLE_FILES = 10;

/** Disk space one run of both workloads leaves behind at full scale (stores + restored trees, with margin). */
const FULL_RUN_BYTES = 3.5e9;
const FULL_RUN_INODES = 300_000;

/** What {@link benchWorkload} needs to know. */
export interface WorkloadPlan {
  readonly name: 'A' | 'B';
  /** Directory that holds the workspace and every tool's repositories; must exist. */
  readonly base: string;
  readonly scale: Scale;
  readonly seed: number;
  readonly runs: number;
  readonly tools: readonly SnapshotTool[];
}

/** A repository opened for one run. */
interface OpenRepo {
  readonly tool: SnapshotTool;
  readonly repo: ToolRepo;
  readonly dir: string;
}

/** One run's shared state. */
interface RunContext {
  readonly manifest: WorkspaceManifest;
  readonly result: WorkloadResult;
  readonly repos: readonly OpenRepo[];
  readonly run: number;
  readonly tag: string;
}

/** Progress goes to stderr, so `--json` output on stdout stays clean. */
export function log(message: string): void {
  process.stderr.write(`[snapshot] ${message}\n`);
}

/**
 * Generates the workload (not timed), measures it `runs` times and deletes it. Workload A: full,
 * no-change and 10-changed checkpoints, store size, full restore. Workload B: full and no-change
 * checkpoints and store size. The S3 variant of Holdfast runs on A only: it is there to count blob
 * writes per incremental checkpoint.
 */
export async function benchWorkload(plan: WorkloadPlan): Promise<WorkloadResult> {
  const root = path.join(plan.base, `workspace-${plan.name.toLowerCase()}`);
  log(`generating workload ${plan.name} (${plan.scale}, seed ${plan.seed}) in ${root}`);
  const manifest = await (plan.name === 'A' ? generateWorkloadA : generateWorkloadB)(root, plan.seed, plan.scale);
  const { editable, ...rest } = manifest;
  const result: WorkloadResult = { manifest: { ...rest, editableFiles: editable.length }, samples: {} };
  const tools = plan.name === 'A' ? plan.tools : plan.tools.filter((t) => t.id !== 'holdfast-s3');
  for (let run = 0; run < plan.runs; run += 1) await runOnce(plan, manifest, result, tools, run);
  return result;
}

/** Throws, before anything is generated, when `dir` cannot hold what `runs` runs leave behind. */
export async function requireFreeSpace(dir: string, runs: number, scale: Scale): Promise<void> {
  const factor = (scale === 'full' ? 1 : 0.1) * runs;
  const stats = await fs.statfs(dir);
  const bytes = stats.bavail * stats.bsize;
  if (bytes < FULL_RUN_BYTES * factor || stats.ffree < FULL_RUN_INODES * factor) {
    throw new Error(
      `${dir} has ${(bytes / 1e9).toFixed(1)} GB and ${stats.ffree} inodes free; ${runs} run(s) at scale ${scale} need about ` +
        `${((FULL_RUN_BYTES * factor) / 1e9).toFixed(1)} GB and ${Math.round(FULL_RUN_INODES * factor)} inodes (nothing is ` +
        `deleted until the end): pass --tmp on a larger disk or fewer --runs`,
    );
  }
}

async function runOnce(
  plan: WorkloadPlan,
  manifest: WorkspaceManifest,
  result: WorkloadResult,
  tools: readonly SnapshotTool[],
  run: number,
) {
  const repos: OpenRepo[] = [];
  for (const tool of rotate(tools, run)) {
    const dir = await fs.mkdtemp(path.join(plan.base, `${tool.id}-${manifest.name}-r${run}-`));
    repos.push({ tool, repo: await tool.open(dir, `bench-${manifest.name.toLowerCase()}`), dir });
  }
  const ctx: RunContext = { manifest, result, repos, run, tag: `${manifest.name} run ${run + 1}/${plan.runs}` };
  await checkpointAll(ctx, 'full');
  await checkpointAll(ctx, 'noChange');
  if (manifest.name === 'B') {
    await measureStores(ctx);
    return;
  }
  const changed = await modifyFiles(manifest, run, CHANGED_FILES);
  await checkpointAll(ctx, 'changed10');
  await measureStores(ctx);
  await restoreAll(ctx, changed);
}

async function checkpointAll(ctx: RunContext, op: OpId): Promise<void> {
  for (const { tool, repo } of ctx.repos) {
    await flushDirtyPages();
    const m = await repo.checkpoint(ctx.manifest.root);
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
  ];
  for (const { tool, repo, dir } of ctx.repos) {
    if (repo.restore === undefined) continue;
    const target = path.join(dir, 'restored');
    await flushDirtyPages();
    const m = await repo.restore(target);
    const verifyError = await compareTrees(manifest.root, target, sample);
    const record: RunRecord = { run: ctx.run, ms: m.ms, peakRssKiB: m.peakRssKiB, ...(verifyError === undefined ? {} : { verifyError }) };
    addSample(ctx.result, 'restore', tool.id, record);
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

function checkpointRecord(run: number, m: CheckpointMeasured): RunRecord {
  return {
    run,
    ms: m.ms,
    peakRssKiB: m.peakRssKiB,
    ...(m.blobWrites === undefined ? {} : { blobWrites: m.blobWrites }),
    ...(m.s3WriteRequests === undefined ? {} : { s3WriteRequests: m.s3WriteRequests }),
    ...(m.files === undefined ? {} : { files: m.files }),
    ...(m.bytes === undefined ? {} : { bytes: m.bytes }),
    ...(m.excluded === undefined ? {} : { excluded: m.excluded }),
  };
}
