import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { permissionBits } from '../../core/modes.js';
import { fsPath } from '../../core/name-bytes.js';
import { symlinkStaysInside } from '../../core/paths.js';
import { ConflictError, InputError, IntegrityError } from '../../errors.js';
import { checkKept, utimeOf } from '../../workspace-fs/fs-exact.js';
import { LongPaths } from '../../workspace-fs/long-paths.js';
import { removeTree } from '../../workspace-fs/remove-tree.js';
import { StatCacheBuilder, statCacheFile } from '../../workspace-fs/stat-cache.js';
import type { SnapshotDeps } from '../snapshot-deps.js';
import type { FlatDir, FlatSymlink, RestorePlan, TargetReuse, TargetSession, WorkspaceTarget } from '../workspace-target.js';
import { finishFile, openNew, type PathedFile, type StagedPath, writeFile } from './restore-files.js';
import type { FileWriter, LocalReuse } from './restore-reuse.js';
import { beginStaging, endStaging, sweepStaleStaging } from './restore-staging.js';
import { refuseStoreOverlap } from './restore-target.js';
import { WarmTarget } from './warm-target.js';

/** What a local target needs of the snapshot service: the stores (to refuse overlapping them) and the stat-cache directory. */
export type LocalTargetDeps = Pick<SnapshotDeps, 'blobs' | 'meta' | 'cacheDir'>;

type TargetState = TargetSession['previous'];

/**
 * A workspace that is a directory on this host. The tree is built in a staging directory
 * beside the target (registered under the cache directory, so a killed restore's staging is
 * swept by the next one) and published by rename; a non-empty target's previous copy is
 * walked once without following symlinks and reused by content (a renamed file is found
 * wherever it now lies, a changed large file keeps its unchanged chunks). A target
 * overlapping the blob store, the metadata store or the stat cache is refused.
 *
 * What comes back is exact: names as their bytes, paths of any length (through
 * `LongPaths`), mtimes to the millisecond before 1970 and far ahead, hard-link members as
 * links to their leader, and the root's recorded mode and mtime. Each mode and mtime is
 * read back after it is set; one the filesystem did not keep fails with `INTEGRITY` (data:
 * `path`, `field`). After publishing, the stat cache records every file so the next
 * checkpoint and the next warm restore need not read it.
 */
export class LocalWorkspaceTarget implements WorkspaceTarget {
  readonly label: string;

  constructor(
    dir: string,
    private readonly deps: LocalTargetDeps,
  ) {
    this.label = path.resolve(dir);
  }

  async begin(plan: RestorePlan): Promise<TargetSession> {
    refuseStoreOverlap(this.label, this.deps);
    const previous = inspectTarget(this.label, plan.replace);
    return new LocalSession(this.label, this.deps, plan, previous);
  }
}

/** One restore into a host directory; see {@link LocalWorkspaceTarget}. */
class LocalSession implements TargetSession {
  readonly complete: boolean;
  private readonly cacheFile: string;
  private readonly cache = new StatCacheBuilder(Date.now());
  private readonly warm: WarmTarget | undefined;
  private readonly long = new LongPaths();
  private readonly at: StagedPath;
  private staging: string | undefined;
  private local: LocalReuse | undefined;
  private published = false;

  constructor(
    private readonly target: string,
    private readonly deps: LocalTargetDeps,
    private readonly plan: RestorePlan,
    readonly previous: TargetState,
  ) {
    const { cacheDir } = deps;
    this.cacheFile = statCacheFile(cacheDir, plan.workspace.id, target);
    this.warm = previous === 'non-empty' ? new WarmTarget(target, this.cacheFile, plan.flat) : undefined;
    const root = plan.flat.dirs[0] as FlatDir;
    // A checkpoint older than its root record leaves the root 0755 with its mtime untouched.
    this.complete = this.warm?.unchanged(plan.flat, plan.rootRecorded ? root : { mode: 0o755 }, this.cache) === true;
    if (!this.complete) {
      try {
        if (previous === 'absent') fs.mkdirSync(path.dirname(target), { recursive: true });
        sweepStaleStaging(cacheDir, target);
        this.staging = beginStaging(cacheDir, target);
      } catch (error) {
        this.warm?.close();
        throw error;
      }
    }
    const staging = this.staging;
    this.at = (rel) => this.long.at(rel === '' ? (staging as string) : path.join(staging as string, rel));
  }

  async directories(dirs: readonly FlatDir[]): Promise<void> {
    for (const dir of dirs) fs.mkdirSync(this.at(dir.path), { mode: 0o700 });
  }

  async reuse(_files: readonly PathedFile[]): Promise<TargetReuse> {
    const { flat, reader, signal } = this.plan;
    const writer: FileWriter = {
      open: (file) => openNew(this.at, file),
      finish: (fd, file, digest) => finishFile(fd, file, digest, this.cache),
    };
    const local = await (this.warm as WarmTarget).reuse({
      flat,
      staging: this.staging as string,
      reader,
      meta: this.deps.meta,
      writer,
      signal,
    });
    this.local = local;
    return local;
  }

  file(file: PathedFile, content: readonly Uint8Array[] | AsyncIterable<Uint8Array>): Promise<void> {
    return writeFile(this.at, file, content, this.cache);
  }

  async links(members: readonly PathedFile[]): Promise<void> {
    linkMembers(members, this.at, this.cache);
  }

  async symlinks(links: readonly FlatSymlink[]): Promise<void> {
    for (const link of links) {
      // Checked when the tree was read; checked again here, where the link is made.
      if (!symlinkStaysInside(link.path, link.target))
        throw new IntegrityError('INTEGRITY', `symlink ${link.path} leads outside the target`, { data: { path: link.path } });
      const p = this.at(link.path);
      fs.symlinkSync(fsPath(link.target), p);
      const time = utimeOf(link.mtimeMs);
      fs.lutimesSync(p, time, time);
      checkKept(link.path, fs.lstatSync(p), undefined, link.mtimeMs);
    }
  }

  async publish(): Promise<void> {
    if (this.published) return;
    if (!this.complete) {
      for (const dir of [...this.plan.flat.dirs].reverse()) {
        const p = this.at(dir.path);
        if (dir.path === '' && !this.plan.rootRecorded) {
          // A checkpoint older than its root record: the root as before, 0755 and mtime untouched.
          fs.chmodSync(p, 0o755);
          continue;
        }
        const mode = permissionBits(dir.mode);
        fs.chmodSync(p, mode);
        const time = utimeOf(dir.mtimeMs);
        fs.utimesSync(p, time, time);
        checkKept(dir.path, fs.lstatSync(p), mode, dir.mtimeMs);
      }
      this.long.close();
      swapIn(this.staging as string, this.target, this.previous);
      endStaging(this.deps.cacheDir, this.staging as string);
      this.staging = undefined;
      if (this.local !== undefined) this.warm?.recordLinks(this.local, this.cache);
    }
    this.warm?.close();
    this.long.close();
    this.cache.save(this.cacheFile, this.plan.checkpoint.id);
    this.published = true;
  }

  async abort(): Promise<void> {
    this.long.close();
    this.warm?.close();
    const staging = this.staging;
    if (staging === undefined) return;
    if (fs.existsSync(staging)) removeTree(staging);
    endStaging(this.deps.cacheDir, staging);
    this.staging = undefined;
  }
}

/**
 * Creates every hard-link member as a link to its leader (complete by now: written or
 * reused) and checks each names the leader's inode. The stat cache gets every member and
 * leader with their final stat (a link changes the inode's ctime).
 */
function linkMembers(files: readonly PathedFile[], at: StagedPath, cache: StatCacheBuilder): void {
  const groups = new Map<string, PathedFile[]>();
  for (const f of files) {
    if (f.hardlink === undefined) continue;
    const group = groups.get(f.hardlink);
    if (group === undefined) groups.set(f.hardlink, [f]);
    else group.push(f);
  }
  for (const [leaderPath, members] of groups) {
    const leaderAt = at(leaderPath);
    for (const m of members) fs.linkSync(leaderAt, at(m.path));
    const st = fs.lstatSync(leaderAt);
    for (const m of members) {
      const linked = fs.lstatSync(at(m.path));
      if (linked.ino !== st.ino || linked.dev !== st.dev || st.nlink < members.length + 1) {
        throw new IntegrityError('INTEGRITY', `restored ${m.path} is not a hard link to ${leaderPath}`, {
          data: { path: m.path, field: 'hardlink' },
        });
      }
    }
    const leader = members[0] as PathedFile; // a member carries its leader's content, mode and mtime
    const identity = { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: leader.mode };
    for (const p of [leaderPath, ...members.map((m) => m.path)])
      cache.add(p, { ...identity, sha256: leader.sha256, chunks: leader.chunks });
  }
}

function inspectTarget(target: string, replace: boolean): TargetState {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(target);
  } catch {
    return 'absent';
  }
  if (!st.isDirectory())
    throw new InputError('INVALID_INPUT', `restore target ${target} exists and is not a directory`, { data: { target } });
  if (fs.readdirSync(target).length === 0) return 'empty';
  if (!replace) {
    throw new ConflictError('CONFLICT', `restore target ${target} is not empty: pass --replace to replace it`, {
      data: { target, reason: 'target-not-empty' },
    });
  }
  return 'non-empty';
}

/** Swaps the staging tree in; the previous copy is removed only after the new one is in place. */
function swapIn(staging: string, target: string, existing: TargetState): void {
  if (existing === 'absent') {
    fs.renameSync(staging, target);
    return;
  }
  const old = path.join(path.dirname(target), `.${path.basename(target)}.holdfast-old-${randomBytes(6).toString('hex')}`);
  fs.renameSync(target, old);
  try {
    fs.renameSync(staging, target);
  } catch (error) {
    fs.renameSync(old, target);
    throw error;
  }
  removeTree(old);
}
