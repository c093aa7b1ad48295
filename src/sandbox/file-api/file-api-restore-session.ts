import { permissionBits } from '../../core/modes.js';
import { symlinkStaysInside } from '../../core/paths.js';
import { InputError, IntegrityError } from '../../errors.js';
import type { PathedFile } from '../../snapshot/restore/restore-files.js';
import {
  type FlatDir,
  type FlatSymlink,
  NOTHING_REUSED,
  type RestorePlan,
  type TargetReuse,
  type TargetSession,
} from '../../snapshot/workspace-target.js';
import { DEFAULT_MAX_DIRS, DEFAULT_MAX_ENTRIES } from '../../workspace-fs/scan.js';
import { StatCacheBuilder, type StatCacheEntry } from '../../workspace-fs/stat-cache.js';
import { hashBack } from './file-api-reads.js';
import { fileApiCacheFile } from './file-api-source.js';
import type { FileApiTargetConfig } from './file-api-target.js';
import { FILE_API_WRITE_BYTES, type FileStat } from './sandbox-files.js';

/** Names Holdfast gives its staging directories inside a workspace root (never counted as the workspace's content). */
export const STAGING_PREFIX = '.holdfast-stage-';
/** Most top-level entries a publish moves aside: a listing of the previous copy that goes on past it is `LIMIT_EXCEEDED`. */
export const MAX_PUBLISH_ENTRIES = DEFAULT_MAX_ENTRIES + DEFAULT_MAX_DIRS;

/** `INTEGRITY` for a field of `path` the sandbox did not keep. */
function notKept(path: string, field: string): IntegrityError {
  return new IntegrityError(
    'INTEGRITY',
    `the sandbox did not keep the ${field} of ${path === '' ? 'the root' : path}; nothing was published`,
    {
      data: { path, field },
    },
  );
}

/** One restore through a file API (see `FileApiWorkspaceTarget`). */
export class FileApiRestoreSession implements TargetSession {
  readonly complete = false;
  private published = false;
  /** Each written file's `lstat` where it landed, for the next checkpoint's stat cache. */
  private readonly written = new Map<string, PathedFile>();

  constructor(
    private readonly config: FileApiTargetConfig,
    private readonly plan: RestorePlan,
    readonly previous: 'empty' | 'non-empty',
    private readonly staging: string,
    private readonly old: string,
  ) {}

  private get files() {
    return this.config.files;
  }

  /** Creates the staging directory (owner-only) and checks it is one. */
  async open(): Promise<void> {
    await this.files.mkdir(this.staging);
    await this.expectType(this.staging, '', 'dir');
  }

  private at(rel: string): string {
    return `${this.staging}/${rel}`;
  }

  private async expectType(at: string, rel: string, type: FileStat['type']): Promise<FileStat> {
    const st = await this.files.lstat(at);
    if (st?.type !== type) throw notKept(rel, 'type');
    return st;
  }

  async directories(dirs: readonly FlatDir[]): Promise<void> {
    for (const d of dirs) {
      if (d.path === '') continue;
      this.signal();
      await this.files.mkdir(this.at(d.path));
      await this.expectType(this.at(d.path), d.path, 'dir');
    }
  }

  async reuse(_files: readonly PathedFile[]): Promise<TargetReuse> {
    return NOTHING_REUSED;
  }

  async file(file: PathedFile, content: readonly Uint8Array[] | AsyncIterable<Uint8Array>): Promise<void> {
    this.signal();
    const at = this.at(file.path);
    let started = false;
    let held: Uint8Array[] = [];
    let heldBytes = 0;
    const send = async (): Promise<void> => {
      await this.files.write(at, Buffer.concat(held), { append: started });
      started = true;
      held = [];
      heldBytes = 0;
    };
    for await (const piece of content as AsyncIterable<Uint8Array>) {
      for (let from = 0; from < piece.byteLength; ) {
        const take = Math.min(piece.byteLength - from, FILE_API_WRITE_BYTES - heldBytes);
        held.push(piece.subarray(from, from + take));
        heldBytes += take;
        from += take;
        if (heldBytes === FILE_API_WRITE_BYTES) await send();
      }
    }
    if (!started || heldBytes > 0) await send();
    await this.finish(file, at);
  }

  /** Mode and mtime applied, then checked; the bytes read back and hashed; nothing may have moved in between. */
  private async finish(file: PathedFile, at: string): Promise<void> {
    await this.files.chmod(at, permissionBits(file.mode));
    await this.files.utimes(at, file.mtimeMs);
    const before = await this.checkFile(file, at);
    const back = await hashBack(this.files, at, file.size);
    if (back.size !== file.size || back.sha256 !== file.sha256) throw notKept(file.path, 'sha256');
    const after = await this.checkFile(file, at);
    if (after.ctimeMs !== before.ctimeMs || after.ino !== before.ino) throw notKept(file.path, 'sha256');
    this.written.set(file.path, file);
  }

  private async checkFile(file: PathedFile, at: string): Promise<FileStat> {
    const st = await this.expectType(at, file.path, 'file');
    if (st.size !== file.size) throw notKept(file.path, 'size');
    if (permissionBits(st.mode) !== permissionBits(file.mode)) throw notKept(file.path, 'mode');
    if (Math.floor(st.mtimeMs) !== file.mtimeMs) throw notKept(file.path, 'mtime');
    return st;
  }

  async links(members: readonly PathedFile[]): Promise<void> {
    for (const m of members) {
      this.signal();
      const leader = m.hardlink as string;
      await this.files.link(this.at(leader), this.at(m.path));
      const [a, b] = [await this.expectType(this.at(leader), leader, 'file'), await this.expectType(this.at(m.path), m.path, 'file')];
      if (a.ino !== b.ino || a.dev !== b.dev) throw notKept(m.path, 'hardlink');
      this.written.set(m.path, m);
    }
  }

  async symlinks(links: readonly FlatSymlink[]): Promise<void> {
    for (const l of links) {
      if (!symlinkStaysInside(l.path, l.target)) throw notKept(l.path, 'target');
    }
    for (const l of links) {
      this.signal();
      const at = this.at(l.path);
      await this.files.symlink(l.target, at);
      await this.files.utimes(at, l.mtimeMs);
      const st = await this.expectType(at, l.path, 'symlink');
      if ((await this.files.readlink(at)) !== l.target) throw notKept(l.path, 'target');
      if (Math.floor(st.mtimeMs) !== l.mtimeMs) throw notKept(l.path, 'mtime');
    }
  }

  async publish(): Promise<void> {
    if (this.published) return;
    const { flat, rootRecorded } = this.plan;
    // Children before parents, so setting one directory's time is not undone by work inside it;
    // top-level directories move to a new parent (their `..` changes), so theirs come after the move.
    const children = flat.dirs.filter((d) => d.path !== '').reverse();
    for (const d of children.filter((c) => c.path.includes('/'))) await this.applyDir(this.at(d.path), d);
    await this.swap();
    this.published = true;
    // The previous copy goes once the new one is in place, before the root's time is set (removing it moves that time).
    await this.files.remove(this.old);
    for (const d of children.filter((c) => !c.path.includes('/'))) await this.applyDir(d.path, d);
    const root = flat.dirs[0];
    // A checkpoint older than its root record leaves the root 0755 with its mtime untouched.
    if (root !== undefined && rootRecorded) await this.applyDir('', root);
    else await this.applyDir('', { path: '', mode: 0o755 });
    await this.saveCache();
  }

  private async applyDir(at: string, d: { path: string; mode: number; mtimeMs?: number }): Promise<void> {
    await this.files.chmod(at, d.mode);
    if (d.mtimeMs !== undefined) await this.files.utimes(at, d.mtimeMs);
    const st = await this.expectType(at, d.path, 'dir');
    if (permissionBits(st.mode) !== d.mode) throw notKept(d.path, 'mode');
    if (d.mtimeMs !== undefined && Math.floor(st.mtimeMs) !== d.mtimeMs) throw notKept(d.path, 'mtime');
  }

  /**
   * Moves every previous top-level entry into the old directory, then every staged entry into
   * the root. A failed move puts back what had moved, so the previous copy stays whole.
   */
  private async swap(): Promise<void> {
    const previous = await this.names('', (n) => !n.startsWith(STAGING_PREFIX));
    const staged = await this.names(this.staging, () => true);
    await this.files.mkdir(this.old);
    const aside: string[] = [];
    const placed: string[] = [];
    try {
      for (const n of previous) {
        await this.files.rename(n, `${this.old}/${n}`);
        aside.push(n);
      }
      for (const n of staged) {
        await this.files.rename(`${this.staging}/${n}`, n);
        placed.push(n);
      }
    } catch (error) {
      for (const n of placed.reverse()) await this.files.rename(n, `${this.staging}/${n}`);
      for (const n of aside.reverse()) await this.files.rename(`${this.old}/${n}`, n);
      await this.files.remove(this.old);
      throw error;
    }
    await this.files.remove(this.staging);
  }

  /** The names of a directory the publish moves, bounded by {@link MAX_PUBLISH_ENTRIES}. */
  private async names(dir: string, keep: (name: string) => boolean): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.files.list(dir)) {
      const name = e?.name;
      if (typeof name !== 'string' || name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
        throw notKept(dir, 'listing');
      if (keep(name)) out.push(name);
      if (out.length > MAX_PUBLISH_ENTRIES) {
        throw new InputError(
          'LIMIT_EXCEEDED',
          `[files] ${this.files.label} lists more than ${MAX_PUBLISH_ENTRIES} entries; nothing was published`,
          {
            data: { limit: MAX_PUBLISH_ENTRIES, source: 'files' },
          },
        );
      }
    }
    return out;
  }

  /** Records what was written, stated where it landed, as the host's stat cache for the next checkpoint. */
  private async saveCache(): Promise<void> {
    const cache = new StatCacheBuilder(Date.now());
    for (const [p, file] of this.written) {
      const st = await this.files.lstat(p);
      if (st?.type !== 'file' || st.size !== file.size) continue;
      const entry: StatCacheEntry = {
        size: st.size,
        mtimeMs: st.mtimeMs,
        ctimeMs: st.ctimeMs,
        ino: st.ino,
        mode: file.mode,
        sha256: file.sha256,
        chunks: file.chunks,
      };
      cache.add(p, entry);
    }
    cache.save(fileApiCacheFile(this.config.cacheDir, this.plan.workspace.id, this.config.cacheKey), this.plan.checkpoint.id);
  }

  async abort(): Promise<void> {
    if (this.published) return;
    await this.files.remove(this.staging);
  }

  private signal(): void {
    this.plan.signal?.throwIfAborted();
  }
}
