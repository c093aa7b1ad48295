import { LongPaths } from '../../workspace-fs/long-paths.js';
import { StatCache, type StatCacheBuilder } from '../../workspace-fs/stat-cache.js';
import type { FlatTree } from '../tree-walk.js';
import { type OldCopy, readOldCopy } from './old-copy.js';
import { OldFiles } from './old-files.js';
import { type RootExpectation, targetMatches } from './restore-match.js';
import { type LocalReuse, type ReuseContext, recordLinks, reuseOldCopy } from './restore-reuse.js';

/** Old-copy entries walked per entry of the checkpoint (and at least this many): the old copy is not bounded by any limit. */
const OLD_ENTRIES_PER_ENTRY = 2;
const MIN_OLD_ENTRIES = 200_000;

/**
 * The previous copy at a warm restore's target, walked once (no symlink followed) and known
 * by content through its stat cache: it either already is the checkpoint ({@link unchanged},
 * then the restore has nothing to write) or supplies files and chunks to the staging tree
 * ({@link reuse}). Never modified. {@link close} releases the directory descriptors that
 * paths beyond PATH_MAX needed; it may be called more than once.
 */
export class WarmTarget {
  private readonly long = new LongPaths();
  private readonly old: OldCopy;
  private readonly files: OldFiles;

  /** Walks `target` (a non-empty real directory) with the stat cache in `cacheFile`. */
  constructor(
    private readonly target: string,
    cacheFile: string,
    flat: FlatTree,
  ) {
    const max = Math.max(MIN_OLD_ENTRIES, OLD_ENTRIES_PER_ENTRY * (flat.dirs.length + flat.files.length + flat.symlinks.length));
    this.old = this.closingOnError(() => readOldCopy(target, StatCache.load(cacheFile), this.long, max));
    this.files = new OldFiles(target, this.long);
  }

  /** True when the target already is exactly `flat` (see {@link targetMatches}); then every file is in `cache`. */
  unchanged(flat: FlatTree, root: RootExpectation, cache: StatCacheBuilder): boolean {
    return this.closingOnError(() => targetMatches(flat, this.old, this.files, root, cache));
  }

  /** Builds in staging what the previous copy can supply (see {@link reuseOldCopy}). */
  reuse(ctx: Omit<ReuseContext, 'old' | 'oldFiles' | 'long'>): Promise<LocalReuse> {
    return reuseOldCopy({ ...ctx, old: this.old, oldFiles: this.files, long: this.long });
  }

  /** After publishing: records the files that are links to old inodes in `cache` (see {@link recordLinks}). */
  recordLinks(reuse: LocalReuse, cache: StatCacheBuilder): void {
    recordLinks(reuse, this.target, this.long, cache);
  }

  private closingOnError<T>(work: () => T): T {
    try {
      return work();
    } catch (error) {
      this.close();
      throw error;
    }
  }

  /** Closes the directory descriptors held for long paths. */
  close(): void {
    this.long.close();
  }
}
