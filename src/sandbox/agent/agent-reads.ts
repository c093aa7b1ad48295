import { isHoldfastError, StoreError } from '../../errors.js';
import type { AgentConnection } from './agent-connection.js';
import { READ_BATCH_MAX_BYTES, READ_BATCH_MAX_FILES, type ReadFileHeader, type ResponseHeader } from './protocol.js';

/** A file to read, with the size the scan saw (used only to plan batches). */
export interface FileToRead {
  readonly path: string;
  readonly size: number;
}

/** One file's bytes, or undefined when it vanished or stopped being a regular file since the scan. */
export interface FileBytes {
  readonly path: string;
  readonly bytes: Buffer | undefined;
}

/** Queued stream bytes above which the client stops reading stdout, and below which it resumes. */
const STREAM_HIGH_BYTES = 16 * 1024 * 1024;
const STREAM_LOW_BYTES = 4 * 1024 * 1024;

type Job = { readonly kind: 'batch'; readonly paths: string[] } | { readonly kind: 'big'; readonly path: string };

/** Groups small files into `read` batches (by the sizes given) and gives big files their own stream. */
export function planReads(files: readonly FileToRead[]): Job[] {
  const jobs: Job[] = [];
  let batch: string[] = [];
  let bytes = 0;
  for (const f of files) {
    if (f.size > READ_BATCH_MAX_BYTES) {
      if (batch.length > 0) jobs.push({ kind: 'batch', paths: batch });
      jobs.push({ kind: 'big', path: f.path });
      batch = [];
      bytes = 0;
      continue;
    }
    if (batch.length === READ_BATCH_MAX_FILES || bytes + f.size > READ_BATCH_MAX_BYTES) {
      jobs.push({ kind: 'batch', paths: batch });
      batch = [];
      bytes = 0;
    }
    batch.push(f.path);
    bytes += f.size;
  }
  if (batch.length > 0) jobs.push({ kind: 'batch', paths: batch });
  return jobs;
}

/**
 * Reads files whole, in input order, keeping up to `window` requests in flight so the pipe is
 * never idle. A file too big for a batch (or grown past it since the scan) is streamed and
 * joined, so pass only files you mean to hold in memory; use {@link readStream} for the rest.
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
      const run = job.kind === 'batch' ? readBatch(conn, root, job.paths) : readWhole(conn, root, job.path).then((f) => [f]);
      run.catch(() => undefined); // awaited in order below; this only marks an early failure as handled
      inFlight.push(run);
    }
    const head = inFlight.shift();
    if (head === undefined) return;
    yield* await head;
  }
}

async function readBatch(conn: AgentConnection, root: string, paths: string[]): Promise<FileBytes[]> {
  const { result, payload } = await conn.call('read', { root, paths });
  const headers = (result as { files: ReadFileHeader[] }).files;
  const out: FileBytes[] = [];
  let at = 0;
  for (const h of headers) {
    if (h.status === 'too-large') out.push(await readWhole(conn, root, h.path));
    else if (h.status !== undefined) out.push({ path: h.path, bytes: undefined });
    else {
      out.push({ path: h.path, bytes: payload.subarray(at, at + h.length) });
      at += h.length;
    }
  }
  if (at !== payload.length) throw new StoreError(`[agent] read answer for ${paths.length} files does not add up`, { data: { root } });
  return out;
}

async function readWhole(conn: AgentConnection, root: string, path: string): Promise<FileBytes> {
  const pieces: Buffer[] = [];
  try {
    for await (const piece of readStream(conn, root, path)) pieces.push(piece);
  } catch (error) {
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
