import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Sha256Hex } from '../../core/hash.js';
import { permissionBits } from '../../core/modes.js';
import type { FileEntry } from '../../core/tree.js';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import { SINGLE_CHUNK_BYTES } from '../../objects/content-workers.js';
import type { ObjectReader } from '../../objects/object-reader.js';
import type { LongPaths } from '../../workspace-fs/long-paths.js';
import type { StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import type { FlatTree } from '../tree-walk.js';
import type { OldCopy, OldFile } from './old-copy.js';
import type { OldFiles } from './old-files.js';
import { learnContent, readChunk } from './old-files.js';
import { writeAll } from './restore-files.js';

type File = FileEntry & { readonly path: string };

/** Chunks fetched per read while a file is assembled from old chunks and fetched ones. */
const FETCH_CHUNKS = 16;
const COPY_BLOCK_BYTES = 4 * 1024 * 1024;

/** How the restore creates and completes one file in staging (its own rules for modes, times and the stat cache). */
export interface FileWriter {
  /** Creates `file` in staging (exclusive, no symlink followed) and returns a writable descriptor. */
  open(file: File): number;
  /** Checks `digest` against `file.sha256` (`INTEGRITY` otherwise), applies mode and mtime, records the file in the new stat cache. */
  finish(fd: number, file: File, digest: Sha256Hex): void;
}

/** What was built in staging from the previous copy. */
export interface LocalReuse {
  /** Files complete in staging: linked, copied or assembled; the restore writes every other file. */
  readonly done: Set<string>;
  /** Files whose bytes all came from the previous copy (linked or copied). */
  readonly filesReused: number;
  /** Bytes read from the previous copy and written anew (copies and old chunks of changed files). */
  readonly bytesCopiedLocally: number;
  /** Raw bytes fetched from the store for chunks of changed files the previous copy lacks. */
  readonly bytesFetched: number;
  /** Files that are hard links to old inodes, for {@link recordLinks}. */
  readonly linked: ReadonlyArray<{ readonly file: File; readonly ino: number }>;
}

/** What {@link reuseOldCopy} works with. */
export interface ReuseContext {
  readonly flat: FlatTree;
  readonly old: OldCopy;
  readonly oldFiles: OldFiles;
  readonly long: LongPaths;
  readonly staging: string;
  readonly reader: ObjectReader;
  readonly meta: Pick<MetadataStore, 'objects'>;
  readonly writer: FileWriter;
  readonly signal?: AbortSignal | undefined;
}

/** Where a chunk's bytes lie in an old file. */
interface ChunkPlace {
  readonly file: OldFile;
  readonly offset: number;
  readonly length: number;
}

/**
 * Builds in staging every file of `flat` that the previous copy at the target can supply, by
 * content rather than by path: a renamed file or directory is found by its SHA-256 wherever
 * it now lies, and a changed large file takes its unchanged FastCDC chunks from the old file
 * (read at their offsets, each checked against its chunk id) and fetches only the rest.
 *
 * A file whose content, mode and mtime match an old inode that has no other link is
 * hard-linked to it (once: the link itself gives the inode a second one); otherwise its
 * bytes are copied from an old file with that content, hashed as they are copied. Links never
 * change the old inode and copies only read it, so a failed restore leaves the target as it
 * was. Old files are reached only through {@link OldFiles} (no symlink followed, still the
 * walked inode), a link must name the very inode that was opened, and nothing read from the
 * old copy is written unless its hash is the one the checkpoint records: bytes changed since
 * the stat cache was written are fetched instead. Hard-link members (`hardlink`) are left to
 * the restore, which links them to their leader.
 */
export async function reuseOldCopy(ctx: ReuseContext): Promise<LocalReuse> {
  const state = new ReuseState(ctx);
  for (const file of ctx.flat.files) {
    if (file.hardlink !== undefined) continue;
    ctx.signal?.throwIfAborted();
    if (state.whole(file) || (file.chunks.length > 1 && (await state.assemble(file)))) state.done.add(file.path);
  }
  return state;
}

class ReuseState implements LocalReuse {
  readonly done = new Set<string>();
  filesReused = 0;
  bytesCopiedLocally = 0;
  bytesFetched = 0;
  readonly linked: Array<{ file: File; ino: number }> = [];
  /** Old files by known content. */
  private readonly bySha = new Map<Sha256Hex, OldFile[]>();
  /** Old files of unknown content by size: hashed only when a file of that size finds no match. */
  private readonly bySize = new Map<number, OldFile[]>();
  private chunkPlaces: Map<Sha256Hex, ChunkPlace> | undefined;

  constructor(private readonly ctx: ReuseContext) {
    for (const o of ctx.old.files.values()) {
      if (o.sha256 !== undefined) this.index(o);
      else {
        const list = this.bySize.get(o.size);
        if (list === undefined) this.bySize.set(o.size, [o]);
        else list.push(o);
      }
    }
  }

  /** Links or copies `file` whole from an old file with its content; false when there is none. */
  whole(file: File): boolean {
    const same = this.ctx.old.files.get(file.path);
    if (same !== undefined && same.sha256 === undefined && same.size === file.size) this.hash(same);
    let candidates = this.bySha.get(file.sha256);
    if (candidates === undefined) {
      for (const o of this.bySize.get(file.size) ?? []) if (o.sha256 === undefined) this.hash(o);
      this.bySize.delete(file.size);
      candidates = this.bySha.get(file.sha256);
    }
    if (candidates === undefined) return false;
    // The same path first: it is the likeliest to carry the right mode and mtime.
    const ordered = same !== undefined && candidates.includes(same) ? [same, ...candidates.filter((o) => o !== same)] : candidates;
    for (const o of ordered) if (this.link(o, file)) return true;
    for (const o of ordered) if (this.copy(o, file)) return true;
    return false;
  }

  /** Writes a changed multi-chunk file from old chunks where they are found, fetching the rest; false when none is found. */
  async assemble(file: File): Promise<boolean> {
    // The file edited in place is the likeliest to hold the unchanged chunks, even with another size.
    const same = this.ctx.old.files.get(file.path);
    if (same !== undefined && same.sha256 === undefined && same.size >= SINGLE_CHUNK_BYTES) this.hash(same);
    const places = await this.places();
    if (!file.chunks.some((id) => places.has(id))) return false;
    const fds = new Map<OldFile, number | undefined>();
    const out = this.ctx.writer.open(file);
    try {
      const hash = createHash('sha256');
      const put = (bytes: Uint8Array): void => {
        hash.update(bytes);
        writeAll(out, bytes);
      };
      for (let i = 0; i < file.chunks.length; ) {
        const id = file.chunks[i] as Sha256Hex;
        const local = this.readPlace(places.get(id), id, fds);
        if (local !== undefined) {
          put(local);
          this.bytesCopiedLocally += local.byteLength;
          i += 1;
          continue;
        }
        // This chunk and the next ones the old copy lacks, in one read.
        let end = i + 1;
        while (end < file.chunks.length && end - i < FETCH_CHUNKS && !places.has(file.chunks[end] as Sha256Hex)) end += 1;
        const ids = file.chunks.slice(i, end);
        const got = await this.ctx.reader.readMany(ids);
        for (const c of got.values()) this.bytesFetched += c.byteLength;
        for (const chunk of ids) put(got.get(chunk) as Uint8Array);
        i = end;
      }
      // Every piece was checked against its chunk id; the whole-file hash is checked once more by the writer.
      this.ctx.writer.finish(out, file, hash.digest('hex'));
    } finally {
      fs.closeSync(out);
      for (const fd of fds.values()) if (fd !== undefined) fs.closeSync(fd);
    }
    return true;
  }

  private index(o: OldFile): void {
    const list = this.bySha.get(o.sha256 as Sha256Hex);
    if (list === undefined) this.bySha.set(o.sha256 as Sha256Hex, [o]);
    else list.push(o);
  }

  /** Hashes an old file of unknown content, then knows it by that content. */
  private hash(o: OldFile): void {
    if (learnContent(o, this.ctx.oldFiles)) this.index(o);
  }

  private link(o: OldFile, file: File): boolean {
    if (o.special || o.mode !== file.mode || Math.floor(o.mtimeMs) !== file.mtimeMs) return false;
    const fd = this.ctx.oldFiles.open(o);
    if (fd === undefined) return false;
    try {
      // A second link would make the restored tree share an inode the checkpoint does not share.
      const st = fs.fstatSync(fd);
      if (st.nlink !== 1) return false;
      const to = this.ctx.long.at(`${this.ctx.staging}/${file.path}`);
      fs.linkSync(this.ctx.oldFiles.at(o.path), to);
      const linked = fs.lstatSync(to);
      if (linked.ino !== st.ino || linked.dev !== st.dev) {
        // The path was swapped between the check and the link: drop the link, write the file afresh.
        fs.unlinkSync(to);
        return false;
      }
      o.ctimeMs = linked.ctimeMs;
      this.linked.push({ file, ino: st.ino });
      this.filesReused += 1;
      return true;
    } finally {
      fs.closeSync(fd);
    }
  }

  private copy(o: OldFile, file: File): boolean {
    const fd = this.ctx.oldFiles.open(o);
    if (fd === undefined) return false;
    let out: number | undefined;
    try {
      out = this.ctx.writer.open(file);
      const hash = createHash('sha256');
      const block = Buffer.allocUnsafe(Math.min(COPY_BLOCK_BYTES, Math.max(1, file.size)));
      for (let at = 0; ; ) {
        const n = fs.readSync(fd, block, 0, block.length, at);
        if (n === 0) break;
        hash.update(block.subarray(0, n));
        writeAll(out, block.subarray(0, n));
        at += n;
      }
      const digest = hash.digest('hex');
      if (digest !== file.sha256) {
        // Changed since it was known: this copy is dropped and the file is written from elsewhere.
        fs.closeSync(out);
        out = undefined;
        fs.unlinkSync(this.ctx.long.at(`${this.ctx.staging}/${file.path}`));
        return false;
      }
      this.ctx.writer.finish(out, file, digest);
      this.filesReused += 1;
      this.bytesCopiedLocally += file.size;
      return true;
    } finally {
      if (out !== undefined) fs.closeSync(out);
      fs.closeSync(fd);
    }
  }

  private readPlace(place: ChunkPlace | undefined, id: Sha256Hex, fds: Map<OldFile, number | undefined>): Buffer | undefined {
    if (place === undefined) return undefined;
    if (!fds.has(place.file)) fds.set(place.file, this.ctx.oldFiles.open(place.file));
    const fd = fds.get(place.file);
    return fd === undefined ? undefined : readChunk(fd, id, place.offset, place.length);
  }

  /** Where each chunk of the old multi-chunk files lies: offsets follow from the chunks' raw lengths in the object index. */
  private async places(): Promise<Map<Sha256Hex, ChunkPlace>> {
    if (this.chunkPlaces === undefined) {
      const places = new Map<Sha256Hex, ChunkPlace>();
      const multi = [...this.ctx.old.files.values()].filter((o) => o.layout === undefined && o.chunks !== undefined && o.chunks.length > 1);
      const ids = [...new Set(multi.flatMap((o) => o.chunks ?? []))];
      const located = ids.length === 0 ? new Map() : await this.ctx.meta.objects.locate(ids, { includeCondemned: true });
      for (const o of multi) {
        let offset = 0;
        const here: Array<[Sha256Hex, ChunkPlace]> = [];
        for (const id of o.chunks ?? []) {
          const length = located.get(id)?.rawLength;
          if (length === undefined) break;
          here.push([id, { file: o, offset, length }]);
          offset += length;
        }
        // Lengths that do not add up to the file's size describe some other file: none of them is used.
        if (offset === o.size && here.length === o.chunks?.length) for (const [id, place] of here) places.set(id, place);
      }
      this.chunkPlaces = places;
    }
    // Files cut since (hashed here, not known from the cache) carry their own layout.
    for (const o of this.ctx.old.files.values())
      for (const c of o.layout ?? [])
        if (!this.chunkPlaces.has(c.id)) this.chunkPlaces.set(c.id, { file: o, offset: c.offset, length: c.length });
    return this.chunkPlaces;
  }
}

/**
 * Records the hard-linked files in the new stat cache once the old copy is gone: linking and
 * the old copy's removal both change an inode's ctime, so an identity taken before would
 * never match again. A file is recorded only while it is still the linked inode with the
 * checkpoint's size, mode and mtime.
 */
export function recordLinks(reuse: LocalReuse, target: string, long: LongPaths, cache: StatCacheBuilder): void {
  for (const { file, ino } of reuse.linked) {
    const st = fs.lstatSync(long.at(`${target}/${file.path}`), { throwIfNoEntry: false });
    if (st === undefined || !st.isFile() || st.ino !== ino || st.size !== file.size || Math.floor(st.mtimeMs) !== file.mtimeMs) continue;
    if (permissionBits(st.mode) !== file.mode) continue;
    cache.add(file.path, {
      size: st.size,
      mtimeMs: st.mtimeMs,
      ctimeMs: st.ctimeMs,
      ino,
      mode: file.mode,
      sha256: file.sha256,
      chunks: file.chunks,
    });
  }
}
