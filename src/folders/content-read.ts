import { createHash } from 'node:crypto';
import type { BlobStore } from '../blob-store/blob-store.js';
import { IntegrityError } from '../errors.js';
import type { FolderFileRecord, MetadataStore } from '../metadata/metadata-store.js';
import { ObjectReader } from '../objects/object-reader.js';

/** Chunk bytes fetched per batched read; one batch is prefetched while the previous is consumed. */
export const READ_BATCH_BYTES = 16 * 1024 * 1024;

/**
 * Streams bytes `[offset, offset + length)` of `file`'s content, chunk batch by chunk batch,
 * one batch read ahead. Every chunk is verified by its id (`ObjectReader`); a whole-file read
 * is also checked against the row's SHA-256 before its last bytes are yielded. A missing
 * object is `RESTORE_INCOMPLETE`, damaged bytes `INTEGRITY`.
 */
export async function* readContent(
  deps: { readonly blobs: BlobStore; readonly meta: Pick<MetadataStore, 'objects'> },
  file: FolderFileRecord,
  offset: number,
  length: number,
): AsyncGenerator<Uint8Array> {
  const reader = new ObjectReader(deps.blobs, deps.meta);
  const chunks = file.chunks ?? [];
  const end = offset + length;
  const whole = offset === 0 && length === file.size ? createHash('sha256') : undefined;
  // The chunks overlapping the range, with where each starts in the file.
  const wanted: Array<{ id: string; at: number; len: number }> = [];
  let at = 0;
  for (const [id, len] of chunks) {
    if (at + len > offset && at < end) wanted.push({ id, at, len });
    at += len;
  }
  const batches: Array<typeof wanted> = [];
  for (let i = 0, bytes = 0; i < wanted.length; i += 1) {
    if (batches.length === 0 || bytes >= READ_BATCH_BYTES) {
      batches.push([]);
      bytes = 0;
    }
    batches.at(-1)?.push(wanted[i] as (typeof wanted)[number]);
    bytes += (wanted[i] as (typeof wanted)[number]).len;
  }
  const fetch = (i: number) => {
    const batch = batches[i];
    return batch === undefined ? undefined : reader.readMany(batch.map((c) => c.id));
  };
  let next = fetch(0);
  next?.catch(() => undefined);
  for (let i = 0; i < batches.length; i += 1) {
    const got = await (next as Promise<Map<string, Uint8Array>>);
    next = fetch(i + 1);
    next?.catch(() => undefined);
    for (const c of batches[i] as typeof wanted) {
      const raw = got.get(c.id) as Uint8Array;
      whole?.update(raw);
      const from = Math.max(0, offset - c.at);
      const to = Math.min(c.len, end - c.at);
      if (whole !== undefined && c === wanted.at(-1)) checkWhole(file, whole.digest('hex'));
      yield from === 0 && to === raw.byteLength ? raw : raw.subarray(from, to);
    }
  }
  if (whole !== undefined && wanted.length === 0) checkWhole(file, whole.digest('hex'));
}

function checkWhole(file: FolderFileRecord, sha256: string): void {
  if (sha256 === file.sha256) return;
  throw new IntegrityError('INTEGRITY', `${file.path} read back with SHA-256 ${sha256}, not the recorded ${file.sha256}`, {
    data: { fileId: file.id, path: file.path },
  });
}
