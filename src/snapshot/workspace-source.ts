import fs from 'node:fs';
import path from 'node:path';
import type { Sha256Hex } from '../core/hash.js';
import { byteLength, hasByteEscapes } from '../core/name-bytes.js';
import type { Workspace } from '../metadata/metadata-store.js';
import type { ContentWorkers, DigestOutcome } from '../objects/content-workers.js';
import { type ExcludeOptions, ExcludeRules, type Exclusion } from '../rules/excludes.js';
import { LongPaths, SYSCALL_PATH_BYTES } from '../workspace-fs/long-paths.js';
import {
  childPrefix,
  type ScanLimits,
  type ScannedDir,
  type ScannedFile,
  type ScanResult,
  scanWorkspace,
  unchangedSince,
} from '../workspace-fs/scan.js';
import { type StatCache, type StatCacheBuilder, StatCache as StatCacheClass, statCacheFile } from '../workspace-fs/stat-cache.js';
import type { BaseFiles } from './checkpoint/base-files.js';
import { type FileChunk, type FileContent, readLargeFile } from './checkpoint/file-reader.js';
import { childrenAsCached, dirIdentityOf, type FileIds, type FileIdsView } from './checkpoint/tree-builder.js';

/**
 * What a workspace source or target built outside this module gets: the workspace it serves,
 * the content workers that hash and compress, and the host's record of base checkpoints'
 * files (the only ids an untrusted source may reuse without sending the bytes).
 */
export interface EndpointContext {
  readonly workspace: Workspace;
  readonly workers: ContentWorkers;
  readonly baseFiles: BaseFiles;
  /** This service's cache directory: where a transport that keeps host-side state (stat caches) keeps it. */
  readonly cacheDir: string;
}

/**
 * How a source made a scan, as it says (an agent's watches: `delta` when only what changed was
 * read, else `full` with the reason; `missed` from a verifying scan). A report for the
 * checkpoint's figures and the service's metrics; nothing is decided by it.
 */
export interface ScanReport {
  readonly mode: 'delta' | 'full';
  readonly reason?: string;
  readonly missed?: number;
}

/** See {@link SourceScan.settled}. */
export interface SettledSubtrees {
  readonly dirs: ReadonlySet<ScannedDir>;
  /** The ids of every file under `dirs`. */
  readonly ids: FileIdsView;
  /** The tree id of every directory under `dirs`, themselves included. */
  readonly trees: Pick<ReadonlyMap<ScannedDir, Sha256Hex>, 'get'>;
}

/** What one scan of a workspace gives a checkpoint. */
export interface SourceScan {
  readonly scan: ScanResult;
  /** Content ids the source can vouch for without reading the file (its stat cache). */
  lookup(file: ScannedFile): FileIds | undefined;
  /** Tree ids of unchanged directories (an empty cache when the source keeps none). */
  readonly trees: StatCache;
  /**
   * Tree ids by directory object, for a source whose scan takes directories over whole from
   * an earlier one (`known`: that build's ids; `built`: filled with this build's, for the next).
   */
  readonly dirTrees?: {
    readonly known: Pick<ReadonlyMap<ScannedDir, Sha256Hex>, 'get'>;
    readonly built: Pick<Map<ScannedDir, Sha256Hex>, 'set'>;
  };
  /**
   * Directories whose whole subtree the source knows the content ids of without a look: for an
   * agent's delta, subtrees of the host's own last committed scan, taken over whole, with no
   * file racy against that scan and none with other hard links; `ids` has every file under
   * them (the host's record of that checkpoint), `trees` every directory's tree id. For a
   * local directory whose cache grows, subtrees whose every file and directory the stat cache
   * vouches for as it is (no symlink, no hard link, nothing racy). The engine reads none of
   * their files and encodes none of their trees, so a turn costs what changed.
   */
  readonly settled?: SettledSubtrees;
  /** Secret paths let through by `allowSecretPaths`, reported with the checkpoint. */
  readonly allowances: readonly Exclusion[];
  /** How the source made the scan, when it says (see {@link ScanReport}). */
  readonly report?: ScanReport;
  /**
   * False when the source keeps no host-side stat cache (its `trees` are empty and `saveCache`
   * ignores the builder it is given): the engine then builds no stat-cache lines or directory
   * identities for it. `'grows'` when `saveCache` appends the builder's lines to the cache file
   * `trees` was loaded from: the builder then records only what that file does not hold (files
   * read, directories not taken from it), so an unchanged file costs no line.
   */
  readonly statCache?: false | 'grows';
}

/**
 * Where a checkpoint reads a workspace from: the host filesystem, or a sandbox reached through
 * its agent (`src/sandbox/endpoints/`). The engine's guarantees (secrets never stored,
 * verification, the second look, the stat cache) hold for every source.
 */
export interface WorkspaceSource {
  /** Shown in messages: a directory, or `sandbox <id>:<root>`. */
  readonly label: string;
  /** Walks the workspace; `base` is the head the cached ids must come from. */
  scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan>;
  /** Reads, secret-checks, hashes, chunks and compresses files small enough to hold whole. */
  digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]>;
  /** Reads one large file as a stream: secret scan first, then chunks to `onChunk`. */
  readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent>;
  /** The second look: true when nothing the checkpoint relied on has moved since `scan`. */
  unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean>;
  /** After the commit: remembers the ids of this checkpoint for the next one. */
  saveCache(scan: SourceScan, next: StatCacheBuilder, ids: ReadonlyMap<string, FileIds>, base: string): Promise<void>;
}

/**
 * The largest subtrees of `root` the stat cache vouches for whole (see {@link SourceScan.settled}):
 * a directory is settled when its children pass the rule a tree build applies to take a tree
 * from the cache (`childrenAsCached`: every file vouched for, every subdirectory settled) and
 * its cached tree id matches its identity (stat and included names). Only the topmost settled
 * directories are listed; `trees` has the id of each settled directory, nested ones included.
 * Undefined when none is.
 */
function settledSubtrees(root: ScannedDir, cache: StatCache, vouched: (file: ScannedFile) => boolean): SettledSubtrees | undefined {
  const dirs = new Set<ScannedDir>();
  const trees = new Map<ScannedDir, Sha256Hex>();
  const visit = (dir: ScannedDir): boolean => {
    // Every subdirectory is visited, settled or not: a settled one under an unsettled parent is listed.
    const settledSubs = dir.children.filter((c): c is ScannedDir => c.type === 'dir' && visit(c));
    const id = childrenAsCached(dir, vouched, (sub) => trees.has(sub)) ? cache.treeOf(dir.path, dirIdentityOf(dir)) : undefined;
    if (id !== undefined) {
      trees.set(dir, id);
      return true;
    }
    for (const sub of settledSubs) dirs.add(sub);
    return false;
  };
  if (visit(root)) dirs.add(root);
  if (dirs.size === 0) return undefined;
  // Every file under them was just vouched for by this very cache, which no longer changes. A
  // line whose ids do not parse is vouched for too (the directory's tree id is what is reused);
  // the one reader of these ids, the lost-objects check, reads every file again then.
  const ids: FileIdsView = { get: (p) => cache.idsAt(p), has: (p) => cache.idsAt(p) !== undefined };
  return { dirs, ids, trees };
}

/** Each file's bytes, or the error a worker would have reported for it. */
function readAll(paths: readonly string[]): Array<Buffer | DigestOutcome> {
  const long = new LongPaths();
  try {
    return paths.map((p) => {
      try {
        return fs.readFileSync(long.at(p));
      } catch (error) {
        const e = error as NodeJS.ErrnoException;
        return { kind: 'error', errno: e.code ?? 'EIO', message: e.message };
      }
    });
  } finally {
    long.close();
  }
}

/** A workspace that is a directory on this host. */
export class LocalWorkspaceSource implements WorkspaceSource {
  readonly label: string;

  constructor(
    private readonly dir: string,
    private readonly workspaceId: string,
    private readonly cacheDir: string,
    private readonly workers: ContentWorkers,
  ) {
    this.label = dir;
  }

  async scan(excludes: ExcludeOptions | undefined, limits: ScanLimits, base: string | null): Promise<SourceScan> {
    const rules = ExcludeRules.create(excludes);
    const loaded = StatCacheClass.load(statCacheFile(this.cacheDir, this.workspaceId, this.dir));
    // Cached ids are trusted only when they came from the current head, whose objects GC keeps.
    const trusted = loaded.base !== undefined && loaded.base === base;
    const cache = trusted ? loaded : StatCacheClass.empty();
    const scan = scanWorkspace(this.dir, rules, limits);
    const lookup = (file: ScannedFile) => cache.lookup(file.path, file, scan.startedAtMs);
    // The file the cache came from grows by what this checkpoint reads; past its bound (or from
    // nothing) it is written whole, with a line for every file, so nothing is left unlooked at.
    const grows = trusted && cache.mayGrow(scan.files);
    const settled = grows ? settledSubtrees(scan.root, cache, (file) => cache.vouches(file.path, file, scan.startedAtMs)) : undefined;
    return {
      scan,
      lookup,
      trees: cache,
      allowances: rules.allowances,
      ...(grows ? { statCache: 'grows' as const } : {}),
      ...(settled === undefined ? {} : { settled }),
    };
  }

  /**
   * Workers open files by a string path; a path holding byte escapes or too long for one
   * system call (rare) is read here, through {@link LongPaths}, and its bytes digested instead.
   */
  async digest(files: readonly ScannedFile[]): Promise<DigestOutcome[]> {
    const prefix = childPrefix(path.normalize(this.dir));
    const abs = files.map((f) => prefix + f.path);
    const awkward: number[] = [];
    for (const [i, p] of abs.entries()) {
      // A UTF-16 unit is at most 3 bytes: only a path that could be long is measured.
      if (hasByteEscapes(p) || (p.length * 3 > SYSCALL_PATH_BYTES && byteLength(p) > SYSCALL_PATH_BYTES)) awkward.push(i);
    }
    if (awkward.length === 0) return this.workers.digestPaths(abs);
    const skip = new Set(awkward);
    const plain = abs.filter((_, i) => !skip.has(i));
    const read = readAll(awkward.map((i) => abs[i] as string));
    const [byPath, byBytes] = await Promise.all([
      this.workers.digestPaths(plain),
      this.workers.digestBuffers(read.flatMap((r) => (r instanceof Buffer ? [r] : []))),
    ]);
    const out: DigestOutcome[] = [];
    let nextPlain = 0;
    let nextRead = 0;
    let nextBytes = 0;
    for (let i = 0; i < abs.length; i += 1) {
      if (!skip.has(i)) out.push(byPath[nextPlain++] as DigestOutcome);
      else {
        const r = read[nextRead++];
        out.push(r instanceof Buffer ? (byBytes[nextBytes++] as DigestOutcome) : (r as DigestOutcome));
      }
    }
    return out;
  }

  async readLarge(file: ScannedFile, onChunk: (chunk: FileChunk) => Promise<void>): Promise<FileContent> {
    const long = new LongPaths();
    try {
      return await readLargeFile(long.at(path.join(this.dir, file.path)), onChunk);
    } finally {
      long.close();
    }
  }

  async unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
    return unchangedSince(this.dir, scan.scan, wasRead, scan.settled?.dirs);
  }

  async saveCache(scan: SourceScan, next: StatCacheBuilder, _ids: ReadonlyMap<string, FileIds>, base: string): Promise<void> {
    const file = statCacheFile(this.cacheDir, this.workspaceId, this.dir);
    if (scan.statCache === 'grows') next.appendTo(file, base);
    else next.save(file, base);
  }
}
