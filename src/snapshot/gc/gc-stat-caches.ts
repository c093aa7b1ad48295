import fs from 'node:fs';
import path from 'node:path';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import { readStatCacheBase, statCacheDir } from '../../workspace-fs/stat-cache.js';

/**
 * A stat cache whose checkpoint this store does not hold is removed once it has not been
 * written for this long. Such a cache belongs to a store that was deleted, to a checkpoint
 * retention forgot, or to another store sharing the cache directory; a store in use rewrites
 * its caches (or grows them) at every checkpoint and restore, so a week-old foreign cache is rarely worth keeping.
 */
export const STAT_CACHE_FOREIGN_KEEP_MS = 7 * 24 * 60 * 60 * 1000;
/** A temp file a killed cache write left behind is removed after this long (a live write takes milliseconds). */
export const STAT_CACHE_TEMP_KEEP_MS = 60 * 60 * 1000;

/**
 * Removes stat caches under `cacheDir` that no checkpoint of this store needs (DESIGN section 4):
 * damaged or older-format files at once, left-over temp files after an hour, and caches whose
 * header names a checkpoint this store does not hold once unwritten for
 * {@link STAT_CACHE_FOREIGN_KEEP_MS}. A cache of one of this store's checkpoints is kept.
 * Resolves with the paths of the files removed (files that vanish meanwhile are not listed);
 * with `dryRun`, of the files that would be removed, removing none.
 */
export async function sweepStatCaches(
  meta: Pick<MetadataStore, 'checkpoints'>,
  cacheDir: string,
  now: number,
  dryRun = false,
): Promise<string[]> {
  const dir = statCacheDir(cacheDir);
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(file);
    } catch {
      continue;
    }
    if (!stat.isFile()) continue;
    const age = now - stat.mtimeMs;
    let doomed: boolean;
    if (name.endsWith('.tmp')) doomed = age > STAT_CACHE_TEMP_KEEP_MS;
    else if (!name.endsWith('.tsv')) doomed = false;
    else {
      const base = readStatCacheBase(file);
      doomed = base === undefined || (age > STAT_CACHE_FOREIGN_KEEP_MS && (await meta.checkpoints.find(base)) === undefined);
    }
    if (doomed && (dryRun || removeFile(file))) removed.push(file);
  }
  return removed;
}

function removeFile(file: string): boolean {
  try {
    fs.unlinkSync(file);
    return true;
  } catch {
    return false;
  }
}
