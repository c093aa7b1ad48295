import path from 'node:path';
import { symlinkStaysInside } from '../../../core/paths.js';
import { IntegrityError } from '../../../errors.js';
import type { PathedFile } from '../../../snapshot/restore/restore-files.js';
import {
  type FlatDir,
  type FlatSymlink,
  NOTHING_REUSED,
  type RestorePlan,
  type TargetReuse,
  type TargetSession,
} from '../../../snapshot/workspace-target.js';
import { StatCacheBuilder, type StatCacheEntry } from '../../../workspace-fs/stat-cache.js';
import { SHELL_MAX_ARGV_BYTES } from './shell-exec.js';
import { linkInSandbox, mkdirsInSandbox, symlinkInSandbox } from './shell-links.js';
import { abortInSandbox, applyDirs, type DirToApply, type StagingLayout, swapInSandbox } from './shell-publish.js';
import { statInSandbox } from './shell-reads.js';
import { shellCacheFile } from './shell-source.js';
import type { MtimePrecision, ShellTargetConfig } from './shell-target.js';
import {
  ARGS_EXEC_RAW_BYTES,
  argCost,
  checkWritten,
  STDIN_EXEC_BYTES,
  WRITE_EXEC_FILES,
  WRITE_FIXED_ARG_BYTES,
  type WriteItem,
  type WrittenFile,
  writeInSandbox,
} from './shell-writes.js';
import { tarCost } from './tar-stream.js';

/**
 * Write execs of small files running at once, at most: the next one is sent (a shell started,
 * its files piped in) while the sandbox still writes and checks the one before. Files of
 * different execs are distinct and their directories already exist, so their order is free.
 */
export const SHELL_WRITES_IN_FLIGHT = 2;

/** Formats a recorded mtime for `touch -d`. */
function touchTime(ms: number, precision: MtimePrecision): string {
  return precision === 'ms' ? `@${(ms / 1000).toFixed(3)}` : `@${Math.floor(ms / 1000)}`;
}

/**
 * One restore into a sandbox over the shell (see `ShellWorkspaceTarget`): small files are
 * batched into one exec each (a tar stream, or a write per file), up to
 * {@link SHELL_WRITES_IN_FLIGHT} of them running at once, large ones streamed; every completed
 * file is read back and checked; what landed becomes the host's stat cache at publish. Links,
 * symlinks, streams and publish wait for every write before them; a failed write fails the next
 * call, and `abort` waits for the writes still running before it removes staging.
 */
export class ShellRestoreSession implements TargetSession {
  readonly complete = false;
  private pending: WriteItem[] = [];
  private pendingBytes = 0;
  private pendingArgBytes = 0;
  /** Write execs sent and not yet checked, oldest first. */
  private readonly inFlight: Array<Promise<void>> = [];
  /** The first failure of a write exec, thrown by the next call. */
  private failure: { error: unknown } | undefined;
  /** What each completed file's stat was where it landed, for the next checkpoint's cache (written at publish). */
  private readonly landed = new Map<string, StatCacheEntry>();
  /** Files whose ctime moves after their write: hard-link leaders and members (`ln`), top-level files inside a mount point (moved). */
  private readonly restat = new Set<string>();
  private published = false;
  private readonly want = new Map<string, PathedFile>();
  /** Where staging is, as the scripts see it. */
  private readonly staging: string;

  constructor(
    private readonly config: ShellTargetConfig,
    private readonly plan: RestorePlan,
    readonly previous: 'absent' | 'empty' | 'non-empty',
    private readonly layout: StagingLayout,
    private readonly stagingName: string,
    private readonly oldName: string,
  ) {
    this.staging =
      layout === 'beside' ? path.posix.join(path.posix.dirname(config.root), stagingName) : path.posix.join(config.root, stagingName);
  }

  /** Whole-second tools keep whole seconds: what the probe found is what is verified, and the receipt reports the rounding. */
  get mtimePrecisionMs(): 1 | 1000 {
    return this.config.mtimePrecision === 's' ? 1000 : 1;
  }

  private readonly mtimeKept = (wantMs: number, gotMs: number): boolean =>
    this.config.mtimePrecision === 's' ? Math.floor(gotMs / 1000) === Math.floor(wantMs / 1000) : Math.floor(gotMs) === wantMs;

  private time(ms: number): string {
    return touchTime(ms, this.config.mtimePrecision);
  }

  async directories(dirs: readonly FlatDir[]): Promise<void> {
    // Created owner-only by the write script's umask; `publish` gives them their modes.
    const items = dirs.filter((d) => d.path !== '');
    if (items.length === 0) return;
    await mkdirsInSandbox(
      this.config.handle,
      this.staging,
      items.map((d) => d.path),
    );
  }

  async reuse(_files: readonly PathedFile[]): Promise<TargetReuse> {
    return NOTHING_REUSED;
  }

  async file(file: PathedFile, content: readonly Uint8Array[] | AsyncIterable<Uint8Array>): Promise<void> {
    if (this.failure !== undefined) throw this.failure.error;
    this.want.set(file.path, file);
    const base = { path: file.path, mode: file.mode, mtimeMs: file.mtimeMs, time: this.time(file.mtimeMs), size: file.size };
    if (Symbol.asyncIterator in content) {
      await this.drain();
      await this.writeStream(base, content as AsyncIterable<Uint8Array>);
      return;
    }
    const bytes = content as readonly Uint8Array[];
    const tar = this.config.tar === true;
    const cost = argCost(file, this.config.mode, tar);
    const limit = this.config.mode === 'stdin' ? STDIN_EXEC_BYTES : ARGS_EXEC_RAW_BYTES;
    if (this.config.mode === 'args' && file.size > ARGS_EXEC_RAW_BYTES) {
      await this.drain();
      await this.writeStream(
        base,
        (async function* () {
          yield* bytes;
        })(),
      );
      return;
    }
    if (
      this.pending.length > 0 &&
      (this.pendingBytes + (tar ? tarCost(file) : file.size) > limit ||
        this.pending.length >= WRITE_EXEC_FILES ||
        this.pendingArgBytes + cost > SHELL_MAX_ARGV_BYTES - WRITE_FIXED_ARG_BYTES)
    )
      await this.flush();
    this.pending.push({ ...base, bytes, complete: true });
    this.pendingBytes += tar ? tarCost(file) : file.size;
    this.pendingArgBytes += cost;
  }

  /**
   * Sends the pending small files in one exec, ordered by mode (one `chmod` per mode), checked
   * when it answers; waits while {@link SHELL_WRITES_IN_FLIGHT} are running.
   */
  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const items = [...this.pending].sort((a, b) => a.mode - b.mode);
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingArgBytes = 0;
    const job = writeInSandbox(this.config.handle, this.staging, items, this.config.mode, {
      tar: this.config.tar === true,
      signal: this.plan.signal,
    }).then((written) => this.check(written));
    job.catch((error: unknown) => {
      this.failure ??= { error };
    });
    this.inFlight.push(job);
    while (this.inFlight.length >= SHELL_WRITES_IN_FLIGHT) await this.settleOldest();
  }

  /** Sends what is pending and waits for every write exec; throws the first failure. */
  private async drain(): Promise<void> {
    await this.flush();
    while (this.inFlight.length > 0) await this.settleOldest();
  }

  private async settleOldest(): Promise<void> {
    await (this.inFlight.shift() as Promise<void>).catch(() => undefined);
    if (this.failure !== undefined) throw this.failure.error;
  }

  /** A file too large for one exec: streamed on stdin, or appended in argument-sized execs. */
  private async writeStream(base: Omit<WriteItem, 'bytes' | 'complete'>, content: AsyncIterable<Uint8Array>): Promise<void> {
    if (this.config.mode === 'stdin') {
      this.check(
        await writeInSandbox(this.config.handle, this.staging, [{ ...base, bytes: [], complete: true }], 'stdin', {
          stdin: content,
          signal: this.plan.signal,
        }),
      );
      return;
    }
    let parts: Uint8Array[] = [];
    let held = 0;
    let started = false;
    const send = async (complete: boolean): Promise<void> => {
      const item: WriteItem = { ...base, bytes: parts, size: held, complete, ...(started ? { append: true } : {}) };
      parts = [];
      held = 0;
      started = true;
      this.check(await writeInSandbox(this.config.handle, this.staging, [item], 'args', { signal: this.plan.signal }));
    };
    for await (const piece of content) {
      for (let at = 0; at < piece.byteLength; ) {
        const take = Math.min(piece.byteLength - at, ARGS_EXEC_RAW_BYTES - held);
        parts.push(piece.subarray(at, at + take));
        held += take;
        at += take;
        if (held === ARGS_EXEC_RAW_BYTES) await send(false);
      }
    }
    await send(true);
  }

  /** Checks what the sandbox read back and records it for the next checkpoint's stat cache. */
  private check(written: readonly WrittenFile[]): void {
    for (const w of written) {
      const file = this.want.get(w.path) as PathedFile;
      checkWritten(w, file, this.mtimeKept);
      if (this.layout === 'inside' && !w.path.includes('/')) this.restat.add(w.path);
      this.landed.set(w.path, {
        size: w.stat.size,
        mtimeMs: w.stat.mtimeMs,
        ctimeMs: w.stat.ctimeMs,
        ino: w.stat.ino,
        mode: file.mode,
        sha256: file.sha256,
        chunks: file.chunks,
      });
    }
  }

  async links(members: readonly PathedFile[]): Promise<void> {
    await this.drain();
    if (members.length === 0) return;
    for (const m of members) {
      this.restat.add(m.path).add(m.hardlink as string);
      this.want.set(m.path, m);
    }
    await linkInSandbox(
      this.config.handle,
      this.staging,
      members.map((m) => ({ path: m.path, leader: m.hardlink as string })),
    );
  }

  async symlinks(links: readonly FlatSymlink[]): Promise<void> {
    await this.drain();
    for (const l of links) {
      if (!symlinkStaysInside(l.path, l.target)) {
        throw new IntegrityError('INTEGRITY', `symlink ${l.path} would point outside the workspace; nothing was published`, {
          data: { path: l.path, field: 'target' },
        });
      }
    }
    if (links.length === 0) return;
    await symlinkInSandbox(
      this.config.handle,
      this.staging,
      links.map((l) => ({ path: l.path, target: l.target, mtimeMs: l.mtimeMs, time: this.time(l.mtimeMs) })),
      this.mtimeKept,
    );
  }

  async publish(): Promise<void> {
    if (this.published) return;
    await this.drain();
    const { flat, rootRecorded } = this.plan;
    const toApply = (d: FlatDir): DirToApply => ({ path: d.path, mode: d.mode, mtimeMs: d.mtimeMs, time: this.time(d.mtimeMs) });
    // Children before parents, so setting one directory's time is not undone by work inside it.
    const children = flat.dirs.filter((d) => d.path !== '').reverse();
    // Inside a mount point, top-level directories move to a new parent, which rewrites their `..`: their modes come after the move.
    const early = this.layout === 'inside' ? children.filter((d) => d.path.includes('/')) : children;
    const late = this.layout === 'inside' ? children.filter((d) => !d.path.includes('/')) : [];
    await applyDirs(this.config.handle, this.staging, early.map(toApply), this.mtimeKept);
    await swapInSandbox(this.config.handle, this.layout, this.config.root, this.stagingName, this.oldName);
    this.published = true;
    const root = flat.dirs[0];
    const last = late.map(toApply);
    // A checkpoint older than its root record leaves the root 0755 with its mtime untouched.
    if (root !== undefined) last.push(rootRecorded ? toApply(root) : { path: '', mode: 0o755 });
    await applyDirs(this.config.handle, this.config.root, last, this.mtimeKept);
    await this.saveCache();
  }

  /** Records what was written (stats taken again for files whose ctime moved since) as the host's stat cache for the next checkpoint. */
  private async saveCache(): Promise<void> {
    const again = [...this.restat];
    const stats = again.length === 0 ? [] : await statInSandbox(this.config.handle, this.config.root, again);
    for (const [i, p] of again.entries()) {
      const st = stats?.[i];
      const file = this.want.get(p) as PathedFile;
      if (st === undefined || st.size !== file.size) this.landed.delete(p);
      else
        this.landed.set(p, {
          size: st.size,
          mtimeMs: st.mtimeMs,
          ctimeMs: st.ctimeMs,
          ino: st.ino,
          mode: file.mode,
          sha256: file.sha256,
          chunks: file.chunks,
        });
    }
    const cache = new StatCacheBuilder(Date.now());
    for (const [p, e] of this.landed) cache.add(p, e);
    cache.save(shellCacheFile(this.config.cacheDir, this.plan.workspace.id, this.config.handle, this.config.root), this.plan.checkpoint.id);
  }

  async abort(): Promise<void> {
    if (this.published) return;
    // No write may still be running in staging when it is removed.
    await Promise.allSettled(this.inFlight.splice(0));
    await abortInSandbox(this.config.handle, this.config.root, this.stagingName, this.layout);
  }
}
