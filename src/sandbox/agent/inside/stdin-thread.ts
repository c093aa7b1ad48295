import { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';

/** Slots of the counter the two threads share (an `Int32Array` over a `SharedArrayBuffer`). */
const POSTED = 0; // bytes the thread has posted that the main thread has not taken yet
const WAITING = 1; // 1 while the thread is paused for POSTED and waits for 'drained'

/**
 * The reading side of {@link stdinThread}, run in a worker thread (CommonJS evaluated from this
 * string, so the bundled agent stays one file). fd 0 is read through the worker's own event
 * loop (a non-blocking pipe handle), never by a blocking call: a worker blocked in `read` could
 * not be stopped, and the process would not exit while the host holds stdin open. A descriptor
 * the handle cannot take (not a pipe or socket) is reported as `{ unusable }`, and the caller
 * reads `process.stdin` instead.
 *
 * Two reasons pause reading, each with its own way back: the main thread's stream is full
 * (`pause` / `resume` messages), or the bytes posted and not yet taken passed the limit (the
 * main thread is busy and its message queue grows). For the second the thread raises WAITING
 * before it posts the chunk that crossed the limit, so the main thread, taking that chunk or a
 * later one, always sees the flag: no wake-up is lost.
 */
const READER_JS = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const counter = new Int32Array(workerData.shared);
const limit = workerData.limit;
let input;
try {
  input = new net.Socket({ fd: 0, readable: true, writable: false });
} catch (error) {
  parentPort.postMessage({ unusable: String(error && error.code || error) });
}
if (input !== undefined) {
  let streamFull = false;
  let overLimit = false;
  const settle = () => (streamFull || overLimit ? input.pause() : input.resume());
  input.on('data', (chunk) => {
    const own = chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength ? chunk : Uint8Array.prototype.slice.call(chunk);
    if (Atomics.add(counter, ${POSTED}, own.byteLength) + own.byteLength > limit && !overLimit) {
      overLimit = true;
      Atomics.store(counter, ${WAITING}, 1);
      settle();
    }
    parentPort.postMessage({ chunk: own }, [own.buffer]);
  });
  input.on('end', () => parentPort.postMessage({ end: true }));
  input.on('error', (error) => parentPort.postMessage({ error: String(error && error.code || error) }));
  parentPort.on('message', (m) => {
    if (m === 'drained') overLimit = false;
    else streamFull = m === 'pause';
    settle();
  });
}
`;

/**
 * The process's stdin as a stream fed by a thread of its own: the pipe is drained while the
 * main thread is busy applying a request, so the next requests cross while this one runs (a
 * pipe holds 64 KiB: read only between requests, a 4 MiB write batch crossed only while both
 * sides were idle). Memory stays bounded by two marks: when the stream's buffer is over
 * `highWaterMark` the thread stops reading until the stream is read again, and when more than
 * `postedLimit` bytes are posted and not yet taken (the main thread busy, its message queue
 * growing) the thread stops until the main thread has taken all but half of them. Only for a
 * process that has not read its stdin through `process.stdin` (which would hold bytes this
 * thread never sees).
 */
export function stdinThread(highWaterMark = 8 * 1024 * 1024, postedLimit = 8 * 1024 * 1024): Readable {
  let paused = false;
  const shared = new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
  const counter = new Int32Array(shared);
  const worker = new Worker(READER_JS, { eval: true, workerData: { shared, limit: postedLimit } });
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
    if (msg.chunk !== undefined) {
      const left = Atomics.sub(counter, POSTED, msg.chunk.byteLength) - msg.chunk.byteLength;
      if (left <= postedLimit / 2 && Atomics.compareExchange(counter, WAITING, 1, 0) === 1) worker.postMessage('drained');
      take(Buffer.from(msg.chunk.buffer, msg.chunk.byteOffset, msg.chunk.byteLength));
    } else if (msg.end === true) stream.push(null);
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
