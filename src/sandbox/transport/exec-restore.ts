import { createHash } from 'node:crypto';
import type { FileEntry } from '../../core/tree.js';
import { ConflictError, InputError } from '../../errors.js';
import type { Checkpoint, Workspace } from '../../metadata/metadata-store.js';
import { ObjectReader } from '../../objects/object-reader.js';
import type { SnapshotDeps } from '../../snapshot/checkpoint.js';
import { excludedSummary, recordedRoot } from '../../snapshot/checkpoint-record.js';
import type { RestoreProgress, RestoreReceipt } from '../../snapshot/restore.js';
import { checkpointLimits, flattenTree } from '../../snapshot/tree-walk.js';
import { type AgentClient, agentCacheKey } from '../agent/host/agent-client.js';
import { BatchWriter } from '../agent/host/batch-writer.js';

/** Chunk bytes fetched from the store per round, at most; the first round fetches less. */
const FETCH_BATCH_BYTES = 32 * 1024 * 1024;
const FIRST_FETCH_BYTES = 2 * 1024 * 1024;
/** Chunks of one large file fetched per round. */
const LARGE_FILE_CHUNKS_PER_READ = 8;

/** Options of {@link restoreIntoSandbox}. */
export interface ExecRestoreOptions {
  readonly client: AgentClient;
  /** The workspace root inside the sandbox. */
  readonly root: string;
  readonly workspace: Workspace;
  readonly checkpoint: Checkpoint;
  /** Allow replacing a non-empty workspace (unchanged files are reused in the sandbox). */
  readonly replace?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: RestoreProgress) => void;
}

type FileWithPath = FileEntry & { readonly path: string };

/**
 * Restores a checkpoint into a sandbox through its agent, with the guarantees of a local
 * restore: every object is verified as it is read from the store and every file again by the
 * agent before it counts, the tree is built in a staging area and published in one step, and
 * unchanged files already in the sandbox are reused rather than sent. The staging id is derived
 * from the checkpoint and the target, so a restore retried after a lost agent resumes where
 * the last one stopped (completed write batches are not applied twice).
 *
 * Fidelity: names are bytes and paths may be longer than PATH_MAX (the agent reaches them);
 * modes and whole-millisecond mtimes, pre-1970 ones included, are set and read back by the
 * agent (`INTEGRITY` data `{path, field}` when the sandbox's filesystem did not keep one); a
 * hard-link group's leader is written (or reused) like any file and every member is linked to
 * it in staging; the root directory gets the mode and mtime its checkpoint recorded, last.
 */
export async function restoreIntoSandbox(deps: SnapshotDeps, options: ExecRestoreOptions): Promise<RestoreReceipt> {
  const started = performance.now();
  const { client, root, checkpoint } = options;
  if (checkpoint.rootTree === null) throw new InputError('INVALID_INPUT', `checkpoint ${checkpoint.id} is ${checkpoint.status}, not ready`);
  const reader = new ObjectReader(deps.blobs, deps.meta);
  const rootDir = recordedRoot(checkpoint);
  const flat = await flattenTree(reader, checkpoint.rootTree, rootDir, checkpointLimits(checkpoint));
  const { leaders, members } = linkGroups(flat.files);
  const stagingId = `r${createHash('sha256').update(`${checkpoint.id}\0${root}`).digest('hex').slice(0, 24)}`;
  const begin = await client.stageBegin({
    stagingId,
    target: root,
    replace: options.replace === true,
    cacheKey: agentCacheKey(options.workspace.id, root),
  });
  if (begin.targetState === 'non-empty' && options.replace !== true && begin.phase === 'staging') {
    await client.abort(stagingId);
    throw new ConflictError('CONFLICT', `the sandbox workspace ${root} is not empty: pass --replace to replace it`, {
      data: { target: root, reason: 'target-not-empty' },
    });
  }
  let reused = new Set<string>();
  let fetched = 0;
  if (begin.phase === 'staging') {
    const writer = new BatchWriter(client, stagingId, { completed: begin.completedBatchIds });
    for (const dir of flat.dirs.slice(1)) await writer.mkdir(dir.path);
    await writer.flush();
    if (begin.targetState === 'non-empty') {
      reused = new Set(
        await client.stageReuse(
          stagingId,
          leaders.map((f) => ({ path: f.path, size: f.size, mode: f.mode, mtimeMs: f.mtimeMs, sha256: f.sha256, chunks: f.chunks })),
        ),
      );
    }
    fetched = await sendFiles(
      reader,
      writer,
      leaders.filter((f) => !reused.has(f.path)),
      options,
    );
    // Leaders are complete (written or reused) before any link to them: the agent refuses a link otherwise.
    for (const member of members) await writer.link(meta(member), member.hardlink as string);
    for (const link of flat.symlinks) await writer.symlink(link.path, link.target, link.mtimeMs);
    for (const dir of [...flat.dirs].reverse()) if (dir.path !== '') await writer.dir(dir.path, dir.mode, dir.mtimeMs);
    await writer.flush();
  }
  await client.publish({ stagingId, target: root, base: checkpoint.id, ...(rootDir === undefined ? {} : { root: rootDir }) });
  return {
    checkpointId: checkpoint.id,
    rootTree: checkpoint.rootTree,
    target: root,
    files: flat.files.length,
    dirs: flat.dirs.length - 1,
    symlinks: flat.symlinks.length,
    bytes: flat.files.reduce((n, f) => n + f.size, 0),
    filesReused: reused.size,
    bytesFetched: fetched,
    // The agent's reuse is by path and whole file: it links or leaves, never copies.
    bytesCopiedLocally: 0,
    verified: true,
    excluded: excludedSummary(checkpoint),
    hardlinks: members.length,
    durationMs: Math.round(performance.now() - started),
  };
}

/**
 * Splits a tree's files into those written (or reused) and hard-link members, linked to their
 * leader afterwards. `flattenTree` validated every `hardlink` (`checkHardlinks`): it names a
 * preceding plain file of this tree with the member's content, mode and mtime.
 */
function linkGroups(files: readonly FileWithPath[]): { leaders: FileWithPath[]; members: FileWithPath[] } {
  const leaders: FileWithPath[] = [];
  const members: FileWithPath[] = [];
  for (const f of files) (f.hardlink === undefined ? leaders : members).push(f);
  return { leaders, members };
}

/** Reads chunks from the store in coalesced rounds and hands each file to the batch writer. */
async function sendFiles(
  reader: ObjectReader,
  writer: BatchWriter,
  files: readonly FileWithPath[],
  options: ExecRestoreOptions,
): Promise<number> {
  const bytesTotal = files.reduce((n, f) => n + f.size, 0);
  let fetched = 0;
  let done = 0;
  let bytesDone = 0;
  const small = files.filter((f) => f.size <= FETCH_BATCH_BYTES);
  // Rounds start small and double, so the agent starts writing while later rounds are read.
  let roundBytes = FIRST_FETCH_BYTES;
  for (let i = 0; i < small.length; roundBytes = Math.min(roundBytes * 2, FETCH_BATCH_BYTES)) {
    options.signal?.throwIfAborted();
    const round: FileWithPath[] = [];
    for (let bytes = 0; i < small.length && (round.length === 0 || bytes + (small[i] as FileWithPath).size <= roundBytes); i += 1) {
      round.push(small[i] as FileWithPath);
      bytes += (small[i] as FileWithPath).size;
    }
    const chunks = await reader.readMany(round.flatMap((f) => f.chunks));
    for (const file of round) {
      const pieces = file.chunks.map((id) => chunks.get(id) as Uint8Array);
      await writer.file(meta(file), pieces.length === 1 ? (pieces[0] as Uint8Array) : Buffer.concat(pieces));
      fetched += file.size;
      bytesDone += file.size;
    }
    done += round.length;
    options.onProgress?.({ files: done, filesTotal: files.length, bytes: bytesDone, bytesTotal });
  }
  for (const file of files.filter((f) => f.size > FETCH_BATCH_BYTES)) {
    options.signal?.throwIfAborted();
    await writer.file(meta(file), largeFileChunks(reader, file));
    fetched += file.size;
    bytesDone += file.size;
    done += 1;
    options.onProgress?.({ files: done, filesTotal: files.length, bytes: bytesDone, bytesTotal });
  }
  return fetched;
}

function meta(file: FileWithPath): {
  path: string;
  size: number;
  sha256: string;
  mode: number;
  mtimeMs: number;
  chunks: readonly string[];
} {
  return { path: file.path, size: file.size, sha256: file.sha256, mode: file.mode, mtimeMs: file.mtimeMs, chunks: file.chunks };
}

/** A large file's verified chunks, a few at a time. */
async function* largeFileChunks(reader: ObjectReader, file: FileWithPath): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < file.chunks.length; i += LARGE_FILE_CHUNKS_PER_READ) {
    const ids = file.chunks.slice(i, i + LARGE_FILE_CHUNKS_PER_READ);
    const got = await reader.readMany(ids);
    for (const id of ids) yield got.get(id) as Uint8Array;
  }
}
