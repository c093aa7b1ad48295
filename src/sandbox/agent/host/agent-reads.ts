import { isHoldfastError, StoreError } from '../../../errors.js';
import { READ_BATCH_MAX_BYTES, READ_BATCH_MAX_FILES, type ReadFileHeader, type ResponseHeader } from '../wire/protocol.js';
import type { AgentConnection } from './agent-connection.js';

/** A file to read, with the size the scan saw (used only to plan batches). */
export interface FileToRead {
  readonly path: string;
  readonly size: number;
}

/** One file's bytes, or undefined when it vanished or stopped being a regular file since the scan, or could not be read (`errno`). */
export interface FileBytes {
  readonly path: string;
  readonly bytes: Buffer | undefined;
  /** Why there are no bytes when the agent could not open the file: `EACCES` or `EPERM`. */
  readonly errno?: 'EACCES' | 'EPERM';
}

/** Queued stream bytes above which the client stops reading stdout, and below which it resumes. */
const STREAM_HIGH_BYTES = 16 * 1024 * 1024;
const STREAM_LOW_BYTES = 4 * 1024 * 1024;

type Job = { readonly kind: 'batch'; readonly files: FileToRead[] } | { readonly kind: 'big'; readonly file: FileToRead };

/** Groups small files into `read` batches (by the sizes given) and gives big files their own stream. */
export function planReads(files: readonly FileToRead[]): Job[] {
  const jobs: Job[] = [];
  let batch: FileToRead[] = [];
  let bytes = 0;
  for (const f of files) {
    if (f.size > READ_BATCH_MAX_BYTES) {
      if (batch.length > 0) jobs.push({ kind: 'batch', files: batch });
      jobs.push({ kind: 'big', file: f });
      batch = [];
      bytes = 0;
      continue;
    }
    if (batch.length === READ_BATCH_MAX_FILES || bytes + f.size > READ_BATCH_MAX_BYTES) {
      jobs.push({ kind: 'batch', files: batch });
      batch = [];
      bytes = 0;
    }
    batch.push(f);
    bytes += f.size;
  }
  if (batch.length > 0) jobs.push({ kind: 'batch', files: batch });
  return jobs;
}

/**
 * Reads files whole, in input order, keeping up to `window` requests in flight so the pipe is
 * never idle. A file too big for a batch (or grown past it since the scan) is streamed and
 * joined, so pass only files you mean to hold in memory; use {@link readStream} for the rest.
 * A file the agent sends more bytes of than its given size is answered as changed (`bytes`
 * undefined) once it passes that size, so an agent can never make the host hold more.
 */
export async function* readFiles(
  conn: AgentConnection,
  root: string,
  files: readonly FileToRead[],
  window: number,
): AsyncGenerator<FileBytes> {
  const jobs = planReads(files);
  const inFlight: Array<Promise<FileBytes[]>> = [];
  let next = 0;
  for (;;) {
    while (inFlight.length < window && next < jobs.length) {
      const job = jobs[next++] as Job;
      const run = job.kind === 'batch' ? readBatch(conn, root, job.files) : readWhole(conn, root, job.file).then((f) => [f]);
      run.catch(() => undefined); // awaited in order below; this only marks an early failure as handled
      inFlight.push(run);
    }
    const head = inFlight.shift();
    if (head === undefined) return;
    yield* await head;
  }
}

async function readBatch(conn: AgentConnection, root: string, files: FileToRead[]): Promise<FileBytes[]> {
  const { result, payload } = await conn.call('read', { root, paths: files.map((f) => f.path) });
  const headers = (result as { files?: unknown })?.files;
  if (!Array.isArray(headers) || headers.length !== files.length)
    throw new StoreError(`[agent] read answer for ${files.length} files does not add up`, { data: { root } });
  const out: FileBytes[] = [];
  let at = 0;
  for (const [i, file] of files.entries()) {
    // Answers are matched to the request by position; a path the agent names itself is never used.
    const h = headers[i] as Partial<ReadFileHeader>;
    if (h?.status === 'too-large') out.push(await readWhole(conn, root, file));
    // Only the two errnos the agent may name; any other value is not trusted and reads as changed.
    else if (h?.status === 'unreadable' && (h.errno === 'EACCES' || h.errno === 'EPERM'))
      out.push({ path: file.path, bytes: undefined, errno: h.errno });
    else if (h?.status !== undefined || !Number.isSafeInteger(h?.length) || (h.length as number) < 0)
      out.push({ path: file.path, bytes: undefined });
    else {
      const length = h.length as number;
      out.push({ path: file.path, bytes: payload.subarray(at, at + length) });
      at += length;
    }
  }
  if (at !== payload.length) throw new StoreError(`[agent] read answer for ${files.length} files does not add up`, { data: { root } });
  return out;
}

async function readWhole(conn: AgentConnection, root: string, file: FileToRead): Promise<FileBytes> {
  const { path } = file;
  const pieces: Buffer[] = [];
  let held = 0;
  try {
    for await (const piece of readStream(conn, root, path)) {
      held += piece.length;
      if (held > file.size) return { path, bytes: undefined };
      pieces.push(piece);
    }
  } catch (error) {
    // The agent answers an open it may not make as FORBIDDEN (EACCES, EPERM, EROFS: only the first two happen on a read).
    if (isHoldfastError(error, 'FORBIDDEN')) return { path, bytes: undefined, errno: 'EACCES' };
    if (isHoldfastError(error, 'NOT_FOUND') || isHoldfastError(error, 'INVALID_INPUT') || isHoldfastError(error, 'INVALID_PATH')) {
      return { path, bytes: undefined };
    }
    throw error;
  }
  return { path, bytes: Buffer.concat(pieces) };
}

/**
 * Streams one file of any size, piece by piece. When the consumer falls behind, stdout is
 * paused, the pipe fills and the agent waits: memory stays bounded at both ends. Breaking out
 * of the loop cancels the stream on the agent.
 */
export async function* readStream(conn: AgentConnection, root: string, path: string, chunkBytes?: number): AsyncGenerator<Buffer> {
  const queue: Buffer[] = [];
  let queued = 0;
  let abandoned = false;
  let wake: (() => void) | undefined;
  const onPart = (_header: ResponseHeader, payload: Buffer): void => {
    if (abandoned) return;
    queue.push(payload);
    queued += payload.length;
    if (queued > STREAM_HIGH_BYTES) conn.pauseInput();
    wake?.();
  };
  const { id, reply } = await conn.start(
    'read-stream',
    chunkBytes === undefined ? { root, path } : { root, path, chunkBytes },
    undefined,
    onPart,
  );
  let outcome: { size: number } | { error: unknown } | undefined;
  reply.then(
    (r) => {
      outcome = { size: (r.result as { size: number }).size };
      wake?.();
    },
    (error: unknown) => {
      outcome = { error };
      wake?.();
    },
  );
  let total = 0;
  try {
    for (;;) {
      const piece = queue.shift();
      if (piece !== undefined) {
        queued -= piece.length;
        if (queued < STREAM_LOW_BYTES) conn.resumeInput();
        total += piece.length;
        yield piece;
      } else if (outcome !== undefined) {
        if ('error' in outcome) throw outcome.error;
        if (outcome.size !== total) throw new StoreError(`[agent] stream of ${path} ended at ${total} of ${outcome.size} bytes`);
        return;
      } else {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
    }
  } finally {
    if (outcome === undefined) {
      abandoned = true;
      queue.length = 0;
      conn.resumeInput();
      conn.cancel(id);
    }
  }
}
