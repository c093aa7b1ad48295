import { InputError } from '../../../errors.js';

/** First allocation for the first part; it grows by doubling so a tiny body never costs a whole part. */
const INITIAL_PART_BYTES = 64 * 1024;

/**
 * Cuts a streamed body into parts of exactly `partSizeBytes` bytes; only the last part may be
 * shorter, and no part is empty (an empty body yields nothing). Each part is a fresh copy, so
 * a producer that reuses its chunk buffers cannot change bytes already handed out.
 *
 * Reads lazily: the body is pulled only as far as the consumer asks for parts, and returning
 * early (`return()`/`break`) ends the body's iteration, which destroys a Node stream.
 */
export async function* readParts(body: AsyncIterable<unknown>, partSizeBytes: number): AsyncGenerator<Buffer, void, undefined> {
  let part: Buffer = Buffer.allocUnsafe(Math.min(partSizeBytes, INITIAL_PART_BYTES));
  let filled = 0;
  for await (const chunk of body) {
    if (!(chunk instanceof Uint8Array)) {
      throw new InputError(
        'INVALID_INPUT',
        `blob body chunks must be Uint8Array or Buffer, got ${typeof chunk}: read streams without an encoding`,
      );
    }
    let offset = 0;
    while (offset < chunk.length) {
      const take = Math.min(partSizeBytes - filled, chunk.length - offset);
      if (part.length < filled + take) part = grow(part, filled, Math.min(partSizeBytes, Math.max(filled + take, part.length * 2)));
      part.set(chunk.subarray(offset, offset + take), filled);
      filled += take;
      offset += take;
      if (filled === partSizeBytes) {
        yield part;
        // The body has filled a part already, so the next one is likely full too: no regrowing.
        part = Buffer.allocUnsafe(partSizeBytes);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield part.subarray(0, filled);
}

function grow(part: Buffer, filled: number, size: number): Buffer {
  const bigger = Buffer.allocUnsafe(size);
  part.copy(bigger, 0, 0, filled);
  return bigger;
}

/** Views of `bytes` in `partSizeBytes` slices (no copies), as an async iterator like {@link readParts}. */
export async function* sliceParts(bytes: Uint8Array, partSizeBytes: number): AsyncGenerator<Uint8Array, void, undefined> {
  for (let offset = 0; offset < bytes.length; offset += partSizeBytes) {
    yield bytes.subarray(offset, Math.min(bytes.length, offset + partSizeBytes));
  }
}

/**
 * Yields the items of `first`, removing each from the array as it goes (so a buffered part is
 * not held for the rest of a long upload), then everything `rest` still has. It never closes
 * `rest`: whoever created that iterator calls its `return()` when done.
 */
export async function* prepend<T extends object>(first: T[], rest: AsyncIterator<T>): AsyncGenerator<T, void, undefined> {
  for (let item = first.shift(); item !== undefined; item = first.shift()) yield item;
  for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
}
