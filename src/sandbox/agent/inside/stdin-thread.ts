import { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';

/**
 * The reading side of {@link stdinThread}, run in a worker thread (CommonJS evaluated from this
 * string, so the bundled agent stays one file). fd 0 is read through the worker's own event
 * loop (a non-blocking pipe handle), never by a blocking call: a worker blocked in `read` could
 * not be stopped, and the process would not exit while the host holds stdin open. The main
 * thread says `pause` and `resume`; a descriptor the handle cannot take (not a pipe or socket)
 * is reported as `{ unusable }`, and the caller reads `process.stdin` instead.
 */
const READER_JS = `
const { parentPort } = require('node:worker_threads');
const net = require('node:net');
let input;
try {
  input = new net.Socket({ fd: 0, readable: true, writable: false });
} catch (error) {
  parentPort.postMessage({ unusable: String(error && error.code || error) });
}
if (input !== undefined) {
  input.on('data', (chunk) => {
    const own = chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength ? chunk : Uint8Array.prototype.slice.call(chunk);
    parentPort.postMessage({ chunk: own }, [own.buffer]);
  });
  input.on('end', () => parentPort.postMessage({ end: true }));
  input.on('error', (error) => parentPort.postMessage({ error: String(error && error.code || error) }));
  parentPort.on('message', (m) => (m === 'pause' ? input.pause() : input.resume()));
}
`;

/**
 * The process's stdin as a stream fed by a thread of its own: the pipe is drained while the
 * main thread is busy applying a request, so the next requests cross while this one runs (a
 * pipe holds 64 KiB: read only between requests, a 4 MiB write batch crossed only while both
 * sides were idle). Backpressure is the stream's: when its buffer is over `highWaterMark` the
 * thread stops reading fd 0 until the stream is read again. Only for a process that has not
 * read its stdin through `process.stdin` (which would hold bytes this thread never sees).
 */
export function stdinThread(highWaterMark = 8 * 1024 * 1024): Readable {
  let paused = false;
  const worker = new Worker(READER_JS, { eval: true });
  let resume = (): void => worker.postMessage('resume');
  let pause = (): void => worker.postMessage('pause');
  const stream = new Readable({
    highWaterMark,
    read() {
      if (!paused) return;
      paused = false;
      resume();
    },
  });
  const take = (chunk: Buffer): void => {
    if (!stream.push(chunk) && !paused) {
      paused = true;
      pause();
    }
  };
  worker.on('message', (msg: { chunk?: Uint8Array; end?: true; error?: string; unusable?: string }) => {
    if (msg.chunk !== undefined) take(Buffer.from(msg.chunk.buffer, msg.chunk.byteOffset, msg.chunk.byteLength));
    else if (msg.end === true) stream.push(null);
    else if (msg.unusable !== undefined) {
      void worker.terminate();
      const stdin = process.stdin;
      resume = () => stdin.resume();
      pause = () => stdin.pause();
      stdin.on('data', take);
      stdin.on('end', () => stream.push(null));
      stdin.on('error', (error) => stream.destroy(error));
    } else stream.destroy(new Error(`reading stdin failed: ${msg.error ?? 'unknown'}`));
  });
  worker.on('error', (error) => stream.destroy(error));
  return stream;
}
