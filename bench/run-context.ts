/** What one run of a workload shares between its measurement steps, and how steps record results. */
import type { RunRecord, WorkloadResult } from './snapshot-results.js';
import type { CheckpointMeasured, RestoreMeasured, SnapshotTool, ToolRepo } from './snapshot-tool.js';
import type { RenameDir } from './tree-facts.js';
import type { WorkspaceManifest } from './workspace-gen.js';

/** A repository opened for one run. */
export interface OpenRepo {
  readonly tool: SnapshotTool;
  readonly repo: ToolRepo;
  readonly dir: string;
}

/** One run's shared state. */
export interface RunContext {
  readonly manifest: WorkspaceManifest;
  readonly result: WorkloadResult;
  readonly repos: readonly OpenRepo[];
  readonly run: number;
  readonly tag: string;
  readonly renameDir: RenameDir | undefined;
  /** Paths each repository's latest checkpoint reported leaving out, so its restore check leaves them out too. */
  readonly leftOut: Map<SnapshotTool['id'], readonly string[]>;
}

/**
 * What the restore check of `tool` leaves out: what its latest checkpoint reported excluding
 * (Holdfast withholds files whose content looks like a credential) and, for git, the `.git`.
 */
export function uncheckedPaths(ctx: RunContext, tool: SnapshotTool): string[] {
  return [...(tool.skipsGitDir === true ? ['.git'] : []), ...(ctx.leftOut.get(tool.id) ?? [])];
}

/** Records a checkpoint's exclusions for {@link uncheckedPaths}. */
export function noteLeftOut(ctx: RunContext, tool: SnapshotTool, m: CheckpointMeasured): void {
  if (m.excludedPaths !== undefined) ctx.leftOut.set(tool.id, m.excludedPaths);
}

/** Progress goes to stderr, so `--json` output on stdout stays clean. */
export function log(message: string): void {
  process.stderr.write(`[snapshot] ${message}\n`);
}

/** The record of one restore, with Holdfast's receipt figures when present. */
export function restoreRecord(run: number, m: RestoreMeasured, verifyError: string | undefined): RunRecord {
  return {
    run,
    ms: m.ms,
    peakRssKiB: m.peakRssKiB,
    ...(m.bytesFetched === undefined ? {} : { bytesFetched: m.bytesFetched }),
    ...(m.filesReused === undefined ? {} : { filesReused: m.filesReused }),
    ...(verifyError === undefined ? {} : { verifyError }),
  };
}

/** The record of one checkpoint, with what the tool reported about it. */
export function checkpointRecord(run: number, m: CheckpointMeasured): RunRecord {
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
