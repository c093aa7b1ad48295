import type { Checkpoint } from '../metadata/metadata-store.js';
import type { Lookup } from '../snapshot/inspect/browse.js';
import type { Snapshots } from '../snapshot/snapshots.js';
import type { Runs } from './runs.js';

/**
 * Checkpoints as a platform browses them, within one tenant: by run, by id, a directory
 * listing or a file's bytes from inside one. Another tenant's ids answer `NOT_FOUND`.
 */
export class Checkpoints {
  constructor(
    private readonly runs: Runs,
    private readonly snapshots: Snapshots,
  ) {}

  /** A run's checkpoints, newest first (failed ones with their errors). */
  list(runId: string, limit?: number): Promise<Checkpoint[]> {
    return this.runs.checkpoints(runId, limit);
  }

  /** One checkpoint of this tenant, in any status. */
  get(id: string): Promise<Checkpoint> {
    return this.snapshots.getCheckpoint(id);
  }

  /** What `path` names inside a ready checkpoint: a directory listing or one entry. */
  ls(id: string, path = ''): Promise<Lookup> {
    return this.snapshots.ls(id, path);
  }

  /** A file's bytes from a ready checkpoint, streamed and verified chunk by chunk. */
  cat(id: string, path: string): AsyncGenerator<Uint8Array> {
    return this.snapshots.cat(id, path);
  }
}
