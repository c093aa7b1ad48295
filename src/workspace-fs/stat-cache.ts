import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSha256Hex, type Sha256Hex } from '../core/hash.js';
import { hasByteEscapes } from '../core/name-bytes.js';

/** A file modified this close to the scan's start is hashed again ("racy git"). */
export const RACY_WINDOW_MS = 1000;
const HEADER = 'holdfast-stat-cache 2';
const HEADER_PREFIX = `${HEADER}\t`;
/** Directory lines start with this byte, which no path can (control characters are refused). */
const DIR_MARK = '\u0001';

/** What the cache remembers about one file: its stat identity and its content ids. */
export interface StatCacheEntry {
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  readonly mode: number;
  readonly sha256: Sha256Hex;
  readonly chunks: readonly Sha256Hex[];
}

/** A cache hit: the entry plus its stored line, which the next cache reuses as it is. */
export interface StatCacheHit extends StatCacheEntry {
  readonly line: string;
}

/** The stat identity compared against a fresh `lstat`. */
export type StatIdentity = Pick<StatCacheEntry, 'size' | 'mtimeMs' | 'ctimeMs' | 'ino' | 'mode'>;

/** What identifies a directory's tree: its stat and the names a scan included in it. */
export interface DirIdentity {
  readonly exactMtimeMs: number;
  readonly ctimeMs: number;
  readonly mode: number;
  /** Hash of the included entry names, so a change in exclusion rules is noticed. */
  readonly namesHash: string;
}

/** Default directory for stat caches: `$HOLDFAST_CACHE_DIR`, else `~/.cache/holdfast`. */
export function defaultCacheDir(): string {
  return process.env.HOLDFAST_CACHE_DIR || path.join(os.homedir(), '.cache', 'holdfast');
}

/** The directory holding every stat cache under `cacheDir`. */
export function statCacheDir(cacheDir: string): string {
  return path.join(cacheDir, 'stat');
}

/** Lines a grown cache may hold beyond two per file of a scan before it is written afresh. */
const CACHE_SLACK_LINES = 1000;

/**
 * The checkpoint id in a cache file's last header (the checkpoint the cache describes, which
 * ties the file to the store that holds that checkpoint; a file grown by
 * {@link StatCacheBuilder.appendTo} has a header per growth), or `undefined` when the file is
 * missing, damaged (its first line is not a header) or of an older format.
 */
export function readStatCacheBase(file: string): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'latin1');
  } catch {
    return undefined;
  }
  if (!text.startsWith(HEADER_PREFIX)) return undefined;
  const at = text.lastIndexOf(`\n${HEADER_PREFIX}`);
  const start = at < 0 ? HEADER_PREFIX.length : at + 1 + HEADER_PREFIX.length;
  const end = text.indexOf('\n', start);
  if (end < 0) return undefined;
  const base = text.slice(start, end);
  return base !== '' && !base.includes('\t') ? base : undefined;
}

/** The cache file for one workspace checked out at one directory. */
export function statCacheFile(cacheDir: string, workspaceId: string, dir: string): string {
  const key = createHash('sha256')
    .update(`${workspaceId}\0${path.resolve(dir)}`)
    .digest('hex')
    .slice(0, 32);
  return path.join(statCacheDir(cacheDir), `${key}.tsv`);
}

// A line is `<key><identity>\u0002<ids>`: the key is the path (a directory's behind DIR_MARK),
// the identity the stat that vouches for the ids. No path holds a tab, so the key ends at the first.
function fileIdentity(st: StatIdentity): string {
  return `\t${st.size}\t${st.mtimeMs}\t${st.ctimeMs}\t${st.ino}\t${st.mode}\u0002`;
}

function dirIdentity(d: DirIdentity): string {
  return `\t${d.exactMtimeMs}\t${d.ctimeMs}\t${d.mode}\t${d.namesHash}\u0002`;
}

/**
 * Maps workspace paths to the content ids their files had at a known checkpoint (`base`), and
 * directories to their tree ids. It is only a hint: a file entry is used when size, mtime,
 * ctime, inode and mode all match and the file is not racy; the objects it names exist because
 * `base` is the workspace head (never collected). Stored as tab-separated lines outside the
 * workspace; a missing or damaged file is an empty cache. A path's last line is the one held: a
 * file grown by {@link StatCacheBuilder.appendTo} keeps earlier lines, and an earlier line of a
 * path is one whose stat the path has left (a ctime never comes back), so it could never match.
 * Lookups are by path (a string the scan has already hashed), then the identity is compared in
 * place: the cache keeps the text it read and, per key, where its line starts, so a large
 * cache costs one key string per path and no string per line.
 */
export class StatCache {
  /** The texts taken in, each with the position (over all of them, in order) where it starts. */
  private readonly texts: Array<{ readonly text: string; readonly from: number }> = [];
  /** Positions taken by the texts so far (each text and the line end after it). */
  private taken = 0;
  private lines = 0;

  private constructor(
    private baseId: string | undefined,
    /** Each key's last line: the position of its first byte (over all texts). */
    private readonly entries: Map<string, number>,
  ) {}

  /** The checkpoint the cache describes (the last header's, in a file {@link StatCacheBuilder.appendTo} grew). */
  get base(): string | undefined {
    return this.baseId;
  }

  /** An empty cache. */
  static empty(): StatCache {
    return new StatCache(undefined, new Map());
  }

  /** Loads a cache file; a missing or unreadable file gives an empty cache. */
  static load(file: string): StatCache {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      return StatCache.empty();
    }
    const firstLine = text.indexOf('\n');
    const [magic, base] = text.slice(0, firstLine < 0 ? text.length : firstLine).split('\t');
    if (magic !== HEADER || base === undefined || firstLine < 0) return StatCache.empty();
    const cache = new StatCache(base, new Map());
    cache.absorb(base, text.slice(firstLine + 1));
    return cache;
  }

  /**
   * Takes in `text` (lines as a cache file holds them; a later line for the same key wins, a
   * header line among them sets the base) and makes `base` the cache's base: what a file grown
   * by {@link StatCacheBuilder.appendTo} reads as, without reading it again.
   */
  absorb(base: string, text: string): void {
    this.baseId = base;
    const from = this.taken;
    this.texts.push({ text, from });
    this.taken += text.length + 1;
    for (let start = 0; start < text.length; ) {
      let end = text.indexOf('\n', start);
      if (end < 0) end = text.length;
      if (text.startsWith(HEADER_PREFIX, start)) this.baseId = text.slice(start + HEADER_PREFIX.length, end);
      else {
        const tab = text.indexOf('\t', start);
        // Keys are slices of the text: V8 keeps them as views, so a big cache costs little.
        if (tab > start && tab < end) {
          this.entries.set(text.slice(start, tab), from + start);
          this.lines += 1;
        }
      }
      start = end + 1;
    }
  }

  /**
   * The last line of `key` when `identity` follows the key in it: the text holding the line,
   * where the line starts and ends in it, and where the value after the identity starts.
   */
  private lineOf(key: string, identity = ''): { text: string; start: number; value: number; end: number } | undefined {
    const at = this.entries.get(key);
    if (at === undefined) return undefined;
    let i = this.texts.length - 1;
    while ((this.texts[i] as { from: number }).from > at) i -= 1;
    const { text, from } = this.texts[i] as { text: string; from: number };
    const start = at - from;
    const newline = text.indexOf('\n', start);
    const end = newline < 0 ? text.length : newline;
    const value = start + key.length + identity.length;
    return value <= end && text.startsWith(identity, start + key.length) ? { text, start, value, end } : undefined;
  }

  /**
   * Whether the file this cache was read from may grow by appending ({@link StatCacheBuilder.appendTo})
   * for a scan of `files` files: true until it holds more than two lines per file (plus a
   * slack), after which it is written afresh.
   */
  mayGrow(files: number): boolean {
    return this.lines <= 2 * files + CACHE_SLACK_LINES;
  }

  /** The cached content of `relPath` if its stat identity still matches and it is not racy. */
  lookup(relPath: string, st: StatIdentity, scanStartedAtMs: number): StatCacheHit | undefined {
    if (st.mtimeMs >= scanStartedAtMs - RACY_WINDOW_MS) return undefined;
    const found = this.lineOf(relPath, fileIdentity(st));
    const ids = found === undefined ? undefined : idsIn(found.text, found.value, found.end);
    if (found === undefined || ids === undefined) return undefined;
    const line = found.text.slice(found.start, found.end);
    return { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: st.mode, ...ids, line };
  }

  /**
   * Whether {@link lookup} would find `relPath` (its last line's stat is `st`, and it is not
   * racy), without reading its ids: the cheap test when only "unchanged" is asked. A line whose
   * ids do not parse still counts; {@link idsAt} reads them, and a caller must not rely on
   * more than this answer until it has them.
   */
  vouches(relPath: string, st: StatIdentity, scanStartedAtMs: number): boolean {
    return st.mtimeMs < scanStartedAtMs - RACY_WINDOW_MS && this.lineOf(relPath, fileIdentity(st)) !== undefined;
  }

  /**
   * The content ids of `relPath`'s last line, its stat not compared: for a file a
   * {@link lookup} or {@link vouches} of this same cache already vouched for (the cache is not
   * changed after it is loaded, only its file grows).
   */
  idsAt(relPath: string): Pick<StatCacheEntry, 'sha256' | 'chunks'> | undefined {
    const line = this.lineOf(relPath);
    const split = line === undefined ? -1 : line.text.indexOf('\u0002', line.start);
    return line === undefined || split < 0 || split >= line.end ? undefined : idsIn(line.text, split + 1, line.end);
  }

  /** The tree id a directory had, if its identity (stat and included names) is unchanged. */
  treeOf(relPath: string, d: DirIdentity): Sha256Hex | undefined {
    const found = this.lineOf(`${DIR_MARK}${relPath}`, dirIdentity(d));
    const id = found?.text.slice(found.value, found.end);
    return id !== undefined && isSha256Hex(id) ? id : undefined;
  }

  /** Number of entries. */
  get size(): number {
    return this.entries.size;
  }
}

/** The ids of a file line whose value (`<sha256>\t<chunk list>`) is `text` from `at` to `end`. */
function idsIn(text: string, at: number, end: number): Pick<StatCacheEntry, 'sha256' | 'chunks'> | undefined {
  const value = text.slice(at, end);
  const tab = value.indexOf('\t');
  const sha256 = tab < 0 ? value : value.slice(0, tab);
  if (!isSha256Hex(sha256)) return undefined;
  const list = tab < 0 ? '=' : value.slice(tab + 1);
  return { sha256, chunks: list === '=' ? [sha256] : list === '' ? [] : list.split(',') };
}

/** Writes all of `bytes` at the file position of `fd`. */
function writeWhole(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length; ) at += fs.writeSync(fd, bytes, at, bytes.length - at);
}

/** Text of the next cache gathered into one string before it is encoded into a block. */
const BUILDER_BLOCK_CHARS = 64 * 1024;

/**
 * Builds the next cache while a checkpoint or restore runs; racy entries are left out. Lines
 * are kept as encoded blocks, not strings: a line built from a template is a tree of a dozen
 * V8 cons strings (about 1 KiB for 100 bytes of text), which at 100,000 files was the largest
 * thing a checkpoint held.
 */
export class StatCacheBuilder {
  private readonly blocks: Buffer[] = [];
  private pending = '';

  /**
   * `carry` false: a builder for a cache that grows ({@link appendTo}) from the one the scan
   * was checked against: a hit's line and a directory's id taken from that cache are already in
   * its file, so only what is new is recorded.
   */
  constructor(
    private readonly racyAfterMs: number,
    private readonly carry = true,
  ) {}

  /**
   * A builder that records nothing (every entry counts as racy), for a checkpoint whose source
   * keeps no host-side stat cache: no line is built for it.
   */
  static disabled(): StatCacheBuilder {
    return new StatCacheBuilder(Number.NEGATIVE_INFINITY);
  }

  /** False for {@link disabled}: callers may skip working out what they would add. */
  get records(): boolean {
    return this.racyAfterMs !== Number.NEGATIVE_INFINITY;
  }

  /**
   * Records a file (skipped when its mtime is inside the racy window, or its path holds byte
   * escapes, which the UTF-8 text of the cache file cannot keep apart from U+FFFD); a hit
   * keeps its line.
   */
  add(relPath: string, e: StatCacheEntry | StatCacheHit): void {
    if (e.mtimeMs >= this.racyAfterMs - RACY_WINDOW_MS) return;
    if ('line' in e) {
      if (this.carry) this.push(e.line);
      return;
    }
    this.addFile(relPath, e, e.sha256, e.chunks);
  }

  /** {@link add} for a file just hashed: its stat identity (a scanned file will do) and its ids, with no entry object built. */
  addFile(relPath: string, st: StatIdentity, sha256: Sha256Hex, chunks: readonly Sha256Hex[]): void {
    if (st.mtimeMs >= this.racyAfterMs - RACY_WINDOW_MS || hasByteEscapes(relPath)) return;
    const list = chunks.length === 1 && chunks[0] === sha256 ? '=' : chunks.join(',');
    this.push(`${relPath}${fileIdentity(st)}${sha256}\t${list}`);
  }

  /**
   * Records a directory's tree id (skipped when the directory itself is racy, or when the id
   * came from the cache this one grows: `fromCache`).
   */
  addDir(relPath: string, d: DirIdentity, tree: Sha256Hex, fromCache = false): void {
    if ((fromCache && !this.carry) || d.exactMtimeMs >= this.racyAfterMs - RACY_WINDOW_MS || hasByteEscapes(relPath)) return;
    this.push(`${DIR_MARK}${relPath}${dirIdentity(d)}${tree}`);
  }

  /** Writes the cache atomically (temp file + rename); failures are ignored: it is only a hint. */
  save(file: string, base: string): void {
    this.replace(file, base);
  }

  /**
   * Appends the lines gathered to `file`, then a header line naming `base`, in one write:
   * later lines win when the file is loaded, so a cache grows by what one checkpoint read
   * instead of being written whole. The header goes last so that a write cut short (a crash)
   * leaves no header naming `base`: the file still names the checkpoint before, which is no
   * longer the head, and nothing in it is trusted (a header first would vouch for a cut list).
   * A file missing or empty is written whole instead ({@link save}). Returns the text added
   * (for {@link StatCache.absorb}), or undefined when it could not be written.
   */
  appendTo(file: string, base: string): string | undefined {
    const text = `${Buffer.concat(this.blocks).toString('utf8')}${this.pending}${HEADER}\t${base}\n`;
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const fd = fs.openSync(file, 'a');
      let empty: boolean;
      try {
        empty = fs.fstatSync(fd).size === 0;
        if (!empty) writeWhole(fd, Buffer.from(text));
      } finally {
        fs.closeSync(fd);
      }
      return !empty || this.replace(file, base) ? text : undefined;
    } catch {
      return undefined;
    }
  }

  private replace(file: string, base: string): boolean {
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
      // Block by block: joining them first held a second copy of a cache of 100k files (~15 MB) at the checkpoint's peak.
      const fd = fs.openSync(temp, 'w');
      try {
        for (const part of [Buffer.from(`${HEADER}\t${base}\n`), ...this.blocks, Buffer.from(this.pending)]) writeWhole(fd, part);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(temp, file);
      return true;
    } catch {
      // A cache that cannot be written only costs re-hashing next time.
      return false;
    }
  }

  private push(line: string): void {
    this.pending += `${line}\n`;
    if (this.pending.length < BUILDER_BLOCK_CHARS) return;
    this.blocks.push(Buffer.from(this.pending));
    this.pending = '';
  }
}
