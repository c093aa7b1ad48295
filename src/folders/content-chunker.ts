import { CDC_MAX_BYTES, nextChunkLength } from '../core/fastcdc.js';
import { SINGLE_CHUNK_BYTES } from '../objects/content-workers.js';

/** The chunker's working buffer: room for one maximal chunk plus the next piece's worth. */
const BUFFER_BYTES = 2 * CDC_MAX_BYTES;

/**
 * Cuts a byte stream into the same chunks a checkpoint cuts the same file into (so the two
 * deduplicate): a file under {@link SINGLE_CHUNK_BYTES} is one chunk, a larger one is split by
 * FastCDC, an empty one has none. Holds at most {@link BUFFER_BYTES} (plus one chunk being
 * handed out); every chunk yielded is its own copy. `onPiece` sees every input piece first,
 * in order (the caller hashes and counts there, and may throw to stop reading).
 */
export async function* contentChunks(pieces: AsyncIterable<Uint8Array>, onPiece: (piece: Uint8Array) => void): AsyncGenerator<Buffer> {
  const buffer = Buffer.allocUnsafe(BUFFER_BYTES);
  let start = 0;
  let end = 0;
  let total = 0;
  for await (const piece of pieces) {
    if (!(piece instanceof Uint8Array)) throw new TypeError('a folder write body must yield Uint8Array pieces');
    onPiece(piece);
    total += piece.byteLength;
    for (let at = 0; at < piece.byteLength; ) {
      if (end === buffer.length) {
        buffer.copy(buffer, 0, start, end);
        end -= start;
        start = 0;
      }
      const n = Math.min(piece.byteLength - at, buffer.length - end);
      buffer.set(piece.subarray(at, at + n), end);
      end += n;
      at += n;
      // Cutting needs a full window of CDC_MAX_BYTES unless the stream has ended.
      while (end - start >= CDC_MAX_BYTES) {
        const len = nextChunkLength(buffer, start, end);
        yield Buffer.from(buffer.subarray(start, start + len));
        start += len;
      }
    }
  }
  if (total === 0) return;
  if (total < SINGLE_CHUNK_BYTES) {
    yield Buffer.from(buffer.subarray(start, end));
    return;
  }
  while (start < end) {
    const len = nextChunkLength(buffer, start, end);
    yield Buffer.from(buffer.subarray(start, start + len));
    start += len;
  }
}
