import type { Sha256Hex } from '../../core/hash.js';
import { InputError } from '../../errors.js';
import type { Checkpoint, Workspace } from '../../metadata/metadata-store.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import type { ScanLimits } from '../../workspace-fs/scan.js';
import { type ExcludedSummary, excludedSummary, recordedRoot } from '../checkpoint-record.js';
import { checkpointLimits, type FlatTree, flattenTree } from '../tree-walk.js';
import { NOTHING_REUSED, type TargetReuse, type TargetSession, type WorkspaceTarget } from '../workspace-target.js';
import type { PathedFile } from './restore-files.js';

export type { ExcludedSummary } from '../checkpoint-record.js';

/** Chunk bytes fetched from the store per round, at most; files larger than this are streamed. */
const FETCH_BATCH_BYTES = 32 * 1024 * 1024;
/** The first round fetches this much, and each next one twice as much: the target starts writing early. */
const FIRST_FETCH_BYTES = 2 * 1024 * 1024;
/** Chunks of one streamed (large) file fetched per read. */
const LARGE_FILE_CHUNKS_PER_READ = 8;

/** Progress reported while a restore runs. */
export interface RestoreProgress {
  readonly files: number;
  readonly filesTotal: number;
  readonly bytes: number;
  readonly bytesTotal: number;
}

/** Options of one restore. */
export interface RestoreOptions {
  /** Where the checkpoint goes: a host directory (`LocalWorkspaceTarget`) or a sandbox. */
  readonly target: WorkspaceTarget;
  readonly workspace: Workspace;
  readonly checkpoint: Checkpoint;
  /** Allow replacing a non-empty target (warm restore: unchanged files are reused). */
  readonly replace?: boolean;
  /** What the checkpoint may hold; defaults to a scan's limits raised to what its row records (see `checkpointLimits`). */
  readonly limits?: Partial<ScanLimits>;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: RestoreProgress) => void;
}

/** What a restore did; every object and every file was verified before publishing. */
export interface RestoreReceipt {
  readonly checkpointId: string;
  readonly rootTree: Sha256Hex;
  /** The target's label: its directory, or `sandbox <id>:<root>`. */
  readonly target: string;
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** Files taken unchanged from the previous copy at the target, wherever they lay there (warm restore). */
  readonly filesReused: number;
  /** Raw bytes read from the object store. */
  readonly bytesFetched: number;
  /**
   * Files restored as hard links to another restored file (group members; leaders not
   * counted).
   */
  readonly hardlinks: number;
  /**
   * What the checkpoint left out (or kept changed), by reason: what a restore does not bring
   * back, e.g. `cache` directories (node_modules) setup must rebuild, or `secret-path` files.
   */
  readonly excluded: ExcludedSummary;
  /** Bytes copied from the previous copy instead of fetched: whole files it could not lend by hard link, and unchanged chunks of changed files. */
  readonly bytesCopiedLocally: number;
  /**
   * The finest mtime the target kept, in milliseconds: 1, or 1000 for a sandbox whose tools
   * set whole seconds only (busybox `touch`); then every mtime is the recorded one cut to the
   * second, and was verified so.
   */
  readonly mtimePrecisionMs: 1 | 1000;
  /** Entries (files, directories, the root, symlinks) whose recorded mtime had milliseconds the target could not keep. */
  readonly mtimesRounded: number;
  /** Bytes, modes, mtimes (to {@link mtimePrecisionMs}), symlink targets and hard-link groups were checked after writing. */
  readonly verified: true;
  readonly durationMs: number;
}

/**
 * Restores a checkpoint into a {@link WorkspaceTarget} (DESIGN section 5); the one restore
 * algorithm, whatever the target. The stored tree is never trusted: every tree is read,
 * validated and held to the checkpoint's limits before the target sees anything
 * (`INTEGRITY`, `LIMIT_EXCEEDED`), and every chunk is verified as it is read from the store.
 * Then the target, in order:
 *
 * 1. `begin`: refuses a non-empty target without `replace` (`CONFLICT`) or an unusable one
 *    (`INVALID_INPUT`); a target that already is the checkpoint skips to 6;
 * 2. `directories`: every directory, parents first;
 * 3. `reuse`: what a warm target's previous copy supplies (by content locally, by path and
 *    hash in a sandbox);
 * 4. `file` for every other file, hard-link leaders included: chunks are fetched in coalesced
 *    rounds that start small and double, the next round read while the target writes this
 *    one; a file over one round is streamed a few chunks at a time. The target checks each
 *    file's hash, mode and mtime where it lands;
 * 5. `links` (members to their complete leaders), then `symlinks`;
 * 6. `publish`: directory modes and mtimes, children first and the root as recorded, then
 *    the swap. Any failure before it ends in `abort`: the target is left as it was.
 */
export async function restoreCheckpoint(reader: ObjectReader, options: RestoreOptions): Promise<RestoreReceipt> {
  const started = performance.now();
  const { checkpoint, target } = options;
  const rootTree = checkpoint.rootTree;
  if (rootTree === null) throw new InputError('INVALID_INPUT', `checkpoint ${checkpoint.id} is ${checkpoint.status}, not ready`);
  const root = recordedRoot(checkpoint);
  const flat = await flattenTree(reader, rootTree, root, checkpointLimits(checkpoint, options.limits));
  const session = await target.begin({
    workspace: options.workspace,
    checkpoint,
    flat,
    rootRecorded: root !== undefined,
    replace: options.replace === true,
    reader,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  const members = flat.files.filter((f) => f.hardlink !== undefined);
  let work: RestoreWork;
  try {
    work = session.complete ? completeWork(flat, members.length) : await build(reader, session, flat, members, options);
    await session.publish();
  } catch (error) {
    await session.abort().catch(() => undefined);
    throw error;
  }
  return {
    checkpointId: checkpoint.id,
    rootTree,
    target: target.label,
    files: flat.files.length,
    dirs: flat.dirs.length - 1,
    symlinks: flat.symlinks.length,
    bytes: flat.files.reduce((n, f) => n + f.size, 0),
    ...work,
    excluded: excludedSummary(checkpoint),
    ...precisionKept(session.mtimePrecisionMs ?? 1, flat),
    verified: true,
    durationMs: Math.round(performance.now() - started),
  };
}

/** The target's mtime precision and how many recorded mtimes it rounded (entries with milliseconds, when it keeps whole seconds). */
function precisionKept(mtimePrecisionMs: 1 | 1000, flat: FlatTree): Pick<RestoreReceipt, 'mtimePrecisionMs' | 'mtimesRounded'> {
  if (mtimePrecisionMs === 1) return { mtimePrecisionMs, mtimesRounded: 0 };
  const rounded = (ms: number): number => (ms % mtimePrecisionMs === 0 ? 0 : 1);
  let mtimesRounded = 0;
  for (const entry of [...flat.files, ...flat.dirs, ...flat.symlinks]) mtimesRounded += rounded(entry.mtimeMs);
  return { mtimePrecisionMs, mtimesRounded };
}

/** What a restore did, besides what the checkpoint holds. */
type RestoreWork = Pick<RestoreReceipt, 'filesReused' | 'bytesFetched' | 'bytesCopiedLocally' | 'hardlinks'>;

/** Nothing written, nothing fetched: the target already was the checkpoint. */
function completeWork(flat: FlatTree, hardlinks: number): RestoreWork {
  return { filesReused: flat.files.length, bytesFetched: 0, bytesCopiedLocally: 0, hardlinks };
}

/** Steps 2 to 5 of {@link restoreCheckpoint}. */
async function build(
  reader: ObjectReader,
  session: TargetSession,
  flat: FlatTree,
  members: readonly PathedFile[],
  options: RestoreOptions,
): Promise<RestoreWork> {
  await session.directories(flat.dirs.slice(1));
  const leaders = flat.files.filter((f) => f.hardlink === undefined);
  const reused: TargetReuse = session.previous === 'non-empty' ? await session.reuse(leaders) : NOTHING_REUSED;
  options.signal?.throwIfAborted();
  const todo = leaders.filter((f) => !reused.done.has(f.path));
  const fetched = await sendFiles(reader, session, todo, options);
  // Leaders are complete (written or reused) before any link to them.
  await session.links(members);
  await session.symlinks(flat.symlinks);
  return {
    filesReused: reused.filesReused,
    bytesFetched: fetched + reused.bytesFetched,
    bytesCopiedLocally: reused.bytesCopiedLocally,
    hardlinks: members.length,
  };
}

/** Fetches the chunks of `files` in rounds and hands each file to the target; returns the chunk bytes read. */
async function sendFiles(
  reader: ObjectReader,
  session: TargetSession,
  files: readonly PathedFile[],
  options: Pick<RestoreOptions, 'signal' | 'onProgress'>,
): Promise<number> {
  const progress = { files: 0, filesTotal: files.length, bytes: 0, bytesTotal: files.reduce((n, f) => n + f.size, 0) };
  const done = (file: PathedFile): void => {
    progress.files += 1;
    progress.bytes += file.size;
  };
  const rounds = fetchRounds(files.filter((f) => f.size <= FETCH_BATCH_BYTES));
  let fetched = 0;
  const fetch = (round: readonly PathedFile[] | undefined) => {
    if (round === undefined) return undefined;
    const job = reader.readMany(round.flatMap((f) => f.chunks));
    job.catch(() => undefined); // awaited below; this only keeps an early failure from being "unhandled"
    return job;
  };
  let next = fetch(rounds[0]);
  for (let i = 0; i < rounds.length; i += 1) {
    options.signal?.throwIfAborted();
    const chunks = await (next as Promise<Map<string, Uint8Array>>);
    next = fetch(rounds[i + 1]);
    for (const c of chunks.values()) fetched += c.byteLength;
    for (const file of rounds[i] as PathedFile[]) {
      await session.file(
        file,
        file.chunks.map((id) => chunks.get(id) as Uint8Array),
      );
      done(file);
    }
    options.onProgress?.({ ...progress });
  }
  for (const file of files) {
    if (file.size <= FETCH_BATCH_BYTES) continue;
    options.signal?.throwIfAborted();
    const counted = { bytes: 0 };
    await session.file(file, largeFileChunks(reader, file, counted));
    fetched += counted.bytes;
    done(file);
    options.onProgress?.({ ...progress });
  }
  return fetched;
}

/** Files grouped into fetch rounds of {@link FIRST_FETCH_BYTES}, doubling up to {@link FETCH_BATCH_BYTES}. */
function fetchRounds(files: readonly PathedFile[]): PathedFile[][] {
  const rounds: PathedFile[][] = [];
  let limit = FIRST_FETCH_BYTES;
  let current: PathedFile[] = [];
  let bytes = 0;
  for (const file of files) {
    if (current.length > 0 && bytes + file.size > limit) {
      rounds.push(current);
      current = [];
      bytes = 0;
      limit = Math.min(limit * 2, FETCH_BATCH_BYTES);
    }
    current.push(file);
    bytes += file.size;
  }
  if (current.length > 0) rounds.push(current);
  return rounds;
}

/** A large file's verified chunks, a few at a time; adds the bytes read to `counted`. */
async function* largeFileChunks(reader: ObjectReader, file: PathedFile, counted: { bytes: number }): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < file.chunks.length; i += LARGE_FILE_CHUNKS_PER_READ) {
    const ids = file.chunks.slice(i, i + LARGE_FILE_CHUNKS_PER_READ);
    const got = await reader.readMany(ids);
    for (const id of ids) {
      const piece = got.get(id) as Uint8Array;
      counted.bytes += piece.byteLength;
      yield piece;
    }
  }
}
