import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ScanResult } from '../../../workspace-fs/scan.js';
import { StatCache, type StatCacheBuilder } from '../../../workspace-fs/stat-cache.js';
import type { BatchJournal } from './batch-journal.js';
import { Watches } from './workspace-watch.js';

/**
 * Scans kept for `recheck` and as the base of the next scan's delta: the scan of the last
 * committed checkpoint and the attempts of the current one.
 */
const REMEMBERED_SCANS = 3;
/** Stat-cache updates assembled at once; an abandoned one is dropped when a newer one starts. */
const OPEN_CACHE_UPDATES = 4;

/** A scan the agent made, kept so `recheck` needs only its id. */
export interface RememberedScan {
  readonly root: string;
  readonly scan: ScanResult;
  /** Paths whose cached ids the scan sent (the engine may not have read them). */
  readonly cached: ReadonlySet<string>;
  /** The request's root, excludes and limits: a delta is told only against a scan made with the same. */
  readonly fingerprint: string;
}

/** An in-progress `cache-update`, assembled over several requests. */
export interface OpenCacheUpdate {
  readonly cacheKey: string;
  readonly builder: StatCacheBuilder;
  entries: number;
  /** The checkpoint's scan, when the update is told against it (only the files read come). */
  readonly since?: ScanResult;
}

/** Stat caches held in memory at once. */
const HELD_STAT_CACHES = 8;

/**
 * What the agent keeps: in memory, recent scans and open cache updates (lost with the process,
 * which only costs a rescan); on disk under `stateDir` (`<home>/.holdfast`, never inside a
 * workspace), the stat caches and the staging registry that lets a new agent process take
 * over a restore.
 */
export class AgentState {
  private readonly scans = new Map<string, RememberedScan>();
  private readonly updates = new Map<string, OpenCacheUpdate>();
  /** Stat caches read, by cache key, with the identity of the file as read. */
  private readonly caches = new Map<string, { readonly id: string; readonly cache: StatCache }>();
  /** Open batch journals by staging directory; dropped when the staging is published or removed. */
  readonly journals = new Map<string, BatchJournal>();
  /** The watches that let a scan read only what changed (`workspace-watch.ts`). */
  readonly watches: Watches;

  constructor(
    readonly stateDir: string,
    /** SHA-256 of the running agent file. */
    readonly agentHash: string,
  ) {
    this.watches = new Watches(stateDir);
  }

  /** Keeps a scan for `recheck` and returns its id. */
  rememberScan(remembered: RememberedScan): string {
    const scanId = randomBytes(8).toString('hex');
    this.scans.set(scanId, remembered);
    while (this.scans.size > REMEMBERED_SCANS) this.scans.delete(this.scans.keys().next().value as string);
    return scanId;
  }

  /** A scan made by this process, or undefined (another process, or forgotten). */
  recall(scanId: string): RememberedScan | undefined {
    return this.scans.get(scanId);
  }

  /** The open cache update `updateId`, created by `start` when new. */
  cacheUpdate(updateId: string, start: () => OpenCacheUpdate): OpenCacheUpdate {
    let open = this.updates.get(updateId);
    if (open === undefined) {
      open = start();
      this.updates.set(updateId, open);
      while (this.updates.size > OPEN_CACHE_UPDATES) this.updates.delete(this.updates.keys().next().value as string);
    }
    return open;
  }

  /** Whether cache update `updateId` is open (its first part came). */
  hasCacheUpdate(updateId: string): boolean {
    return this.updates.has(updateId);
  }

  /** Forgets a finished cache update. */
  closeCacheUpdate(updateId: string): void {
    this.updates.delete(updateId);
  }

  /**
   * The stat cache of `cacheKey` as this process holds it: read from its file once, and again
   * only when the file is not as this process last saw it (written by a restore, or another
   * process).
   */
  statCache(cacheKey: string): StatCache {
    const file = this.statCacheFile(cacheKey);
    const id = fileIdentity(file);
    const held = this.caches.get(cacheKey);
    if (held !== undefined && held.id === id) return held.cache;
    const cache = StatCache.load(file);
    this.caches.delete(cacheKey);
    this.caches.set(cacheKey, { id, cache });
    while (this.caches.size > HELD_STAT_CACHES) this.caches.delete(this.caches.keys().next().value as string);
    return cache;
  }

  /** This process appended `text` to the cache file of `cacheKey`: the held cache takes it in without reading the file. */
  statCacheAppended(cacheKey: string, base: string, text: string): void {
    const held = this.caches.get(cacheKey);
    if (held === undefined) return;
    held.cache.absorb(base, text);
    this.caches.set(cacheKey, { id: fileIdentity(this.statCacheFile(cacheKey)), cache: held.cache });
  }

  /** The stat cache file of one workspace checkout. */
  statCacheFile(cacheKey: string): string {
    return path.join(this.stateDir, `stat-cache-${cacheKey}.tsv`);
  }

  /** Where staging records live. */
  get registryDir(): string {
    return path.join(this.stateDir, 'staging');
  }

  /** The staged-file list of a staging id, kept here from publish on (the journal inside staging is gone by then). */
  stagedListFile(stagingId: string): string {
    return path.join(this.registryDir, `${stagingId}.staged.tsv`);
  }

  /** The registry record of one staging id (target, layout, state). */
  registryFile(stagingId: string): string {
    return path.join(this.registryDir, `${stagingId}.json`);
  }
}

/** What tells a file apart from the same path written since: inode, size and mtime; `none` when missing. */
function fileIdentity(file: string): string {
  const st = fs.statSync(file, { throwIfNoEntry: false });
  return st === undefined ? 'none' : `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

const killAt = Number(process.env.HOLDFAST_AGENT_KILL_AT ?? '0');
let steps = 0;

/**
 * A numbered step of a write or publish (one op applied, one batch journaled, one rename).
 * When `HOLDFAST_AGENT_KILL_AT=n` is set the agent SIGKILLs itself right after step n: the
 * fault injection the crash tests use to stop it at every point of a restore, as `kill -9`
 * would. Unset (always, outside tests) it only counts.
 */
export function faultPoint(): void {
  steps += 1;
  if (killAt > 0 && steps === killAt) process.kill(process.pid, 'SIGKILL');
}
