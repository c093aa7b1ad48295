import fs from 'node:fs';
import path from 'node:path';
import type { ReadEntry } from 'tar';
import { MAX_NAME_BYTES } from '../core/paths.js';
import { HoldfastError, InputError, isHoldfastError } from '../errors.js';
import { INFLATE_RATIO_SLACK_BYTES, inflateUpload, MAX_INFLATE_RATIO } from './bundle-inflate.js';
import { BUNDLE_MTIME_MS, finishDir, MAX_BUNDLE_ENTRIES, refuse } from './bundle-staging.js';
import { MAX_TAR_TRAILING_ZERO_BYTES, TarReader } from './bundle-tar-reader.js';

/** Bounds of one tar upload, each checked while it streams. */
export interface BundleTarLimits {
  /** Entries (files, directories, symlinks, hard links). */
  readonly maxEntries: number;
  /** Bytes of all files once extracted (a compressed upload is bounded by what it expands to). */
  readonly maxBytes: number;
  /** Bytes of one entry's path (names are at most 255 bytes each besides). */
  readonly maxPathBytes: number;
  /**
   * Bytes the upload may inflate to in all, archive structure and padding included (every
   * byte read counts, whatever entry it belongs to); default {@link maxInflatedBytes}.
   */
  readonly maxInflatedBytes?: number;
}

/** Default {@link BundleTarLimits}. */
export const DEFAULT_BUNDLE_TAR_LIMITS: BundleTarLimits = Object.freeze({
  maxEntries: 10_000,
  maxBytes: 512 * 1024 * 1024,
  maxPathBytes: 1024,
});

const FILE_TYPES: ReadonlySet<string> = new Set(['File', 'OldFile', 'ContiguousFile']);
/** Metadata entries (the reader applies them itself; one handed on is skipped): they describe other entries and are never written. */
const META_TYPES: ReadonlySet<string> = new Set([
  'GlobalExtendedHeader',
  'ExtendedHeader',
  'OldExtendedHeader',
  'NextFileHasLongPath',
  'NextFileHasLongLinkpath',
  'OldGnuLongPath',
]);
const WRITE_FLAGS = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;
const MODE_BITS = 0o777;

type Kind = 'dir' | 'file' | 'symlink';

/**
 * Bytes of archive structure an entry may add to what it extracts to: its header, a pax or GNU
 * long-name header and the padding of both bodies. With {@link BundleTarLimits.maxBytes} and
 * `maxEntries` it gives the default {@link BundleTarLimits.maxInflatedBytes}.
 */
export const TAR_OVERHEAD_BYTES_PER_ENTRY = 8 * 1024;

/**
 * The bytes a tar upload with `limits` may inflate to in all: what its files may extract to,
 * plus {@link TAR_OVERHEAD_BYTES_PER_ENTRY} per entry and the end-of-archive padding
 * (`limits.maxInflatedBytes` when it names one). 512 MiB + 80 MiB + 1 MiB by default.
 */
export function maxInflatedBytes(limits: BundleTarLimits): number {
  return limits.maxInflatedBytes ?? limits.maxBytes + limits.maxEntries * TAR_OVERHEAD_BYTES_PER_ENTRY + MAX_TAR_TRAILING_ZERO_BYTES;
}

/**
 * Extracts a tar stream (plain, gzip or zstd, recognised by their magic numbers) into `dest`, a
 * directory that must not exist yet and is created fresh, strictly: an absolute path, a `..`
 * segment, an empty segment, a control character, a symlink or hard link leading outside the
 * archive, a device, FIFO or any other special entry, an entry that would go through or replace
 * an earlier symlink or file, a malformed archive, or anything but zero padding after the
 * end-of-archive (`data.reason` `trailing-data`) is `INVALID_INPUT`; more entries, bytes or
 * path bytes than `limits` allow, or an upload inflating past {@link maxInflatedBytes} or past
 * {@link MAX_INFLATE_RATIO} times its compressed size (plus {@link INFLATE_RATIO_SLACK_BYTES}),
 * is `LIMIT_EXCEEDED`. `data` names the entry (`path`, `reason`, `rule`). Nothing is ever
 * written outside `dest`: every file is created with `O_EXCL | O_NOFOLLOW` below directories
 * this call made. The stream is read as it arrives (never held whole), each byte once; reading
 * stops at the end-of-archive's padding and is abandoned at the first refusal or when `signal`
 * aborts (then it rejects with the signal's reason), the decompressor destroyed and the source
 * iterator returned. The event loop gets a turn between chunks. Modes keep permission bits
 * only; mtimes are the bundle's fixed one. `dest` is left as far as it got on failure: the
 * caller's staging directory removes it.
 */
export async function extractBundleTar(
  chunks: AsyncIterable<Uint8Array>,
  dest: string,
  limits: BundleTarLimits = DEFAULT_BUNDLE_TAR_LIMITS,
  signal?: AbortSignal,
): Promise<{ entries: number; bytes: number }> {
  signal?.throwIfAborted();
  fs.mkdirSync(dest, { mode: 0o700 });
  const state = new TarState(dest, limits);
  const reader = new TarReader((entry) => state.add(entry));
  const bounds = { maxInflatedBytes: maxInflatedBytes(limits), maxRatio: MAX_INFLATE_RATIO, ratioSlackBytes: INFLATE_RATIO_SLACK_BYTES };
  try {
    for await (const chunk of inflateUpload(chunks, bounds, signal)) {
      reader.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    }
    reader.end();
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw asInputError(error);
  } finally {
    state.closeOpen();
  }
  if (state.entries === 0)
    throw new InputError('INVALID_INPUT', 'the upload holds no tar entries: send a tar archive of the bundle directory', { data: {} });
  state.finish();
  return { entries: state.entries, bytes: state.bytes };
}

/** What has been extracted so far, by relative path. */
class TarState {
  readonly kinds = new Map<string, Kind>();
  private readonly dirModes = new Map<string, number>();
  private open: number | undefined;
  entries = 0;
  bytes = 0;

  constructor(
    private readonly root: string,
    private readonly limits: BundleTarLimits,
  ) {}

  add(entry: ReadEntry): void {
    if (META_TYPES.has(entry.type)) {
      entry.resume();
      return;
    }
    const rel = this.checkedPath(entry.path);
    this.entries += 1;
    if (this.entries > this.limits.maxEntries || this.entries > MAX_BUNDLE_ENTRIES) {
      throw refuse('LIMIT_EXCEEDED', rel, 'entry-limit', `${this.limits.maxEntries} entries`);
    }
    const mode = (entry.mode ?? 0o644) & MODE_BITS;
    if (entry.type === 'Directory') {
      this.addDir(rel, mode, entry);
      return;
    }
    if (rel === '') throw refuse('INVALID_INPUT', rel, 'invalid-path', 'the archive root must be a directory');
    this.makeParents(rel);
    if (this.kinds.has(rel)) throw refuse('INVALID_INPUT', rel, 'invalid-path', 'the archive holds this path twice');
    const abs = path.join(this.root, rel);
    if (FILE_TYPES.has(entry.type)) this.addFile(rel, abs, mode, entry);
    else if (entry.type === 'SymbolicLink') this.addSymlink(rel, abs, entry);
    else if (entry.type === 'Link') this.addHardLink(rel, abs, entry);
    else throw refuse('INVALID_INPUT', rel, 'special-file', `${entry.type} entries are not part of a bundle`);
  }

  private addDir(rel: string, mode: number, entry: ReadEntry): void {
    entry.resume();
    if (rel !== '') {
      this.makeParents(rel);
      const kind = this.kinds.get(rel);
      if (kind !== undefined && kind !== 'dir') throw refuse('INVALID_INPUT', rel, 'invalid-path', 'the archive holds this path twice');
      if (kind === undefined) this.mkdir(rel);
    }
    this.dirModes.set(rel, mode);
  }

  private addFile(rel: string, abs: string, mode: number, entry: ReadEntry): void {
    if (this.bytes + entry.size > this.limits.maxBytes)
      throw refuse('LIMIT_EXCEEDED', rel, 'too-large', `${this.limits.maxBytes} bytes in all`);
    this.bytes += entry.size;
    const fd = fs.openSync(abs, WRITE_FLAGS, 0o600);
    this.open = fd;
    this.kinds.set(rel, 'file');
    entry.on('data', (chunk: Buffer) => {
      if (this.open === fd) fs.writeSync(fd, chunk);
    });
    entry.on('end', () => {
      if (this.open !== fd) return;
      this.open = undefined;
      fs.fchmodSync(fd, mode);
      fs.futimesSync(fd, BUNDLE_MTIME_MS / 1000, BUNDLE_MTIME_MS / 1000);
      fs.closeSync(fd);
    });
  }

  private addSymlink(rel: string, abs: string, entry: ReadEntry): void {
    entry.resume();
    const target = entry.linkpath ?? '';
    const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(rel), target));
    if (target === '' || target.startsWith('/') || target.includes('\0') || resolved === '..' || resolved.startsWith('../')) {
      throw refuse('INVALID_INPUT', rel, 'symlink-escape', `-> ${target.slice(0, 200)}`);
    }
    fs.symlinkSync(target, abs);
    fs.lutimesSync(abs, BUNDLE_MTIME_MS / 1000, BUNDLE_MTIME_MS / 1000);
    this.kinds.set(rel, 'symlink');
  }

  /** A hard link is taken as a copy of a file extracted before it; anything else it names is refused. */
  private addHardLink(rel: string, abs: string, entry: ReadEntry): void {
    entry.resume();
    const target = this.checkedPath(entry.linkpath ?? '');
    if (this.kinds.get(target) !== 'file')
      throw refuse('INVALID_INPUT', rel, 'symlink-escape', `hard link to ${target.slice(0, 200)}, not a file before it`);
    const size = fs.statSync(path.join(this.root, target)).size;
    if (this.bytes + size > this.limits.maxBytes) throw refuse('LIMIT_EXCEEDED', rel, 'too-large', `${this.limits.maxBytes} bytes in all`);
    this.bytes += size;
    fs.copyFileSync(path.join(this.root, target), abs, fs.constants.COPYFILE_EXCL);
    this.kinds.set(rel, 'file');
  }

  /** The entry's path, relative and clean (`./` prefixes and a trailing `/` dropped; `''` is the root), or a refusal. */
  private checkedPath(raw: string): string {
    const shown = raw.slice(0, 200);
    if (Buffer.byteLength(raw) > this.limits.maxPathBytes)
      throw refuse('LIMIT_EXCEEDED', shown, 'invalid-path', `paths of at most ${this.limits.maxPathBytes} bytes`);
    if (raw.startsWith('/')) throw refuse('INVALID_INPUT', shown, 'invalid-path', 'absolute path');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
    if (/[\u0000-\u001f\u007f]/.test(raw)) throw refuse('INVALID_INPUT', shown, 'invalid-path', 'control character');
    const segments = raw.split('/');
    while (segments[0] === '.' && segments.length > 1) segments.shift();
    if (segments.at(-1) === '') segments.pop();
    if (segments.length === 1 && segments[0] === '.') return '';
    for (const s of segments) {
      if (s === '..') throw refuse('INVALID_INPUT', shown, 'invalid-path', '.. segment');
      if (s === '' || s === '.') throw refuse('INVALID_INPUT', shown, 'invalid-path', 'empty or . segment');
      if (Buffer.byteLength(s) > MAX_NAME_BYTES)
        throw refuse('INVALID_INPUT', shown, 'invalid-path', `names of at most ${MAX_NAME_BYTES} bytes`);
    }
    return segments.join('/');
  }

  /** Makes the missing parents of `rel`; a parent that is a file or a symlink is refused (nothing goes through a link). */
  private makeParents(rel: string): void {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i += 1) {
      const prefix = parts.slice(0, i).join('/');
      const kind = this.kinds.get(prefix);
      if (kind === 'dir') continue;
      if (kind !== undefined) throw refuse('INVALID_INPUT', rel, 'symlink-escape', `${prefix} is a ${kind}, not a directory`);
      this.mkdir(prefix);
    }
  }

  private mkdir(rel: string): void {
    fs.mkdirSync(path.join(this.root, rel), { mode: 0o700 });
    this.kinds.set(rel, 'dir');
  }

  /** Closes a file left open by an abandoned stream. */
  closeOpen(): void {
    if (this.open === undefined) return;
    fs.closeSync(this.open);
    this.open = undefined;
  }

  /** Directory modes and mtimes, deepest first (each after its children changed it). */
  finish(): void {
    const dirs = [...this.kinds].filter(([, k]) => k === 'dir').map(([p]) => p);
    dirs.sort((a, b) => b.split('/').length - a.split('/').length);
    for (const rel of dirs) finishDir(path.join(this.root, rel), this.dirModes.get(rel) ?? 0o755);
    finishDir(this.root, this.dirModes.get('') ?? 0o755);
  }
}

/** A refusal as it is; a parser or stream failure as `INVALID_INPUT` (a transport or store error passes through). */
function asInputError(error: unknown): unknown {
  if (error instanceof HoldfastError || isHoldfastError(error)) return error;
  const code = (error as { code?: unknown }).code;
  return new InputError('INVALID_INPUT', 'the upload is not a valid tar archive: send `tar -c -C DIR .` (plain, gzip or zstd)', {
    data: { reason: 'not-a-tar', ...(typeof code === 'string' ? { rule: code } : {}) },
    cause: error,
  });
}
