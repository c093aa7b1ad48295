import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { HoldfastError, IntegrityError, isHoldfastError, NotFoundError, StoreError } from '../../errors.js';
import { assertBlobKey, assertBlobPrefix, assertByteRange, rangeOutOfBounds } from '../blob-key.js';
import type { BlobBody, BlobStat, BlobStore, ByteRange, PutOptions, PutResult } from '../blob-store.js';

/** Settings of the local-disk driver. */
export interface LocalDiskBlobStoreConfig {
  /** Root directory; created if missing. */
  readonly path: string;
  /** Temp files older than this are removed when the store opens (crashed writers). Default 1 h. */
  readonly staleTempAgeMs?: number;
}

/**
 * On-disk object files end with this character. It is outside the key alphabet, so an object
 * file (`a~`) can never collide with the directory of a longer key (`a/b~`), which S3
 * semantics allow.
 */
const OBJECT_SUFFIX = '~';
const TEMP_DIR = '.tmp';
const DEFAULT_STALE_TEMP_AGE_MS = 60 * 60 * 1000;

/**
 * BlobStore on a local directory. Keys map to paths (`packs/ab/abcdef…` ->
 * `ROOT/packs/ab/abcdef…~`), so the content-addressed keys fan out by their own prefix.
 * Writes go to `ROOT/.tmp`, are fsynced, then hard-linked into place (`link` fails on an
 * existing name, which makes create-only atomic even between processes) and the directory is
 * fsynced.
 */
export class LocalDiskBlobStore implements BlobStore {
  readonly name = 'local-disk';
  readonly root: string;
  /** Same as {@link LocalDiskBlobStore.root}: see {@link BlobStore.localPath}. */
  readonly localPath: string;
  private readonly tempDir: string;

  private constructor(root: string) {
    this.root = root;
    this.localPath = root;
    this.tempDir = path.join(root, TEMP_DIR);
  }

  /** Opens (creating if needed) a store rooted at `config.path` and sweeps stale temp files. */
  static async open(config: LocalDiskBlobStoreConfig): Promise<LocalDiskBlobStore> {
    const store = new LocalDiskBlobStore(path.resolve(config.path));
    try {
      await fs.mkdir(store.tempDir, { recursive: true });
    } catch (error) {
      throw store.storeError(`cannot create the store directory ${store.root}`, error);
    }
    await store.sweepTemp(config.staleTempAgeMs ?? DEFAULT_STALE_TEMP_AGE_MS);
    return store;
  }

  async put(key: string, body: BlobBody, options: PutOptions = {}): Promise<PutResult> {
    assertBlobKey(key);
    throwIfAborted(options.signal);
    const target = this.objectPath(key);
    if (await exists(target)) {
      discard(body);
      return { created: false, size: 0 };
    }
    const temp = path.join(this.tempDir, `${randomBytes(12).toString('hex')}.part`);
    try {
      const size = await writeDurably(temp, body, options.signal);
      if (options.expectedSize !== undefined && size !== options.expectedSize) {
        throw new IntegrityError('INTEGRITY', `[local-disk] ${key}: body has ${size} bytes, expected ${options.expectedSize}`, {
          data: { key, size, expectedSize: options.expectedSize },
        });
      }
      const created = await this.linkIntoPlace(temp, target);
      return { created, size: created ? size : 0 };
    } catch (error) {
      throw isHoldfastError(error) ? error : this.storeError(`cannot write ${key}`, error);
    } finally {
      await fs.rm(temp, { force: true });
    }
  }

  async get(key: string, range?: ByteRange): Promise<Uint8Array> {
    assertBlobKey(key);
    assertByteRange(range);
    const handle = await this.openObject(key);
    try {
      if (range === undefined) return await handle.readFile();
      const { size } = await handle.stat();
      const length = clampRange(key, range, size);
      const buffer = Buffer.allocUnsafe(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(buffer, filled, length - filled, range.offset + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return buffer.subarray(0, filled);
    } finally {
      await handle.close();
    }
  }

  async getStream(key: string, range?: ByteRange): Promise<Readable> {
    assertBlobKey(key);
    assertByteRange(range);
    const handle = await this.openObject(key);
    try {
      const { size } = await handle.stat();
      const start = range?.offset ?? 0;
      const length = range === undefined ? size : clampRange(key, range, size);
      if (length === 0) {
        await handle.close();
        return Readable.from([]);
      }
      return handle.createReadStream({ start, end: start + length - 1, autoClose: true });
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  async stat(key: string): Promise<BlobStat | undefined> {
    assertBlobKey(key);
    try {
      const st = await fs.stat(this.objectPath(key));
      return st.isFile() ? { key, size: st.size } : undefined;
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw this.storeError(`cannot stat ${key}`, error);
    }
  }

  async *list(prefix: string): AsyncIterable<BlobStat> {
    assertBlobPrefix(prefix);
    const cut = prefix.lastIndexOf('/') + 1;
    yield* this.walk(prefix.slice(0, cut), prefix.slice(cut));
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    const target = this.objectPath(key);
    try {
      await fs.unlink(target);
      await fsyncDir(path.dirname(target));
    } catch (error) {
      if (!isMissing(error)) throw this.storeError(`cannot delete ${key}`, error);
    }
  }

  async close(): Promise<void> {}

  /** Where the bytes of `key` live on disk. Only called with validated keys. */
  private objectPath(key: string): string {
    return path.join(this.root, ...key.split('/')) + OBJECT_SUFFIX;
  }

  private async openObject(key: string): Promise<fs.FileHandle> {
    try {
      return await fs.open(this.objectPath(key), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    } catch (error) {
      if (isMissing(error)) throw new NotFoundError(`[local-disk] no object ${key} in ${this.root}`, { data: { key } });
      throw this.storeError(`cannot read ${key}`, error);
    }
  }

  /** Links the finished temp file to `target`; false if `target` already existed. */
  private async linkIntoPlace(temp: string, target: string): Promise<boolean> {
    const dir = path.dirname(target);
    const firstCreated = await fs.mkdir(dir, { recursive: true });
    try {
      await fs.link(temp, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw error;
    }
    await fsyncDir(dir);
    // New directories must be durable in their parents too, up to the first one that existed.
    if (firstCreated !== undefined) {
      for (let d = dir; d !== path.dirname(firstCreated); d = path.dirname(d)) await fsyncDir(path.dirname(d));
    }
    return true;
  }

  /** Yields objects under `dir` (key prefix ending in `/` or empty) whose first name starts with `tail`. */
  private async *walk(dir: string, tail: string): AsyncGenerator<BlobStat> {
    let entries: Array<{ name: string; sortName: string; isDir: boolean }>;
    try {
      const dirents = await fs.readdir(path.join(this.root, dir), { withFileTypes: true });
      entries = [];
      for (const d of dirents) {
        if (d.name.startsWith('.')) continue;
        if (d.isDirectory()) entries.push({ name: d.name, sortName: `${d.name}/`, isDir: true });
        else if (d.isFile() && d.name.endsWith(OBJECT_SUFFIX)) {
          const name = d.name.slice(0, -OBJECT_SUFFIX.length);
          entries.push({ name, sortName: name, isDir: false });
        }
      }
    } catch (error) {
      if (isMissing(error)) return;
      throw this.storeError(`cannot list ${dir || '/'}`, error);
    }
    entries.sort((a, b) => Buffer.compare(Buffer.from(a.sortName), Buffer.from(b.sortName)));
    for (const entry of entries) {
      if (!entry.sortName.startsWith(tail)) continue;
      const key = dir + entry.name;
      if (entry.isDir) {
        yield* this.walk(`${key}/`, '');
        continue;
      }
      const stat = await this.stat(key);
      if (stat !== undefined) yield stat;
    }
  }

  private async sweepTemp(maxAgeMs: number): Promise<void> {
    const cutoff = Date.now() - maxAgeMs;
    for (const name of await fs.readdir(this.tempDir)) {
      const file = path.join(this.tempDir, name);
      const st = await fs.stat(file).catch(() => undefined);
      if (st !== undefined && st.mtimeMs < cutoff) await fs.rm(file, { force: true });
    }
  }

  private storeError(what: string, cause: unknown): StoreError {
    const code = (cause as NodeJS.ErrnoException | undefined)?.code;
    return new StoreError(`[local-disk] ${what} under ${this.root}: ${code ?? String(cause)}`, {
      cause,
      transient: code === 'EAGAIN' || code === 'EBUSY' || code === 'EMFILE' || code === 'ENFILE',
      data: { root: this.root, errno: code },
    });
  }
}

/** Writes `body` to a new file at `file` (O_EXCL), fsyncs it, and returns its length. */
async function writeDurably(file: string, body: BlobBody, signal: AbortSignal | undefined): Promise<number> {
  const handle = await fs.open(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o644);
  try {
    let size = 0;
    const chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array> = body instanceof Uint8Array ? [body] : body;
    for await (const chunk of chunks) {
      throwIfAborted(signal);
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      let written = 0;
      while (written < bytes.length) {
        const r = await handle.write(bytes, written, bytes.length - written);
        written += r.bytesWritten;
      }
      size += bytes.length;
    }
    throwIfAborted(signal);
    await handle.sync();
    return size;
  } finally {
    await handle.close();
  }
}

/** Bytes of `range` that exist in an object of `size` bytes; throws past the end. */
function clampRange(key: string, range: ByteRange, size: number): number {
  if (range.offset > size) throw rangeOutOfBounds(key, range, size);
  return Math.min(range.length, size - range.offset);
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.lstat(file);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new HoldfastError('CANCELLED', 'put cancelled', { cause: signal.reason });
}

/** Releases a stream body that will not be read, so its source does not hang. */
function discard(body: BlobBody): void {
  if (body instanceof Readable) body.destroy();
}
