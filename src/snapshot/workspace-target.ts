import type { Checkpoint, Workspace } from '../metadata/metadata-store.js';
import type { ObjectReader } from '../objects/object-reader.js';
import type { PathedFile } from './restore/restore-files.js';
import type { FlatTree } from './tree-walk.js';

/** A directory of a flattened tree, with its path. */
export type FlatDir = FlatTree['dirs'][number];
/** A symlink of a flattened tree, with its path. */
export type FlatSymlink = FlatTree['symlinks'][number];

/** What one restore asks of a target: the checkpoint, already read, validated and held to its limits. */
export interface RestorePlan {
  readonly workspace: Workspace;
  readonly checkpoint: Checkpoint;
  /** The checkpoint's tree; `dirs[0]` is the root, with the mode and mtime its checkpoint recorded (0755 and 0 for an old one). */
  readonly flat: FlatTree;
  /** False for a checkpoint older than its root record: the root is then left 0755 with its mtime untouched. */
  readonly rootRecorded: boolean;
  /** Allow replacing a non-empty target. */
  readonly replace: boolean;
  /** The store's verified reader, for a target that fetches chunks itself (warm reuse of a changed file). */
  readonly reader: ObjectReader;
  readonly signal?: AbortSignal;
}

/** What the target already held of a warm restore's files. */
export interface TargetReuse {
  /** Files (never hard-link members) now complete in staging: written, linked or left in place. */
  readonly done: ReadonlySet<string>;
  /** Files taken unchanged from the previous copy. */
  readonly filesReused: number;
  /** Chunk bytes the target fetched from the store itself (changed parts of reused files). */
  readonly bytesFetched: number;
  /** Bytes the target copied from its previous copy instead of fetching them. */
  readonly bytesCopiedLocally: number;
}

/** Nothing reused: a cold restore, or a target that keeps no previous copy. */
export const NOTHING_REUSED: TargetReuse = Object.freeze({
  done: new Set<string>(),
  filesReused: 0,
  bytesFetched: 0,
  bytesCopiedLocally: 0,
});

/**
 * Where a restore writes a workspace: a directory on this host, or a sandbox reached over
 * exec (through its agent, or with a shell alone). The counterpart of `WorkspaceSource`;
 * `restoreCheckpoint` is the one algorithm over it and keeps the guarantees for every target:
 * the stored tree is validated before the target sees it, every chunk is verified as it is
 * read, and the target checks each file's hash, mode and mtime where it lands.
 *
 * A target builds the tree in staging and publishes it in one step; until `publish` resolves
 * the previous content is untouched and visible, and `abort` (or a crash) leaves it so.
 */
export interface WorkspaceTarget {
  /** Shown in messages and receipts: a directory, or `sandbox <id>:<root>`. */
  readonly label: string;

  /**
   * Opens a restore of `plan`. Refuses a non-empty target without `plan.replace` with
   * `CONFLICT` (data `reason: 'target-not-empty'`), a target that is not a directory or that
   * overlaps Holdfast's own stores with `INVALID_INPUT`, before anything is written.
   */
  begin(plan: RestorePlan): Promise<TargetSession>;
}

/**
 * One restore in progress at a target. The algorithm calls, in order: `directories`, `reuse`,
 * `file` for every file not reused (leaders of hard-link groups included, members never),
 * `links`, `symlinks`, then `publish`; or `abort` after any failure. When `complete` is true
 * the target already holds the checkpoint (a warm target that matches it, or a restore
 * resumed after its publish) and only `publish` is called.
 */
export interface TargetSession {
  /** The target already is the checkpoint: nothing to write, `publish` only records it. */
  readonly complete: boolean;
  /** What was at the target when the restore began. */
  readonly previous: 'absent' | 'empty' | 'non-empty';
  /**
   * The finest mtime the target can set, in milliseconds (absent: 1, every millisecond kept).
   * `1000`: whole seconds only (busybox `touch`); the target then verifies mtimes to the
   * second and the receipt reports what was rounded. Bytes, modes and links are verified
   * exactly whatever this says.
   */
  readonly mtimePrecisionMs?: 1 | 1000;

  /** Creates every directory but the root, parents first, owner-only until `publish`. */
  directories(dirs: readonly FlatDir[]): Promise<void>;

  /** Completes in staging what the previous copy can supply of `files`; {@link NOTHING_REUSED} when it keeps none. */
  reuse(files: readonly PathedFile[]): Promise<TargetReuse>;

  /**
   * Writes one file from its verified chunk bytes (all of them, or an iterable of them in
   * order for a large file) and checks its SHA-256, mode and mtime where it lands
   * (`INTEGRITY`, data `{path, field}`). May return before the bytes are durable: a failure
   * surfaces from a later call or from `publish`. The buffers must not change afterwards.
   */
  file(file: PathedFile, content: readonly Uint8Array[] | AsyncIterable<Uint8Array>): Promise<void>;

  /** Makes every hard-link member a link to its leader (complete by now) and checks each names the leader's inode. */
  links(members: readonly PathedFile[]): Promise<void>;

  /** Creates the symlinks (targets already confined by the tree's validation; a target confines again) with their mtimes. */
  symlinks(links: readonly FlatSymlink[]): Promise<void>;

  /**
   * Applies every directory's mode and mtime (children first, then the root as recorded) and
   * swaps the staging tree in; the previous copy is removed only after the new one is in
   * place. Records what it wrote so the next checkpoint and the next warm restore can trust
   * it. Idempotent for a session whose publish already happened.
   */
  publish(): Promise<void>;

  /** Removes the staging tree; the target is left as it was. Safe after any failure, and more than once. */
  abort(): Promise<void>;
}
