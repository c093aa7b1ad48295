/**
 * What changed since the last scan, without walking everything (issue 26): the long-lived agent
 * keeps an inotify watch (`fs.watch`, one per directory) on every directory a scan read, and the
 * next scan re-reads only the directories that had an event, and their ancestors; every other
 * directory is the earlier scan's very object, taken over with what its subtree counted.
 *
 * It must never miss a change, so every doubt is a full scan (every directory read, the watches
 * checked on the way):
 *
 * - **Queue overflow.** libuv drops the kernel's `IN_Q_OVERFLOW` (its `wd` is -1), so an overflow
 *   is inferred. Every event reaches one counter. A *barrier* touches a sentinel file in
 *   `<stateDir>/watch/` (watched on the same inotify instance, whose queue is FIFO) and waits
 *   for its event: then every event queued before it has been counted. An overflow needs
 *   `max_queued_events` events queued since libuv's last read before it, and that read came
 *   after the barrier before the last one had been delivered, so all of them are counted
 *   between that barrier and this one: fewer than that, and no overflow happened before this
 *   barrier. At or above it, or a sentinel that does not arrive within
 *   {@link BARRIER_TIMEOUT_MS}, every root's next scan is full. The count is sound only while
 *   no handle is closed (libuv drops a closed handle's events uncounted), so handles are never
 *   closed but all at once ({@link Watches.reset}), followed by barriers until one arrives.
 *   `HOLDFAST_AGENT_WATCH_QUEUE` lowers the threshold (the tests' tiny queue).
 * - **Watch limit.** `fs.watch` failing (`ENOSPC`, `EMFILE`), or more directories than
 *   `HOLDFAST_AGENT_WATCH_MAX_DIRS`, turns watching off for that root: every scan is full.
 * - **Agent restart.** A new process holds no watch: its first scan of a root is full.
 * - **A directory moved, removed or replaced.** A known directory missing from its re-read parent,
 *   or a root or directory with another inode, is a full scan (its watches name stale paths).
 * - **Ignore rules.** An event on a `.gitignore`, or a changed `.git/info/exclude`, is a full scan
 *   (the rules of every subtree under it may have changed).
 * - **Hard links.** A write through another link raises no event in this directory, so a
 *   directory holding a file with other links is re-read on every scan, and a file newly found
 *   with other links (its other names unknown) is a full scan.
 * - **An edit that keeps size and mtime** raises an event like any other: its directory is
 *   re-read, and a file with an event is never vouched for by the stat cache.
 * - **A verifying full scan** runs every {@link VERIFY_EVERY_SCANS} scans (`HOLDFAST_AGENT_WATCH_VERIFY_EVERY`) or
 *   {@link VERIFY_EVERY_MS}, and reports each directory whose change the watcher had not told
 *   (`missed`): a watcher that misses anything (an `mmap` write, which raises no event) is seen.
 *
 * What the agent reports stays input: the host checks a delta answer exactly as a full one.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ExcludeRules } from '../../../rules/excludes.js';
import { INFO_EXCLUDE_PATH } from '../../../rules/ignore-files.js';
import {
  type ScanLimits,
  type ScannedDir,
  type ScannedEntry,
  type ScanResult,
  type SubtreeTally,
  scanWorkspace,
} from '../../../workspace-fs/scan.js';
import type { FullScanReason, WatchReport } from '../wire/protocol.js';

/** How long a barrier waits for its sentinel's event before it counts as an overflow. */
export const BARRIER_TIMEOUT_MS = 2000;
/** Scans of a root between two verifying full scans. */
export const VERIFY_EVERY_SCANS = 50;
/** Longest time between two verifying full scans of a root. */
export const VERIFY_EVERY_MS = 10 * 60_000;
/** Roots watched at once; one more resets every watch. */
const MAX_ROOTS = 4;
/** Events kept between two scans; past it the next scan is full (and nothing more is kept). */
const MAX_PENDING_EVENTS = 100_000;
/** Most barriers a reset waits through for one to arrive. */
const SETTLE_BARRIERS = 5;

/** A scan and how it was made; `touched`: the files that had events (never vouched for by a cache). */
export interface WatchedScan {
  readonly result: ScanResult;
  readonly report: WatchReport;
  readonly touched: (path: string) => boolean;
}

/** Knobs read from the agent's environment (tests only). */
interface WatchSettings {
  readonly enabled: boolean;
  readonly queueLimit: number;
  readonly maxDirs: number;
  readonly verifyEvery: number;
}

function settingsFromEnv(env: NodeJS.ProcessEnv): WatchSettings {
  let kernel = 16_384;
  try {
    kernel = Number(fs.readFileSync('/proc/sys/fs/inotify/max_queued_events', 'utf8').trim()) || kernel;
  } catch {
    // not Linux, or /proc hidden: the usual default
  }
  const queue = Number(env.HOLDFAST_AGENT_WATCH_QUEUE ?? 0);
  const dirs = Number(env.HOLDFAST_AGENT_WATCH_MAX_DIRS ?? 0);
  const verify = Number(env.HOLDFAST_AGENT_WATCH_VERIFY_EVERY ?? 0);
  return {
    enabled: env.HOLDFAST_AGENT_WATCH !== 'off' && process.platform === 'linux',
    queueLimit: queue > 0 ? Math.min(queue, kernel) : kernel,
    maxDirs: dirs > 0 ? dirs : Number.POSITIVE_INFINITY,
    verifyEvery: verify > 0 ? verify : VERIFY_EVERY_SCANS,
  };
}

/** A full scan forced midway through a delta one. */
class Rescan extends Error {
  constructor(readonly reason: FullScanReason) {
    super(reason);
  }
}

/** `fs.watch` refused (or the test limit was reached). */
class WatchLimit extends Error {}

/**
 * Every watch of one agent process: one event count and barrier over libuv's single inotify
 * instance, and a {@link RootWatch} per scanned root.
 */
export class Watches {
  private readonly settings: WatchSettings;
  private readonly roots = new Map<string, RootWatch>();
  private readonly sentinelDir: string;
  private sentinel: fs.FSWatcher | undefined;
  private readonly arrivals = new Map<string, (count: number) => void>();
  private seq = 0;
  /** Events counted (every handle's, the sentinels' too). */
  private events = 0;
  /** The count at the last two barriers that arrived. */
  private marks: [number, number] = [0, 0];
  /** Bumped on every inferred overflow and every reset: a root whose last scan was of another epoch scans fully. */
  epoch = 0;
  /** Handles open over every root. */
  handles = 0;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(stateDir: string, env: NodeJS.ProcessEnv = process.env) {
    this.settings = settingsFromEnv(env);
    this.sentinelDir = path.join(stateDir, 'watch');
  }

  /** The watch of `root` if a scan made one. */
  existing(root: string): RootWatch | undefined {
    return this.roots.get(root);
  }

  /** The watch of `root`, or undefined when this process does not watch (not Linux, turned off, the sentinel cannot be watched). */
  async root(root: string): Promise<RootWatch | undefined> {
    if (!this.settings.enabled || !this.startSentinel()) return undefined;
    let watch = this.roots.get(root);
    if (watch === undefined) {
      if (this.roots.size >= MAX_ROOTS) {
        await this.reset();
        this.roots.clear();
      }
      watch = new RootWatch(this, root, this.settings.maxDirs, this.settings.verifyEvery);
      this.roots.set(root, watch);
    }
    return watch;
  }

  /** Counts one event of any handle. */
  count(): void {
    this.events += 1;
  }

  /**
   * Waits until every event queued before now has been counted (see the file's comment):
   * true when no overflow can have happened before now; false (and every root's next scan is
   * full) when one may have. Barriers run one at a time.
   */
  barrier(): Promise<boolean> {
    const next = this.chain.then(() => this.oneBarrier());
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async oneBarrier(): Promise<boolean> {
    const name = `${process.pid}-${++this.seq}`;
    const file = path.join(this.sentinelDir, name);
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<number>((resolve) => {
      this.arrivals.set(name, resolve);
      timer = setTimeout(() => resolve(-1), BARRIER_TIMEOUT_MS);
    });
    try {
      fs.writeFileSync(file, '');
    } catch {
      this.arrivals.delete(name);
      clearTimeout(timer);
      this.epoch += 1;
      return false;
    }
    const at = await arrived;
    clearTimeout(timer);
    this.arrivals.delete(name);
    fs.rmSync(file, { force: true });
    if (at < 0) {
      this.epoch += 1;
      return false;
    }
    const window = at - this.marks[0];
    this.marks = [this.marks[1], at];
    if (window >= this.settings.queueLimit - 1) {
      this.epoch += 1;
      return false;
    }
    return true;
  }

  /**
   * Closes every handle of every root and waits for a barrier to arrive (so the closed handles'
   * queued events are gone), counting from there: every root's next scan is full.
   */
  async reset(): Promise<void> {
    for (const watch of this.roots.values()) watch.closeAll();
    this.handles = 0;
    this.epoch += 1;
    for (let i = 0; i < SETTLE_BARRIERS; i += 1) if (await this.barrier()) break;
    this.marks = [this.events, this.events];
  }

  private startSentinel(): boolean {
    if (this.sentinel !== undefined) return true;
    try {
      fs.mkdirSync(this.sentinelDir, { recursive: true, mode: 0o700 });
      for (const stale of fs.readdirSync(this.sentinelDir)) {
        if (stale.startsWith(`${process.pid}-`)) fs.rmSync(path.join(this.sentinelDir, stale), { force: true });
      }
      this.sentinel = fs.watch(this.sentinelDir, { persistent: false }, (_type, name) => {
        this.count();
        const arrival = name === null ? undefined : this.arrivals.get(name);
        arrival?.(this.events);
      });
      this.sentinel.on('error', () => {
        this.epoch += 1;
      });
      return true;
    } catch {
      return false;
    }
  }
}

/** What a scan of a watched root leaves for the next one. */
interface Held {
  readonly scan: ScanResult;
  readonly fingerprint: string;
  readonly epoch: number;
  /** Directories holding a file with other hard links: re-read every scan. */
  readonly linkedDirs: ReadonlySet<string>;
  /** `dev:ino` of every file with other hard links. */
  readonly linkedInodes: ReadonlySet<string>;
  /** `.git/info/exclude`'s stat when the rules read it. */
  readonly infoExclude: string | undefined;
  readonly scansSinceFull: number;
  readonly fullAt: number;
}

interface DirFacts {
  readonly ino: number;
  readonly mode: number;
  readonly counted: SubtreeTally;
}

/** One watched handle. */
interface Handle {
  readonly ino: number;
  readonly watcher: fs.FSWatcher;
}

/** The watches and the dirty set of one root. */
export class RootWatch {
  /** Live handles by directory (relative path); replaced ones stay open in `stale` until a reset. */
  private readonly handles = new Map<string, Handle>();
  private readonly stale: fs.FSWatcher[] = [];
  /** Directories with events since the last scan took them. */
  private dirty = new Set<string>();
  /** Files with events: directory → names, or `all` when a name was not readable. */
  private touched = new Map<string, Set<string> | 'all'>();
  /**
   * Directories whose handle had an event naming the directory itself (deleted, moved, its
   * watch dropped, or a child of the same name): the handle may watch an inode that is gone,
   * and a directory made anew may get the very inode number, so the next read watches afresh.
   */
  private readonly suspect = new Set<string>();
  /** A reason the next scan must be full, found by an event handler. */
  private broken: FullScanReason | undefined;
  /** Events since the last scan took the dirty set. */
  private pending = 0;
  private off = false;
  private held: Held | undefined;
  /** Each directory object's inode, full mode and what its subtree counted (a reused object keeps its facts). */
  private readonly facts = new WeakMap<ScannedDir, DirFacts>();

  constructor(
    private readonly watches: Watches,
    private readonly root: string,
    private readonly maxDirs: number,
    private readonly verifyEvery: number,
  ) {}

  /**
   * Scans the root (`scanWorkspace` with the request's rules and limits), reading only what
   * the watches say may have changed when the last scan was made with the same request
   * (`fingerprint`) in this epoch; a full scan otherwise, or whenever a doubt arises.
   */
  async scan(rules: ExcludeRules, limits: ScanLimits, fingerprint: string): Promise<WatchedScan> {
    const settled = await this.watches.barrier();
    const dirty = this.dirty;
    const touched = this.touched;
    const broken = this.broken;
    this.dirty = new Set();
    this.touched = new Map();
    this.broken = undefined;
    this.pending = 0;
    const touchedBy = (p: string): boolean => {
      const cut = p.lastIndexOf('/');
      const names = touched.get(cut < 0 ? '' : p.slice(0, cut));
      return names !== undefined && (names === 'all' || names.has(cut < 0 ? p : p.slice(cut + 1)));
    };
    const held = this.held;
    this.held = undefined;
    let reason = this.fullReason(settled, broken, held, fingerprint, rules);
    if (reason === undefined && held !== undefined) {
      try {
        const { result, read, next } = this.walk(rules, limits, fingerprint, held, dirty);
        this.held = next;
        return { result, report: { mode: 'delta', dirsRead: read }, touched: touchedBy };
      } catch (error) {
        if (!(error instanceof Rescan)) throw error;
        reason = error.reason;
      }
    }
    const full = reason ?? 'first';
    if (this.off)
      return { result: scanWorkspace(this.root, rules, limits), report: { mode: 'full', reason: 'off', dirsRead: -1 }, touched: touchedBy };
    // Handles of directories gone or replaced pile up (they are closed only all at once): start afresh when they outnumber the live ones.
    if (this.stale.length > this.handles.size / 2 + 64) await this.watches.reset();
    let walked: { result: ScanResult; read: number; next: Held };
    try {
      walked = this.walk(rules, limits, fingerprint, undefined, dirty);
    } catch (error) {
      if (!(error instanceof WatchLimit)) throw error;
      this.off = true;
      return {
        result: scanWorkspace(this.root, rules, limits),
        report: { mode: 'full', reason: 'watch-limit', dirsRead: -1 },
        touched: touchedBy,
      };
    }
    this.held = walked.next;
    const report: WatchReport = {
      mode: 'full',
      reason: full,
      dirsRead: walked.read,
      ...(full === 'verify' && held !== undefined
        ? { missed: missedChanges(held.scan.root, walked.result.root, readPath(dirty, held.linkedDirs)) }
        : {}),
    };
    return { result: walked.result, report, touched: touchedBy };
  }

  /**
   * True when nothing under the root can have changed since `scan` (this root's last scan): a
   * barrier, then no event since. False when the watches cannot say so (an event, another scan,
   * watching off, a possible overflow, hard links): the caller looks with `lstat`.
   */
  async quietSince(scan: ScanResult): Promise<boolean> {
    const held = this.held;
    if (held?.scan !== scan || this.off || held.linkedDirs.size > 0) return false;
    if (!(await this.watches.barrier()) || held.epoch !== this.watches.epoch) return false;
    return this.dirty.size === 0 && this.broken === undefined;
  }

  /** Closes every handle (a {@link Watches.reset} only). */
  closeAll(): void {
    for (const h of this.handles.values()) h.watcher.close();
    for (const w of this.stale) w.close();
    this.handles.clear();
    this.stale.length = 0;
    this.suspect.clear();
    this.held = undefined;
  }

  private fullReason(
    settled: boolean,
    broken: FullScanReason | undefined,
    held: Held | undefined,
    fingerprint: string,
    rules: ExcludeRules,
  ): FullScanReason | undefined {
    if (held === undefined) return 'first';
    if (!settled || held.epoch !== this.watches.epoch) return 'overflow';
    if (broken !== undefined) return broken;
    if (held.fingerprint !== fingerprint) return 'request-changed';
    if (rules.readsGitignore && infoExcludeStat(this.root) !== held.infoExclude) return 'ignore-rules';
    if (held.scansSinceFull + 1 >= this.verifyEvery || Date.now() - held.fullAt >= VERIFY_EVERY_MS) return 'verify';
    return undefined;
  }

  /**
   * One walk of the root: against `held` (a delta: directories off the dirty paths taken over),
   * or without (full). Watches every directory it reads before reading it.
   */
  private walk(
    rules: ExcludeRules,
    limits: ScanLimits,
    fingerprint: string,
    held: Held | undefined,
    dirty: ReadonlySet<string>,
  ): { result: ScanResult; read: number; next: Held } {
    const dirs = this.facts;
    const linkedDirs = new Set<string>();
    const linkedInodes = new Set<string>();
    const entered = new Map<string, fs.Stats>();
    const onPath = held === undefined ? new Set<string>() : readPath(dirty, held.linkedDirs);
    let read = 0;
    const result = scanWorkspace(this.root, rules, limits, {
      ...(held === undefined ? {} : { earlier: held.scan.root }),
      entering: (abs, rel, st) => {
        if (rel === '' && held !== undefined && (dirs.get(held.scan.root)?.ino !== st.ino || this.suspect.has('')))
          throw new Rescan('moved');
        this.watch(abs, rel, st.ino);
        entered.set(rel, st);
        read += 1;
      },
      reuse: (was, st) => {
        if (held === undefined || onPath.has(was.path)) return undefined;
        const facts = dirs.get(was);
        if (facts === undefined || facts.ino !== st.ino || facts.mode !== (st.mode & 0o7777)) return undefined;
        if (st.mtimeMs !== was.exactMtimeMs || st.ctimeMs !== was.ctimeMs) return undefined;
        for (const d of held.linkedDirs) if (d === was.path || d.startsWith(`${was.path}/`)) linkedDirs.add(d);
        return facts.counted;
      },
      walked: (dir, counted, earlier) => {
        const st = entered.get(dir.path) as fs.Stats;
        dirs.set(dir, { ino: st.ino, mode: st.mode & 0o7777, counted });
        for (const child of dir.children) {
          if (child.type !== 'file' || child.dev === undefined) continue;
          const key = `${child.dev}:${child.ino}`;
          if (held !== undefined && !held.linkedInodes.has(key)) throw new Rescan('hard-link');
          linkedInodes.add(key);
          linkedDirs.add(dir.path);
        }
        if (held !== undefined && earlier !== undefined) {
          // A known directory gone from its parent (moved, removed, now excluded): its watches name stale paths.
          const now = new Set(dir.children.flatMap((c) => (c.type === 'dir' ? [c.name] : [])));
          for (const c of earlier.children) if (c.type === 'dir' && !now.has(c.name)) throw new Rescan('moved');
        }
      },
    });
    if (held !== undefined) for (const key of held.linkedInodes) linkedInodes.add(key);
    else {
      // After a full walk, a handle of a directory it did not enter watches one gone or left out.
      for (const [rel, h] of this.handles) {
        if (entered.get(rel)?.ino === h.ino) continue;
        this.stale.push(h.watcher);
        this.handles.delete(rel);
      }
    }
    const next: Held = {
      scan: result,
      fingerprint,
      epoch: this.watches.epoch,
      linkedDirs,
      linkedInodes,
      infoExclude: rules.readsGitignore ? infoExcludeStat(this.root) : undefined,
      scansSinceFull: held === undefined ? 0 : held.scansSinceFull + 1,
      fullAt: held === undefined ? Date.now() : held.fullAt,
    };
    return { result, read, next };
  }

  /** Makes sure directory `rel` (inode `ino`) is watched; a handle for another inode there is kept, stale. */
  private watch(abs: string, rel: string, ino: number): void {
    const had = this.handles.get(rel);
    if (had?.ino === ino && !this.suspect.has(rel)) return;
    if (this.watches.handles >= this.maxDirs) throw new WatchLimit('too many directories to watch');
    let watcher: fs.FSWatcher;
    try {
      watcher = fs.watch(abs, { persistent: false }, (_type, name) => this.event(rel, name));
    } catch {
      throw new WatchLimit('fs.watch failed');
    }
    watcher.on('error', () => {
      this.broken = 'watch-error';
    });
    this.watches.handles += 1;
    if (had !== undefined) this.stale.push(had.watcher);
    this.handles.set(rel, { ino, watcher });
    this.suspect.delete(rel);
  }

  private event(rel: string, name: string | null): void {
    this.watches.count();
    if (this.broken === 'overflow') return;
    this.pending += 1;
    if (this.pending >= MAX_PENDING_EVENTS) {
      // A storm of changes (an install, a build): the next scan reads everything, so nothing more is worth keeping.
      this.broken = 'overflow';
      this.dirty.clear();
      this.touched.clear();
      return;
    }
    this.dirty.add(rel);
    if (name === null || name.includes('\uFFFD')) {
      this.touched.set(rel, 'all');
      return;
    }
    if (name === '.gitignore') this.broken ??= 'ignore-rules';
    const names = this.touched.get(rel);
    if (names === 'all') return;
    if (names === undefined) this.touched.set(rel, new Set([name]));
    else names.add(name);
    // An event about the watched directory itself names it: its parent's entry for it may have changed too, and its handle may be dead.
    if (name === path.posix.basename(rel === '' ? this.root : rel)) {
      this.suspect.add(rel);
      if (rel !== '') this.dirty.add(path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel));
    }
  }
}

/** `.git/info/exclude`'s identity (stat), or `none`. */
function infoExcludeStat(root: string): string {
  const st = fs.statSync(path.join(root, INFO_EXCLUDE_PATH), { throwIfNoEntry: false });
  return st === undefined ? 'none' : `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

/** Every directory with an event, every one holding hard links, and all their ancestors: what a delta scan reads again. */
function readPath(dirty: ReadonlySet<string>, linkedDirs: ReadonlySet<string>): Set<string> {
  const onPath = new Set<string>();
  for (const d of [...dirty, ...linkedDirs]) {
    for (let p = d; !onPath.has(p); p = p.lastIndexOf('/') < 0 ? '' : p.slice(0, p.lastIndexOf('/'))) {
      onPath.add(p);
      if (p === '') break;
    }
  }
  return onPath;
}

/**
 * Directories of `now` (a full scan) whose own entries differ from `before` (the scan the
 * watcher last made) though a delta scan would not have read them (`onPath`, see
 * {@link readPath}): what the watcher missed.
 */
function missedChanges(before: ScannedDir, now: ScannedDir, onPath: ReadonlySet<string>): number {
  let missed = 0;
  const compare = (a: ScannedDir, b: ScannedDir): void => {
    if (!onPath.has(b.path) && !sameEntries(a, b)) missed += 1;
    const olds = new Map(a.children.map((c) => [c.name, c]));
    for (const c of b.children) {
      const was = olds.get(c.name);
      if (c.type === 'dir' && was?.type === 'dir') compare(was, c);
    }
  };
  compare(before, now);
  return missed;
}

function sameEntries(a: ScannedDir, b: ScannedDir): boolean {
  if (a.children.length !== b.children.length) return false;
  for (let i = 0; i < a.children.length; i += 1) {
    const x = a.children[i] as ScannedEntry;
    const y = b.children[i] as ScannedEntry;
    if (x.name !== y.name || x.type !== y.type) return false;
    if (x.type === 'file' && y.type === 'file') {
      // A link made or removed elsewhere changes a linked file's ctime and nothing else (a delta scan finds the link where it was made).
      const ctimeTells = x.dev === undefined && y.dev === undefined;
      if (x.size !== y.size || x.mtimeMs !== y.mtimeMs || (ctimeTells && x.ctimeMs !== y.ctimeMs) || x.ino !== y.ino || x.mode !== y.mode)
        return false;
    } else if (x.type === 'symlink' && y.type === 'symlink') {
      if (x.target !== y.target) return false;
    } else if (x.type === 'dir' && y.type === 'dir') {
      if (x.mode !== y.mode || x.exactMtimeMs !== y.exactMtimeMs || x.ctimeMs !== y.ctimeMs) return false;
    }
  }
  return true;
}
