import fs from 'node:fs';
import path from 'node:path';
import { readNames } from '../../../workspace-fs/fs-exact.js';
import type { NoFollowResolver } from './safe-fs.js';

/**
 * What one write batch's plan knows of the staging as it stands: each directory an op writes
 * into is listed once (one `readdir`), so a name that is not there costs no `lstat`; a name
 * that is there is `lstat`ed as before. A directory that cannot be listed (not there yet: made
 * by this batch; or unreadable) answers by `lstat` per name. Also remembers each op path's
 * resolved absolute path, so the apply phase does not walk it again. Lives for one request: a
 * directory changed between requests is listed afresh.
 */
export class BatchListing {
  private readonly names = new Map<string, ReadonlySet<string> | 'absent' | 'unlisted'>();
  private readonly resolved = new Map<string, string>();

  constructor(private readonly resolver: NoFollowResolver) {}

  /**
   * `lstat` of the staging path `rel`, whose parents may be planned but not made yet
   * (`planned`): undefined when nothing is there.
   */
  lstat(rel: string, planned: ReadonlySet<string>): fs.Stats | undefined {
    const abs = this.resolve(rel, planned);
    const listing = this.listingOf(path.dirname(abs));
    if (listing === 'absent') return undefined;
    if (listing !== 'unlisted' && !listing.has(path.basename(abs))) return undefined;
    try {
      return fs.lstatSync(this.resolver.at(abs), { throwIfNoEntry: false });
    } catch (error) {
      // A deep path is reached by opening its parents, which fails ENOENT before they exist.
      if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /** The absolute path of `rel` (see `NoFollowResolver.resolve`), walked once per batch. */
  resolve(rel: string, planned?: ReadonlySet<string>): string {
    let abs = this.resolved.get(rel);
    if (abs === undefined) {
      abs = this.resolver.resolve(rel, planned);
      this.resolved.set(rel, abs);
    }
    return abs;
  }

  private listingOf(dir: string): ReadonlySet<string> | 'absent' | 'unlisted' {
    let listing = this.names.get(dir);
    if (listing === undefined) {
      try {
        listing = new Set(readNames(this.resolver.at(dir)));
      } catch (error) {
        listing = (error as { code?: unknown }).code === 'ENOENT' ? 'absent' : 'unlisted';
      }
      this.names.set(dir, listing);
    }
    return listing;
  }
}
