/**
 * The snapshot benchmark's goals (issue 26 item 3 on every workload: full checkpoint, no-change
 * against restic and git, peak RSS on the 100k-file workloads, store size; plus issue 10's and
 * the earlier targets on workload A): each
 * evaluated per workload as MET or MISS with by how much, and beside each the floor that bounds
 * it on this machine (floor.ts). Then the floor table itself.
 */
import os from 'node:os';
import { type FloorResult, mbPerSecond, parallelFloorMs, serialFloorMs } from './floor.js';
import { formatBytes, formatValue } from './snapshot-report.js';
import { type MetricField, maxOf, medianOf, type OpId, type WorkloadResult } from './snapshot-results.js';
import type { ToolId } from './snapshot-tool.js';
import { printTable } from './stats.js';
import { WORKLOADS } from './workloads.js';
import type { WorkloadName } from './workspace-gen.js';

/** Peak RSS allowed for a full checkpoint of about 100k files. */
const RSS_LIMIT_MB = 200;
/** Workloads with about 100k files, where the RSS goal applies. */
const RSS_WORKLOADS: readonly WorkloadName[] = ['B', 'K', 'T'];
/** Most writes to the blob store per incremental checkpoint (S3 variant, workload A). */
const BLOB_WRITES_LIMIT = 4;

/** One goal on one workload and how the measurement compares with it. */
export interface GoalResult {
  readonly goal: string;
  readonly workload: WorkloadName;
  readonly measured: string;
  readonly status: 'MET' | 'MISS' | 'n/a' | 'info';
  /** Headroom when met, excess when missed. */
  readonly margin: string;
  /** What bounds it on this machine, when known. */
  readonly floor: string;
}

type Results = Partial<Record<WorkloadName, WorkloadResult>>;

const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** `hf <= limit x other` on `op` / `field`; `floorMs` is the least time the operation can take. */
function ratioGoal(
  w: WorkloadName,
  r: WorkloadResult,
  goal: string,
  op: OpId,
  field: MetricField,
  other: ToolId | 'hf-cold',
  limit: number,
  floor: string,
): GoalResult {
  const hf = medianOf(r, op, 'holdfast', field);
  const ref = other === 'hf-cold' ? medianOf(r, 'restore', 'holdfast', field) : medianOf(r, op, other, field);
  if (hf === undefined || ref === undefined || ref === 0)
    return { goal, workload: w, measured: 'not measured', status: 'n/a', margin: '', floor };
  const x = hf / ref;
  const budget = ref * limit;
  const unit = (v: number) => (field === 'ms' ? sec(v) : `${formatValue(field, v)} MB`);
  const measured = `${x.toFixed(2)}x (${unit(hf)} vs ${unit(ref)})`;
  const met = x <= limit;
  const margin = met
    ? `${((1 - hf / budget) * 100).toFixed(0)}% under the ${unit(budget)} budget`
    : `${(hf / budget).toFixed(2)}x the budget: ${unit(hf - budget)} over ${unit(budget)}`;
  return { goal, workload: w, measured, status: met ? 'MET' : 'MISS', margin, floor };
}

function fetchedGoal(w: WorkloadName, r: WorkloadResult, goal: string, op: OpId, zero: boolean): GoalResult {
  const fetched = maxOf(r, op, 'holdfast', 'bytesFetched');
  if (fetched === undefined) return { goal, workload: w, measured: 'not measured', status: 'n/a', margin: '', floor: '' };
  const measured = `${formatBytes(fetched)} fetched (worst run)`;
  if (!zero) return { goal, workload: w, measured, status: 'info', margin: '', floor: '4 KiB changed' };
  return {
    goal,
    workload: w,
    measured,
    status: fetched === 0 ? 'MET' : 'MISS',
    margin: fetched === 0 ? '' : `${formatBytes(fetched)} over 0`,
    floor: '0 B',
  };
}

function rssGoal(w: WorkloadName, r: WorkloadResult): GoalResult {
  const goal = `peak RSS of full checkpoint <= ${RSS_LIMIT_MB} MB (${r.manifest.files.toLocaleString('en-US')} files)`;
  const rss = medianOf(r, 'full', 'holdfast', 'peakRssKiB');
  if (rss === undefined) return { goal, workload: w, measured: 'not measured', status: 'n/a', margin: '', floor: '' };
  const mb = (rss * 1024) / 1e6;
  const met = mb <= RSS_LIMIT_MB;
  const margin = met ? `${(RSS_LIMIT_MB - mb).toFixed(0)} MB to spare` : `${(mb - RSS_LIMIT_MB).toFixed(0)} MB over`;
  return { goal, workload: w, measured: `${mb.toFixed(1)} MB`, status: met ? 'MET' : 'MISS', margin, floor: '' };
}

function blobWritesGoal(r: WorkloadResult): GoalResult {
  const goal = `<= ${BLOB_WRITES_LIMIT} blob writes per incremental checkpoint (S3, worst run)`;
  const worst = (op: OpId) => maxOf(r, op, 'holdfast-s3', 'blobWrites') ?? maxOf(r, op, 'holdfast-s3', 's3WriteRequests');
  const [noChange, changed] = [worst('noChange'), worst('changed10')];
  if (noChange === undefined || changed === undefined)
    return { goal, workload: 'A', measured: 'not measured', status: 'n/a', margin: '', floor: '' };
  const seen = (op: OpId) => formatValue('s3WriteRequests', maxOf(r, op, 'holdfast-s3', 's3WriteRequests'));
  const measured = `no-change ${noChange}, 10 changed ${changed} (PUT/POST seen ${seen('noChange')}, ${seen('changed10')})`;
  const most = Math.max(noChange, changed);
  return {
    goal,
    workload: 'A',
    measured,
    status: most <= BLOB_WRITES_LIMIT ? 'MET' : 'MISS',
    margin: `${most} of ${BLOB_WRITES_LIMIT}`,
    floor: '',
  };
}

/** Floor texts for the goals: full checkpoint, walk-only operations, store. */
function floors(f: FloorResult | undefined): { full: string; walk: string; store: string } {
  if (f === undefined) return { full: '', walk: '', store: '' };
  const cores = os.cpus().length;
  return {
    full: `${sec(serialFloorMs(f))} on 1 core, ${sec(parallelFloorMs(f, cores))} on ${cores}`,
    walk: `walk ${sec(f.walkMs)}`,
    store: `zstd -3 of all bytes ${(f.zstdBytes / 1e6).toFixed(1)} MB`,
  };
}

/** Every goal on every measured workload. */
export function evaluateGoals(results: Results): GoalResult[] {
  const out: GoalResult[] = [];
  for (const [w, r] of Object.entries(results) as Array<[WorkloadName, WorkloadResult]>) {
    const spec = WORKLOADS[w];
    const f = floors(r.floor);
    out.push(
      ratioGoal(w, r, 'store <= 1.0x restic', 'store', 'diskBytes', 'restic', 1.0, f.store),
      ratioGoal(w, r, 'full checkpoint <= 0.6x restic', 'full', 'ms', 'restic', 0.6, f.full),
      ratioGoal(w, r, 'no-change checkpoint <= 0.25x restic', 'noChange', 'ms', 'restic', 0.25, f.walk),
      ratioGoal(w, r, 'no-change checkpoint <= 2x git', 'noChange', 'ms', 'git', 2, f.walk),
    );
    if (spec.restore) out.push(ratioGoal(w, r, 'warm restore <= 0.2x cold restore', 'warmRestore', 'ms', 'hf-cold', 0.2, f.walk));
    if (r.renameDir !== undefined) {
      const files = r.renameDir.files.toLocaleString('en-US');
      out.push(fetchedGoal(w, r, `rename ${files}-file dir, warm restore fetches nothing`, 'renameRestore', true));
    }
    if (spec.restore && r.manifest.bigFile !== undefined) {
      out.push(fetchedGoal(w, r, '4 KiB edit in the big file, warm restore: bytesFetched', 'editRestore', false));
    }
    if (RSS_WORKLOADS.includes(w)) out.push(rssGoal(w, r));
    if (w === 'A') {
      out.push(
        ratioGoal(w, r, '10 files changed <= 0.4x restic', 'changed10', 'ms', 'restic', 0.4, ''),
        ratioGoal(w, r, 'cold restore <= 1.0x restic', 'restore', 'ms', 'restic', 1.0, ''),
        blobWritesGoal(r),
      );
    }
  }
  return out;
}

/** Prints the goals table. */
export function printGoals(goals: readonly GoalResult[]): void {
  printTable(
    'Goals (Holdfast, medians unless noted; floor = least time or size this machine allows, see the floor table)',
    ['workload: goal', 'measured', 'result', 'by how much', 'floor'],
    goals.map((g) => [`${g.workload}: ${g.goal}`, g.measured, g.status, g.margin, g.floor]),
  );
}

/** Prints each workload's floor: MB/s of each stage and the least time a full checkpoint can take. */
export function printFloors(results: Results): void {
  const cores = os.cpus().length;
  const rows: string[][] = [];
  for (const [w, r] of Object.entries(results) as Array<[WorkloadName, WorkloadResult]>) {
    const f = r.floor;
    if (f === undefined) continue;
    rows.push([
      w,
      f.files.toLocaleString('en-US'),
      (f.bytes / 1e6).toFixed(1),
      sec(f.walkMs),
      mbPerSecond(f.bytes, f.readMs).toFixed(0),
      mbPerSecond(f.bytes, f.sha256Ms).toFixed(0),
      `${mbPerSecond(f.bytes, f.zstdMs).toFixed(0)} (${(f.bytes / Math.max(1, f.zstdBytes)).toFixed(2)}:1)`,
      sec(serialFloorMs(f)),
      sec(parallelFloorMs(f, cores)),
      f.duplicateFiles.toLocaleString('en-US'),
    ]);
  }
  printTable(
    `Floor: one process, warm cache, walk + read + SHA-256 per file + zstd -3 over 1 MiB batches (MB/s = 10^6 B/s); ${cores} CPUs`,
    [
      'wl',
      'files',
      'MB',
      'walk',
      'read MB/s',
      'sha256 MB/s',
      'zstd-3 MB/s (ratio)',
      'min full, 1 core',
      `min full, ${cores} cores`,
      'dup files',
    ],
    rows,
  );
}
