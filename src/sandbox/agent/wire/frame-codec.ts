import { InputError } from '../../../errors.js';
import { MAX_FRAME_BYTES, MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES } from './protocol.js';

const PREFIX_BYTES = 8;
const EMPTY = Buffer.alloc(0);
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A decoded frame: the parsed header object and the raw payload. */
export interface Frame {
  readonly header: Record<string, unknown>;
  readonly payload: Buffer;
}

/**
 * What the decoder yields: a frame; a frame whose lengths were sound but whose header was not
 * a JSON object (reported and skipped, the stream stays in step); or, last, a fatal framing
 * error after which the stream cannot be trusted.
 */
export type DecodedFrame =
  | { readonly kind: 'frame'; readonly frame: Frame }
  | { readonly kind: 'malformed'; readonly error: InputError }
  | { readonly kind: 'fatal'; readonly error: InputError };

/**
 * Encodes one frame as two buffers (length prefix + header, then the payload) so a large
 * payload is never copied. Throws `LIMIT_EXCEEDED` when the header or payload is over its bound:
 * that is a bug on the sending side, caught before anything is written.
 */
export function encodeFrame(header: object, payload: Uint8Array = EMPTY): Buffer[] {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  if (json.length > MAX_HEADER_BYTES) {
    throw new InputError('LIMIT_EXCEEDED', `frame header of ${json.length} bytes is over the ${MAX_HEADER_BYTES}-byte limit`, {
      data: { headerBytes: json.length, limit: MAX_HEADER_BYTES },
    });
  }
  if (payload.byteLength > MAX_PAYLOAD_BYTES) {
    throw new InputError('LIMIT_EXCEEDED', `frame payload of ${payload.byteLength} bytes is over the ${MAX_PAYLOAD_BYTES}-byte limit`, {
      data: { payloadBytes: payload.byteLength, limit: MAX_PAYLOAD_BYTES },
    });
  }
  const head = Buffer.allocUnsafe(PREFIX_BYTES + json.length);
  head.writeUInt32BE(json.length + payload.byteLength, 0);
  head.writeUInt32BE(json.length, 4);
  json.copy(head, PREFIX_BYTES);
  return payload.byteLength === 0 ? [head] : [head, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)];
}

/**
 * Turns a byte stream cut anywhere into frames. A length prefix over the bounds, or a header
 * length larger than its frame, cannot be skipped safely (the stream is out of step): `push`
 * returns the frames completed before it followed by a `fatal` entry (`LIMIT_EXCEEDED` /
 * `INVALID_INPUT`), and ignores all later input. Nothing of the offending frame is returned.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private failure: InputError | undefined;
  /** Lengths of the frame whose prefix was read and whose body is awaited. */
  private next: { bodyBytes: number; headerBytes: number } | undefined;

  /** Bytes received and not yet returned (a partial prefix, or the awaited body so far). */
  get pendingBytes(): number {
    return this.buffered;
  }

  /** The fatal framing error, once one was seen. */
  get failed(): InputError | undefined {
    return this.failure;
  }

  /** Adds bytes; returns every frame they complete, in order. */
  push(chunk: Uint8Array): DecodedFrame[] {
    if (this.failure !== undefined) return [];
    if (chunk.byteLength > 0) {
      this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      this.buffered += chunk.byteLength;
    }
    const out: DecodedFrame[] = [];
    for (;;) {
      if (this.next === undefined) {
        if (this.buffered < PREFIX_BYTES) break;
        const prefix = this.take(PREFIX_BYTES);
        const bodyBytes = prefix.readUInt32BE(0);
        const headerBytes = prefix.readUInt32BE(4);
        const problem = framingProblem(bodyBytes, headerBytes);
        if (problem !== undefined) {
          this.failure = problem;
          this.chunks = [];
          this.buffered = 0;
          out.push({ kind: 'fatal', error: problem });
          break;
        }
        this.next = { bodyBytes, headerBytes };
      }
      // The prefix is consumed as soon as it is whole, so waiting for a long body costs nothing per chunk.
      const { bodyBytes, headerBytes } = this.next;
      if (this.buffered < bodyBytes) break;
      this.next = undefined;
      const body = this.take(bodyBytes);
      out.push(parseFrame(body.subarray(0, headerBytes), body.subarray(headerBytes)));
    }
    return out;
  }

  /** Removes and returns the next `n` buffered bytes (a view when they sit in one chunk). */
  private take(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    let whole: Buffer;
    let used = 0;
    if (first.length >= n) {
      whole = first.subarray(0, n);
      if (first.length === n) used = 1;
      else this.chunks[0] = first.subarray(n);
    } else {
      whole = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const c = this.chunks[used] as Buffer;
        const part = Math.min(c.length, n - filled);
        c.copy(whole, filled, 0, part);
        filled += part;
        if (part === c.length) used += 1;
        else this.chunks[used] = c.subarray(part);
      }
    }
    // One splice per frame, not one shift per chunk: a frame arriving in many tiny chunks stays linear.
    if (used > 0) this.chunks.splice(0, used);
    this.buffered -= n;
    return whole;
  }
}

function framingProblem(bodyBytes: number, headerBytes: number): InputError | undefined {
  if (bodyBytes > MAX_FRAME_BYTES) {
    return new InputError(
      'LIMIT_EXCEEDED',
      `frame of ${bodyBytes} bytes is over the ${MAX_FRAME_BYTES}-byte limit; the stream was closed`,
      {
        data: { frameBytes: bodyBytes, limit: MAX_FRAME_BYTES },
      },
    );
  }
  if (headerBytes > MAX_HEADER_BYTES) {
    return new InputError('LIMIT_EXCEEDED', `frame header of ${headerBytes} bytes is over the ${MAX_HEADER_BYTES}-byte limit`, {
      data: { headerBytes, limit: MAX_HEADER_BYTES },
    });
  }
  if (headerBytes <= bodyBytes && bodyBytes - headerBytes > MAX_PAYLOAD_BYTES) {
    return new InputError(
      'LIMIT_EXCEEDED',
      `frame payload of ${bodyBytes - headerBytes} bytes is over the ${MAX_PAYLOAD_BYTES}-byte limit`,
      {
        data: { payloadBytes: bodyBytes - headerBytes, limit: MAX_PAYLOAD_BYTES },
      },
    );
  }
  if (headerBytes > bodyBytes) {
    return new InputError('INVALID_INPUT', `frame lengths are inconsistent (body ${bodyBytes}, header ${headerBytes})`, {
      data: { frameBytes: bodyBytes, headerBytes },
    });
  }
  return undefined;
}

function parseFrame(headerBytes: Buffer, payload: Buffer): DecodedFrame {
  let header: unknown;
  try {
    header = JSON.parse(utf8.decode(headerBytes));
  } catch (error) {
    return { kind: 'malformed', error: new InputError('INVALID_INPUT', 'frame header is not UTF-8 JSON', { cause: error }) };
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    return { kind: 'malformed', error: new InputError('INVALID_INPUT', 'frame header is not a JSON object') };
  }
  return { kind: 'frame', frame: { header: header as Record<string, unknown>, payload } };
}
