import { NotFoundError } from '../../errors.js';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import { checkpointLimits, flattenTree } from '../tree-walk.js';
import type { FileIds } from './tree-builder.js';

/** A file of a checkpoint as the host recorded it: its size and content ids. */
export interface RecordedFile extends FileIds {
  readonly size: number;
}

/** Files remembered across checkpoints, summed over every checkpoint kept; older ones are dropped first. */
export const BASE_FILES_MAX_PATHS = 1_000_000;
/** Checkpoints remembered at once. */
export const BASE_FILES_MAX_CHECKPOINTS = 32;

/**
 * What the host itself recorded for each file of a checkpoint: the only object ids an
 * untrusted source (an in-sandbox agent) may have reused instead of sending the bytes
 * (DESIGN section 14). A checkpoint's content never changes, so the files of recent base
 * checkpoints are kept in memory (bounded by {@link BASE_FILES_MAX_PATHS} and
 * {@link BASE_FILES_MAX_CHECKPOINTS}, least recently used dropped first) and read from the
 * checkpoint's trees, verified, otherwise. Callers pass only checkpoints of the workspace
 * being checkpointed (its head), so ids never cross a workspace or a tenant.
 */
export class BaseFiles {
  private readonly kept = new Map<string, ReadonlyMap<string, RecordedFile>>();
  private paths = 0;

  constructor(
    private readonly reader: ObjectReader,
    private readonly meta: Pick<MetadataStore, 'checkpoints'>,
  ) {}

  /**
   * The files of checkpoint `checkpointId` by path. It must be a ready checkpoint of workspace
   * `workspaceId` (`NOT_FOUND` otherwise), so a caller cannot borrow another workspace's ids.
   * Its trees are walked within the limits a restore of it applies.
   */
  async of(checkpointId: string, workspaceId: string): Promise<ReadonlyMap<string, RecordedFile>> {
    const checkpoint = await this.meta.checkpoints.find(checkpointId);
    if (checkpoint?.workspaceId !== workspaceId || checkpoint.status !== 'ready' || checkpoint.rootTree === null) {
      throw new NotFoundError(`checkpoint ${checkpointId} is not a ready checkpoint of workspace ${workspaceId}`, {
        data: { checkpoint: checkpointId, workspaceId },
      });
    }
    const hit = this.kept.get(checkpointId);
    if (hit !== undefined) {
      this.kept.delete(checkpointId);
      this.kept.set(checkpointId, hit);
      return hit;
    }
    const files = new Map<string, RecordedFile>();
    for (const f of (await flattenTree(this.reader, checkpoint.rootTree, undefined, checkpointLimits(checkpoint))).files) {
      files.set(f.path, { size: f.size, sha256: f.sha256, chunks: f.chunks });
    }
    this.remember(checkpointId, files);
    return files;
  }

  /** Drops what is kept of a checkpoint (its files are read from its trees if asked for again). */
  forget(checkpointId: string): void {
    const old = this.kept.get(checkpointId);
    if (old === undefined) return;
    this.kept.delete(checkpointId);
    this.paths -= old.size;
  }

  /** Records the files of a checkpoint this process just committed (what it hashed or verified itself). */
  remember(checkpointId: string, files: ReadonlyMap<string, RecordedFile>): void {
    if (files.size > BASE_FILES_MAX_PATHS) return;
    const old = this.kept.get(checkpointId);
    if (old !== undefined) {
      this.kept.delete(checkpointId);
      this.paths -= old.size;
    }
    this.kept.set(checkpointId, files);
    this.paths += files.size;
    for (const [id, f] of this.kept) {
      if (this.paths <= BASE_FILES_MAX_PATHS && this.kept.size <= BASE_FILES_MAX_CHECKPOINTS) break;
      this.kept.delete(id);
      this.paths -= f.size;
    }
  }
}
