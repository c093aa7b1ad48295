/** What the snapshot benchmark records: raw runs per workload, operation and tool, and their medians. */
import type { ToolId } from './snapshot-tool.js';
import { median } from './stats.js';
import type { WorkspaceManifest } from './workspace-gen.js';

/** The measured operations. `store` is the store size after the checkpoints of a run. */
export type OpId = 'full' | 'noChange' | 'changed10' | 'restore' | 'store';

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
  /** Set when a restore did not reproduce the workspace. */
  readonly verifyError?: string;
}

/** Numeric fields of {@link RunRecord} that have medians. */
export type MetricField = 'ms' | 'peakRssKiB' | 'blobWrites' | 's3WriteRequests' | 'diskBytes' | 'apparentBytes';

/** The manifest as reported (the editable-file list is reduced to its length). */
export type ManifestSummary = Omit<WorkspaceManifest, 'editable'> & { readonly editableFiles: number };

/** Everything measured on one workload. */
export interface WorkloadResult {
  readonly manifest: ManifestSummary;
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
  const fields: MetricField[] = ['ms', 'peakRssKiB', 'blobWrites', 's3WriteRequests', 'diskBytes', 'apparentBytes'];
  const out: Record<string, Record<string, Partial<Record<MetricField, number>>>> = {};
  for (const [op, byTool] of Object.entries(result.samples)) {
    const opOut: Record<string, Partial<Record<MetricField, number>>> = {};
    for (const tool of Object.keys(byTool ?? {}) as ToolId[]) {
      const medians: Partial<Record<MetricField, number>> = {};
      for (const field of fields) {
        const value = medianOf(result, op as OpId, tool, field);
        if (value !== undefined) medians[field] = value;
      }
      opOut[tool] = medians;
    }
    out[op] = opOut;
  }
  return out;
}
