import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSha256Hex, type Sha256Hex } from '../core/hash.js';

/** A file modified this close to the scan's start is hashed again ("racy git"). */
export const RACY_WINDOW_MS = 1000;
const HEADER = 'holdfast-stat-cache 1';

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

/** The stat identity compared against a fresh `lstat`. */
export type StatIdentity = Pick<StatCacheEntry, 'size' | 'mtimeMs' | 'ctimeMs' | 'ino' | 'mode'>;

/** Default directory for stat caches: `$HOLDFAST_CACHE_DIR`, else `~/.cache/holdfast`. */
export function defaultCacheDir(): string {
  return process.env.HOLDFAST_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'holdfast');
}

/** The cache file for one workspace checked out at one directory. */
export function statCacheFile(cacheDir: string, workspaceId: string, dir: string): string {
  const key = createHash('sha256')
    .update(`${workspaceId}\0${path.resolve(dir)}`)
    .digest('hex')
    .slice(0, 32);
  return path.join(cacheDir, 'stat', `${key}.tsv`);
}

/**
 * Maps workspace paths to the content ids their files had at a known checkpoint (`base`).
 * It is only a hint: an entry is used when size, mtime, ctime, inode and mode all match and
 * the file is not racy; the objects it names are known to exist because `base` is the
 * workspace head (never collected). Stored as tab-separated lines outside the workspace.
 */
export class StatCache {
  private constructor(
    readonly base: string | undefined,
    private readonly entries: Map<string, StatCacheEntry>,
  ) {}

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
    const lines = text.split('\n');
    const [magic, base] = (lines[0] ?? '').split('\t');
    if (magic !== HEADER || base === undefined) return StatCache.empty();
    const entries = new Map<string, StatCacheEntry>();
    for (let i = 1; i < lines.length; i += 1) {
      const f = (lines[i] as string).split('\t');
      if (f.length !== 8) continue;
      const [p, size, mtimeMs, ctimeMs, ino, mode, sha256, chunkList] = f as [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
      ];
      if (!isSha256Hex(sha256)) continue;
      const chunks = chunkList === '=' ? [sha256] : chunkList === '' ? [] : chunkList.split(',');
      entries.set(p, {
        size: Number(size),
        mtimeMs: Number(mtimeMs),
        ctimeMs: Number(ctimeMs),
        ino: Number(ino),
        mode: Number(mode),
        sha256,
        chunks,
      });
    }
    return new StatCache(base, entries);
  }

  /** The cached content of `relPath` if its stat identity still matches and it is not racy. */
  lookup(relPath: string, st: StatIdentity, scanStartedAtMs: number): StatCacheEntry | undefined {
    const e = this.entries.get(relPath);
    if (e === undefined || st.mtimeMs >= scanStartedAtMs - RACY_WINDOW_MS) return undefined;
    return e.size === st.size && e.mtimeMs === st.mtimeMs && e.ctimeMs === st.ctimeMs && e.ino === st.ino && e.mode === st.mode
      ? e
      : undefined;
  }

  /** Number of entries. */
  get size(): number {
    return this.entries.size;
  }
}

/** Builds the next cache while a checkpoint or restore runs; racy entries are left out. */
export class StatCacheBuilder {
  private readonly lines: string[] = [];

  constructor(private readonly racyAfterMs: number) {}

  /** Records a file (skipped when its mtime is inside the racy window). */
  add(relPath: string, e: StatCacheEntry): void {
    if (e.mtimeMs >= this.racyAfterMs - RACY_WINDOW_MS) return;
    const chunks = e.chunks.length === 1 && e.chunks[0] === e.sha256 ? '=' : e.chunks.join(',');
    this.lines.push(`${relPath}\t${e.size}\t${e.mtimeMs}\t${e.ctimeMs}\t${e.ino}\t${e.mode}\t${e.sha256}\t${chunks}`);
  }

  /** Writes the cache atomically (temp file + rename); failures are ignored: it is only a hint. */
  save(file: string, base: string): void {
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
      fs.writeFileSync(temp, `${HEADER}\t${base}\n${this.lines.join('\n')}\n`);
      fs.renameSync(temp, file);
    } catch {
      // A cache that cannot be written only costs re-hashing next time.
    }
  }
}
