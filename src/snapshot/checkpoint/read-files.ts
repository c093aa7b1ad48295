import type { Sha256Hex } from '../../core/hash.js';
import type { DigestOutcome } from '../../objects/content-workers.js';
import type { Exclusion } from '../../rules/excludes.js';
import { listFilesOutside, type ScannedFile } from '../../workspace-fs/scan.js';
import { StatCacheBuilder, type StatCacheHit, type StatIdentity } from '../../workspace-fs/stat-cache.js';
import type { SnapshotDeps } from '../snapshot-deps.js';
import type { SourceScan, WorkspaceSource } from '../workspace-source.js';
import type { CheckpointProgress } from './checkpoint.js';
import type { ContentSink } from './content-sink.js';
import { WHOLE_READ_BYTES } from './file-reader.js';
import type { FileIds, FileIdsView } from './tree-builder.js';

/** Errnos that say a file exists but cannot be read by the source's user: never a moving tree, so never a rescan. */
export const UNREADABLE_ERRNOS: ReadonlySet<string> = new Set(['EACCES', 'EPERM']);

/** A file the source could not read, with the errno it gave. */
export interface UnreadableFile {
  readonly path: string;
  readonly errno: string;
}

/** Files are handed to the content workers in batches of about this many bytes… */
const DIGEST_BATCH_BYTES = 4 * 1024 * 1024;
/** …or this many files, whichever comes first. */
const DIGEST_BATCH_FILES = 256;

/** Inputs of {@link readFiles}. */
export interface ReadFilesInput {
  readonly deps: SnapshotDeps;
  readonly source: WorkspaceSource;
  readonly sourceScan: SourceScan;
  readonly sink: ContentSink;
  /** Running totals across attempts. */
  readonly totals: { filesHashed: number; bytesHashed: number };
  /**
   * Default true: take the ids of files the stat cache (or an untrusted source's base) vouches
   * for without reading them. False reads every file, so every chunk is offered to the sink
   * again (a checkpoint rewriting objects a lost pack held).
   */
  readonly reuse?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (progress: CheckpointProgress) => void;
}

/** Content ids of every included file, what was left out, and the next stat cache. */
export interface ReadFilesResult {
  /** Ids of the files looked at (every file outside the scan's settled subtrees). */
  readonly ids: Map<string, FileIds>;
  /** Ids of every included file: `ids`, and those of the settled subtrees' files. */
  readonly all: FileIdsView;
  /** Files looked at that have no ids (left out, unreadable, changed), and their bytes. */
  readonly missing: { readonly files: number; readonly bytes: number };
  /** Paths whose ids came from the stat cache (not read). */
  readonly hits: Set<string>;
  readonly excluded: Exclusion[];
  readonly cache: StatCacheBuilder;
  /** A file's size differed from its scan while it was read, or it went: the attempt must scan again. */
  readonly changedWhileReading: boolean;
  /** The paths that changed while they were read (their ids are left out of `ids`), in the order seen. */
  readonly changedPaths: readonly string[];
  /** Files the source could not read ({@link UNREADABLE_ERRNOS}; left out of `ids`), in the order seen. */
  readonly unreadable: readonly UnreadableFile[];
}

interface Batch {
  files: ScannedFile[];
  bytes: number;
}

type Done = { files: ScannedFile[]; outcomes: DigestOutcome[] };

/**
 * Resolves every scanned file to content ids: from the stat cache when it can vouch for the
 * file, otherwise by handing its path to the content workers, which read it, check it for
 * secrets before its bytes go anywhere, hash, chunk and compress it, while the main thread
 * goes on through the scan (files too large to hold whole are read here, in a streaming pass). Results are
 * consumed in order, one batch at a time, so the sink sees no overlapping calls.
 */
export async function readFiles(input: ReadFilesInput): Promise<ReadFilesResult> {
  const { deps, source, sourceScan, sink, totals, signal, onProgress } = input;
  const { scan } = sourceScan;
  const ids = new Map<string, FileIds>();
  const hits = new Set<string>();
  const excluded: Exclusion[] = [];
  const next =
    sourceScan.statCache === false ? StatCacheBuilder.disabled() : new StatCacheBuilder(scan.startedAtMs, sourceScan.statCache !== 'grows');
  const maxInFlight = 2 * deps.workers.threads;
  const inFlight: Array<Promise<Done>> = [];
  const changedPaths: string[] = [];
  const unreadable: UnreadableFile[] = [];
  let batch: Batch = { files: [], bytes: 0 };

  const changed = (file: ScannedFile): void => {
    changedPaths.push(file.path);
  };
  /**
   * Keeps what was read of `file`, unless it is not the file the scan saw: bytes of another
   * size than the scan's (rewritten between the stat and the read, or while it was read) are a
   * torn read, never paired with the scanned size in a tree; the attempt scans again.
   */
  const record = (file: ScannedFile, sha256: Sha256Hex, chunks: Sha256Hex[], size: number): void => {
    if (size !== file.size) {
      changed(file);
      return;
    }
    ids.set(file.path, { sha256, chunks });
    next.addFile(file.path, file, sha256, chunks);
    totals.filesHashed += 1;
    totals.bytesHashed += file.size;
  };
  const consume = async (done: Done): Promise<void> => {
    for (const [i, file] of done.files.entries()) {
      const outcome = done.outcomes[i] as DigestOutcome;
      if (outcome.kind === 'secret') excluded.push({ path: file.path, reason: 'secret-content', rule: outcome.rule });
      else if (outcome.kind === 'error' && UNREADABLE_ERRNOS.has(outcome.errno)) unreadable.push({ path: file.path, errno: outcome.errno });
      else if (outcome.kind === 'error') {
        // Gone since the scan: the second look will see the tree moved.
        changed(file);
      } else {
        // A one-chunk file's chunk id is its hash: one string for both, not two copies held per file.
        const ids = outcome.chunks.map((c) => (c.id === outcome.sha256 ? outcome.sha256 : c.id));
        record(file, outcome.sha256, ids, outcome.size);
        for (const [k, chunk] of outcome.chunks.entries()) await sink.offerStored(ids[k] as Sha256Hex, chunk.form, chunk.rawLength);
      }
    }
  };
  const dispatch = async (): Promise<void> => {
    if (batch.files.length === 0) return;
    const { files } = batch;
    batch = { files: [], bytes: 0 };
    const job = source.digest(files).then((outcomes) => ({ files, outcomes }));
    // Awaited in order below; this only keeps an early failure from counting as unhandled.
    job.catch(() => undefined);
    inFlight.push(job);
    while (inFlight.length >= maxInFlight) await consume(await (inFlight.shift() as Promise<Done>));
  };

  let filesDone = 0;
  let bytesDone = 0;
  // A settled subtree's files keep the ids the source knows (unless every file must be read again).
  const settled = input.reuse === false ? undefined : sourceScan.settled;
  const looked = listFilesOutside(scan.root, settled?.dirs ?? new Set());
  for (const file of looked) {
    signal?.throwIfAborted();
    const hit = input.reuse === false ? undefined : sourceScan.lookup(file);
    if (hit !== undefined) {
      ids.set(file.path, hit);
      hits.add(file.path);
      if (next.records)
        next.add(file.path, 'line' in hit ? (hit as StatCacheHit) : { ...identityOf(file), sha256: hit.sha256, chunks: hit.chunks });
    } else if (file.size <= WHOLE_READ_BYTES) {
      batch.files.push(file);
      batch.bytes += file.size;
      if (batch.bytes >= DIGEST_BATCH_BYTES || batch.files.length >= DIGEST_BATCH_FILES) await dispatch();
    } else {
      const content = await source
        .readLarge(file, (chunk) => sink.offerRaw(chunk.id, chunk.bytes))
        .catch((error: unknown) => {
          // A local read throws the errno itself; the agent's stream answers FORBIDDEN carrying it in `data`.
          const { code, data } = error as { code?: unknown; data?: { errno?: unknown } };
          const errno = code === 'FORBIDDEN' ? data?.errno : code;
          if (typeof errno === 'string' && UNREADABLE_ERRNOS.has(errno)) return { kind: 'unreadable' as const, errno };
          throw error;
        });
      if (content.kind === 'unreadable') unreadable.push({ path: file.path, errno: content.errno });
      else if (content.kind === 'secret') excluded.push({ path: file.path, reason: 'secret-content', rule: content.finding.rule });
      else if (content.kind === 'changed') changed(file);
      else record(file, content.sha256, content.chunkIds, content.size);
    }
    filesDone += 1;
    bytesDone += file.size;
    if (filesDone % 500 === 0)
      onProgress?.({ phase: 'read', files: filesDone, filesTotal: scan.files, bytes: bytesDone, bytesTotal: scan.bytes });
  }
  await dispatch();
  while (inFlight.length > 0) await consume(await (inFlight.shift() as Promise<Done>));
  const missing = { files: 0, bytes: 0 };
  for (const file of looked) {
    if (ids.has(file.path)) continue;
    missing.files += 1;
    missing.bytes += file.size;
  }
  const all: FileIdsView = settled === undefined ? ids : settledView(ids, new Set(looked.map((f) => f.path)), settled.ids);
  return { ids, all, missing, hits, excluded, cache: next, changedWhileReading: changedPaths.length > 0, changedPaths, unreadable };
}

/** `own` for the files looked at, `settledIds` for every other (the settled subtrees'). */
function settledView(own: ReadonlyMap<string, FileIds>, looked: ReadonlySet<string>, settledIds: FileIdsView): FileIdsView {
  return {
    get: (p) => (looked.has(p) ? own.get(p) : settledIds.get(p)),
    has: (p) => (looked.has(p) ? own.has(p) : settledIds.has(p)),
  };
}

function identityOf(file: ScannedFile): StatIdentity {
  return { size: file.size, mtimeMs: file.mtimeMs, ctimeMs: file.ctimeMs, ino: file.ino, mode: file.mode };
}
