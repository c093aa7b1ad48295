/**
 * The bytes of a work-folder file over HTTP: a streamed download with the headers that keep
 * a browser from running or sniffing it, single byte ranges, and the raw upload body as the
 * async iterable `Folders.write` takes, bounded while it streams.
 */
import type { Context } from 'hono';
import { HoldfastError } from '../../errors.js';
import type { FolderEntry, FolderRef, Folders } from '../../folders/folders.js';
import type { AppEnv } from '../app-env.js';

/**
 * What every download carries: never cached by a shared cache, never sniffed into something
 * executable, and rendered (if a browser is told to) in a sandbox with no origin and no
 * sub-resources. The file is always an attachment: its bytes are someone else's.
 */
export const DOWNLOAD_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cache-control': 'private, no-store',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "sandbox; default-src 'none'",
  'accept-ranges': 'bytes',
});

/**
 * A stored content type is served as is only when it is a well-formed `type/subtype` with
 * plain `; name=value` parameters (`text/plain; charset=utf-8`); anything else is served as
 * {@link FALLBACK_CONTENT_TYPE}, so no stored string is ever interpreted as more than a type.
 */
const SERVABLE_CONTENT_TYPE =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(?: *; *[A-Za-z0-9!#$&^_.+-]{1,64}=[A-Za-z0-9!#$&^_.+-]{1,64})*$/;
/** What a file without a servable content type is served as. */
const FALLBACK_CONTENT_TYPE = 'application/octet-stream';
/** `bytes=START-END`, `bytes=START-` or `bytes=-SUFFIX`: one range, RFC 9110 §14.1.2. */
const SINGLE_RANGE = /^bytes=(?:(\d{1,16})-(\d{0,16})|-(\d{1,16}))$/;
/** The longest ASCII fallback filename sent. */
const MAX_FALLBACK_FILENAME_CHARS = 128;

/** A parsed `Range` header: bytes from `start`, through `end` when given; or the last `suffix` bytes. */
export type RequestedRange = { readonly start: number; readonly end?: number } | { readonly suffix: number };

/**
 * The one byte range `header` asks for, or `undefined` when there is none or it is not a
 * single range this route serves (RFC 9110 lets a server ignore such a Range and send all).
 */
export function parseRange(header: string | undefined): RequestedRange | undefined {
  const match = header === undefined ? null : SINGLE_RANGE.exec(header.trim());
  if (match === null) return undefined;
  const [, start, end, suffix] = match;
  if (suffix !== undefined) return { suffix: Number(suffix) };
  const from = Number(start);
  if (end === undefined || end === '') return { start: from };
  const to = Number(end);
  // `bytes=5-2` is syntactically invalid (RFC 9110 §14.1.1): ignored, the whole file is sent.
  return to < from ? undefined : { start: from, end: to };
}

/**
 * `range` against a file of `size` bytes: `{offset, length}` to serve, or `null` when it
 * cannot be satisfied (416). A suffix longer than the file is the whole file; an end past
 * the file is clipped.
 */
export function resolveRange(range: RequestedRange, size: number): { offset: number; length: number } | null {
  if ('suffix' in range) {
    if (range.suffix === 0 || size === 0) return null;
    const length = Math.min(range.suffix, size);
    return { offset: size - length, length };
  }
  if (range.start >= size) return null;
  const last = Math.min(range.end ?? size - 1, size - 1);
  return { offset: range.start, length: last - range.start + 1 };
}

/**
 * `Content-Disposition: attachment` for a file at `path`: its last segment, as an ASCII
 * fallback (anything outside a safe set becomes `_`, so no quote, backslash, control or
 * separator reaches the header) and exactly as UTF-8 (RFC 8187, percent-encoded).
 */
export function attachmentDisposition(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const fallback = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, MAX_FALLBACK_FILENAME_CHARS) || 'download';
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

/** Headers describing the stored row (so a client round-trips what it uploaded). */
function entryHeaders(entry: FolderEntry): Record<string, string> {
  const type = entry.contentType !== null && SERVABLE_CONTENT_TYPE.test(entry.contentType) ? entry.contentType : FALLBACK_CONTENT_TYPE;
  return {
    ...DOWNLOAD_HEADERS,
    'content-type': type,
    'content-disposition': attachmentDisposition(entry.path),
    'x-file-executable': String(entry.executable),
    ...(entry.sha256 === null ? {} : { etag: `"${entry.sha256}"`, 'x-file-sha256': entry.sha256 }),
  };
}

/** Stops an opened body that will not be read, so whatever it holds open is released. */
async function discard(body: AsyncIterable<Uint8Array>): Promise<void> {
  await body[Symbol.asyncIterator]().return?.();
}

/**
 * The response for `GET …/content`: the whole file (200) or the one range asked (206 with
 * `Content-Range`), 416 with `Content-Range: bytes *\/SIZE` when the range lies past the end.
 * The first chunk is read before the answer starts, so a missing object or a corrupt first
 * chunk is an error status; a later corrupt chunk (`INTEGRITY`) cuts the stream short, and
 * the client sees fewer bytes than `Content-Length` promised.
 */
export async function downloadResponse(c: Context<AppEnv>, folders: Folders, ref: FolderRef, path: string): Promise<Response> {
  const rangeHeader = c.req.header('range');
  const wanted = parseRange(rangeHeader);
  if (wanted === undefined) {
    const opened = await folders.open(ref, path);
    return streamed(opened.body, 200, { ...entryHeaders(opened.entry), 'content-length': String(opened.entry.size) });
  }
  // The size decides the range; the body of this first open is never read.
  const probe = await folders.open(ref, path);
  await discard(probe.body);
  const range = resolveRange(wanted, probe.entry.size);
  if (range === null) {
    c.header('content-range', `bytes */${probe.entry.size}`);
    throw new HoldfastError('RANGE_NOT_SATISFIABLE', `range ${rangeHeader ?? ''} lies outside the file (${probe.entry.size} bytes)`, {
      data: { size: probe.entry.size },
    });
  }
  const opened = await folders.open(ref, path, { range });
  const served = opened.range ?? { offset: 0, length: opened.entry.size };
  const last = served.offset + served.length - 1;
  return streamed(opened.body, 206, {
    ...entryHeaders(opened.entry),
    'content-length': String(served.length),
    'content-range': `bytes ${served.offset}-${last}/${opened.entry.size}`,
  });
}

async function streamed(body: AsyncIterable<Uint8Array>, status: number, headers: Record<string, string>): Promise<Response> {
  const chunks = body[Symbol.asyncIterator]();
  const first = await chunks.next();
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      if (first.done !== true) controller.enqueue(first.value);
      else controller.close();
    },
    async pull(controller) {
      if (first.done === true) return;
      const next = await chunks.next();
      if (next.done === true) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await chunks.return?.();
    },
  });
  return new Response(stream, { status, headers });
}

/** `application/octet-stream`, with any parameters; the only body an upload takes. */
const OCTET_STREAM = /^application\/octet-stream\s*(?:;|$)/i;

/** Throws `UNSUPPORTED_MEDIA_TYPE` (415) unless the request declares a raw octet-stream body. */
export function requireOctetStream(c: Context<AppEnv>): void {
  const type = c.req.header('content-type') ?? '';
  if (OCTET_STREAM.test(type)) return;
  throw new HoldfastError('UNSUPPORTED_MEDIA_TYPE', 'upload the raw bytes with Content-Type: application/octet-stream', {
    data: { contentType: type.slice(0, 100) },
  });
}

/**
 * The request body as chunks, read as `Folders.write` pulls them: never buffered whole. The
 * body-limit middleware in front bounds it while it streams; a client that disconnects
 * mid-body makes the iteration reject, which `Folders.write` turns into nothing published.
 */
export async function* requestChunks(c: Context<AppEnv>): AsyncGenerator<Uint8Array> {
  const body = c.req.raw.body;
  if (body === null) return;
  const reader = body.getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return;
      }
      yield value;
    }
  } finally {
    // Stopped early (a limit, a mismatch, an error downstream): stop receiving the rest.
    if (!finished) await reader.cancel().catch(() => undefined);
  }
}
