/** The shape every tool in the snapshot benchmark (Holdfast and the references) is driven through. */
import type { Measured } from './process-runner.js';

/** Stable tool ids; `--only` and the JSON output use them. */
export type ToolId = 'holdfast' | 'holdfast-s3' | 'restic' | 'git' | 'tar';

/** All tool ids, in table column order. */
export const TOOL_IDS: readonly ToolId[] = ['holdfast', 'holdfast-s3', 'restic', 'git', 'tar'];

/** A measured checkpoint, with what the tool reported about it when it reports anything. */
export interface CheckpointMeasured extends Measured {
  /** Holdfast: `stats.blobWrites` (or `stats.packsWritten` when the former is absent). */
  readonly blobWrites?: number;
  /** Holdfast S3 variant: PUT and POST requests the S3 server received during the command. */
  readonly s3WriteRequests?: number;
  /** Holdfast: `stats.files` / `stats.bytes`, to catch files a tool silently skipped. */
  readonly files?: number;
  readonly bytes?: number;
  /** Holdfast: `stats.excluded`, paths left out by its default rules, as `path (reason)`. */
  readonly excluded?: readonly string[];
  /** Holdfast: the bare paths of `excluded`, which restore checks then leave out. */
  readonly excludedPaths?: readonly string[];
}

/** A measured restore, with what the tool reported about it when it reports anything. */
export interface RestoreMeasured extends Measured {
  /** Holdfast: the receipt's `bytesFetched` (raw bytes read from the object store). */
  readonly bytesFetched?: number;
  /** Holdfast: the receipt's `filesReused` (files taken from the previous copy at the target). */
  readonly filesReused?: number;
}

/** One fresh repository (store) of a tool, holding the checkpoints of one workspace. */
export interface ToolRepo {
  /** Checkpoints `source`; later calls are incremental when the tool can be. */
  checkpoint(source: string): Promise<CheckpointMeasured>;
  /** Restores the latest checkpoint into `target`, which does not exist yet. Absent: not measured. */
  readonly restore?: (target: string) => Promise<RestoreMeasured>;
  /**
   * Restores the latest checkpoint onto `target`, which holds an earlier restore of this
   * repository, replacing it (Holdfast's `restore --replace`). Absent: the tool has no warm restore.
   */
  readonly warmRestore?: (target: string) => Promise<RestoreMeasured>;
  /** The directory whose size is the store's size. Absent: the store is not on local disk. */
  readonly storeDir?: string;
}

/** A tool under test. */
export interface SnapshotTool {
  readonly id: ToolId;
  /** Column header. */
  readonly label: string;
  /** False when every checkpoint is a full copy again (tar), so the report says so. */
  readonly incremental: boolean;
  /** True when the tool never stores a top-level `.git` (git itself), so restore checks leave it out. */
  readonly skipsGitDir?: boolean;
  /** Throws, saying what to install or build, when the tool cannot run here. Returns its version. */
  preflight(): Promise<string>;
  /** Creates an empty repository under the existing empty directory `dir` (not timed). */
  open(dir: string, workspace: string): Promise<ToolRepo>;
  /** Stops what `preflight` started. Idempotent. */
  close(): Promise<void>;
}
