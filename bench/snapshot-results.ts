/** What the snapshot benchmark records: raw runs per workload, operation and tool, and their medians. */
import type { FloorResult } from './floor.js';
import type { ToolId } from './snapshot-tool.js';
import { median } from './stats.js';
import type { RenameDir } from './tree-facts.js';
import type { WorkspaceManifest } from './workspace-gen.js';

/**
 * The measured operations. `store` is the store size after the checkpoints of a run. The warm
 * ones are Holdfast's `restore --replace` onto its own previous restore: `warmRestore` of the
 * unchanged head; `renameCheckpoint` / `renameRestore` after a 1,000-file directory was renamed;
 * `editCheckpoint` / `editRestore` after a 4 KiB edit inside the big file.
 */
export type OpId =
  | 'full'
  | 'noChange'
  | 'changed10'
  | 'restore'
  | 'store'
  | 'warmRestore'
  | 'renameCheckpoint'
  | 'renameRestore'
  | 'editCheckpoint'
  | 'editRestore';

/** One tool's result for one operation in one run; which fields are set depends on the operation. */
export interface RunRecord {
  readonly run: number;
  readonly ms?: number;
  readonly peakRssKiB?: number;
  readonly blobWrites?: number;
  readonly s3WriteRequests?: number;
  readonly diskBytes?: number;
  readonly apparentBytes?: number;
  /** What the tool said it checkpointed (Holdfast only). */
  readonly files?: number;
  readonly bytes?: number;
  readonly excluded?: readonly string[];
  /** Holdfast restores: raw bytes read from the object store, files reused from the old target. */
  readonly bytesFetched?: number;
  readonly filesReused?: number;
  /** Set when a restore did not reproduce the workspace. */
  readonly verifyError?: string;
}

/** Numeric fields of {@link RunRecord} that have medians. */
export type MetricField =
  | 'ms'
  | 'peakRssKiB'
  | 'blobWrites'
  | 's3WriteRequests'
  | 'diskBytes'
  | 'apparentBytes'
  | 'bytesFetched'
  | 'filesReused';

/** Every {@link MetricField}, for the JSON medians. */
export const METRIC_FIELDS: readonly MetricField[] = [
  'ms',
  'peakRssKiB',
  'blobWrites',
  's3WriteRequests',
  'diskBytes',
  'apparentBytes',
  'bytesFetched',
  'filesReused',
];

/** The manifest as reported (the editable-file list is reduced to its length). */
export type ManifestSummary = Omit<WorkspaceManifest, 'editable'> & { readonly editableFiles: number };

/** Everything measured on one workload. */
export interface WorkloadResult {
  readonly manifest: ManifestSummary;
  /** Walk / read / hash / compress cost of the tree on this machine (measured once, before the runs). */
  readonly floor?: FloorResult;
  /** The directory the rename measurement moves, when the workload has one. */
  readonly renameDir?: RenameDir;
  readonly samples: Partial<Record<OpId, Partial<Record<ToolId, RunRecord[]>>>>;
}

/** Appends `record` to the samples of `op` / `tool`. */
export function addSample(result: WorkloadResult, op: OpId, tool: ToolId, record: RunRecord): void {
  const byTool = result.samples[op] ?? {};
  result.samples[op] = byTool;
  const runs = byTool[tool] ?? [];
  byTool[tool] = runs;
  runs.push(record);
}

/** The runs of `op` / `tool`, empty when it was not measured. */
export function runsOf(result: WorkloadResult | undefined, op: OpId, tool: ToolId): readonly RunRecord[] {
  return result?.samples[op]?.[tool] ?? [];
}

/** Median of `field` over the runs of `op` / `tool`; undefined when no run has the field. */
export function medianOf(result: WorkloadResult | undefined, op: OpId, tool: ToolId, field: MetricField): number | undefined {
  const values = runsOf(result, op, tool)
    .map((r) => r[field])
    .filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : median(values);
}

/** Largest `field` over the runs of `op` / `tool`. */
export function maxOf(result: WorkloadResult | undefined, op: OpId, tool: ToolId, field: MetricField): number | undefined {
  const values = runsOf(result, op, tool)
    .map((r) => r[field])
    .filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : Math.max(...values);
}

/** Medians of every field of every measured op / tool, for the JSON output. */
export function allMedians(result: WorkloadResult): Record<string, Record<string, Partial<Record<MetricField, number>>>> {
  const out: Record<string, Record<string, Partial<Record<MetricField, number>>>> = {};
  for (const [op, byTool] of Object.entries(result.samples)) {
    const opOut: Record<string, Partial<Record<MetricField, number>>> = {};
    for (const tool of Object.keys(byTool ?? {}) as ToolId[]) {
      const medians: Partial<Record<MetricField, number>> = {};
      for (const field of METRIC_FIELDS) {
        const value = medianOf(result, op as OpId, tool, field);
        if (value !== undefined) medians[field] = value;
      }
      opOut[tool] = medians;
    }
    out[op] = opOut;
  }
  return out;
}
