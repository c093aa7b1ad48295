import type { Sha256Hex } from '../../../core/hash.js';
import type { RecordedFile } from '../../../snapshot/checkpoint/untrusted-source.js';
import type { ScannedDir, ScanResult } from '../../../workspace-fs/scan.js';

/** Workspace checkouts one agent connection keeps a held scan for. */
export const HELD_SCANS_MAX = 8;

/**
 * What the host keeps of the last committed checkpoint it made through one agent process, for
 * one workspace checked out at one root: the scan (as the host checked it), the ids it
 * committed for its files, and the tree id it built for each directory. All of it is the
 * host's own work for this workspace; the agent names only which scan it was (`scanId`).
 */
export interface HeldScan {
  /** The agent's id of the scan, the base of its next delta. */
  readonly scanId: string;
  /** Root, excludes, limits and cache key of the scan request: a delta is asked only for the same. */
  readonly requestKey: string;
  readonly scan: ScanResult;
  /** The checkpoint committed from this scan: a delta is asked only while it is the head. */
  readonly base: string;
  /**
   * Size and content ids committed for the scan's files, by path: exactly what the host
   * recorded for `base` (registered as that checkpoint's files in `BaseFiles`). The next
   * commit through this connection moves it forward in place, changing only what changed.
   */
  readonly record: Map<string, RecordedFile>;
  /** Tree id of every directory of the scan, by directory object. */
  readonly trees: ReadonlyMap<ScannedDir, Sha256Hex>;
}

/**
 * The held scans of one agent connection, by stat-cache key (workspace and root). It lives
 * and dies with the connection: a new agent process starts with none, so its first scan is
 * a full one. Bounded by {@link HELD_SCANS_MAX}, least recently stored dropped first.
 */
export class HeldScans {
  private readonly held = new Map<string, HeldScan>();

  /** The held scan of `cacheKey`, if any. */
  get(cacheKey: string): HeldScan | undefined {
    return this.held.get(cacheKey);
  }

  /** Keeps `scan` as the held scan of `cacheKey`, replacing the one before. */
  set(cacheKey: string, scan: HeldScan): void {
    this.held.delete(cacheKey);
    this.held.set(cacheKey, scan);
    while (this.held.size > HELD_SCANS_MAX) this.held.delete(this.held.keys().next().value as string);
  }

  /** Forgets the held scan of `cacheKey` (a checkpoint through it failed to commit, or its state is unknown). */
  drop(cacheKey: string): void {
    this.held.delete(cacheKey);
  }
}
