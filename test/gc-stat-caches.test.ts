import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STAT_CACHE_FOREIGN_KEEP_MS, STAT_CACHE_TEMP_KEEP_MS } from '../src/snapshot/gc/gc-stat-caches.js';
import { readStatCacheBase, statCacheDir } from '../src/workspace-fs/stat-cache.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { writeFile } from './support/trees.js';

const HOUR_MS = 60 * 60 * 1000;

describe.each(BACKENDS)('gc of stat caches on $name', (backend) => {
  let b: OpenedBackends;
  let caches: string;
  let own: string;
  let ownBase: string;

  beforeAll(async () => {
    b = await backend.open();
    const source = path.join(b.dir, 'source');
    writeFile(source, 'a.txt', 'alpha');
    writeFile(source, 'sub/b.txt', 'beta');
    const result = await b.snapshots.checkpoint({ dir: source, workspace: 'ws' });
    ownBase = result.checkpoint.id;
    caches = statCacheDir(path.join(b.dir, 'cache'));
    const files = fs.readdirSync(caches);
    expect(files).toHaveLength(1);
    own = path.join(caches, files[0] as string);
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  /** Writes a cache file with `header` as its first line, last written `ageMs` ago. */
  function plant(name: string, header: string, ageMs: number): string {
    const file = path.join(caches, name);
    fs.writeFileSync(file, `${header}\nsome\u0002line\n`);
    const at = new Date(Date.now() - ageMs);
    fs.utimesSync(file, at, at);
    return file;
  }
  const foreign = (): string => `holdfast-stat-cache 2\t${randomUUID()}`;

  it('a checkpoint writes a cache whose header names its checkpoint, tying it to this store', () => {
    expect(readStatCacheBase(own)).toBe(ownBase);
  });

  it('removes damaged, old-format, stale foreign and stale temp caches; keeps this store’s and recent foreign ones', async () => {
    const old = Date.now() - STAT_CACHE_FOREIGN_KEEP_MS - HOUR_MS;
    fs.utimesSync(own, new Date(old), new Date(old));
    const doomed = [
      plant('old-format.tsv', 'holdfast-stat-cache 1\tsomething', 0),
      plant('damaged.tsv', '\u0000\u0000garbage', 0),
      plant('stale-foreign.tsv', foreign(), STAT_CACHE_FOREIGN_KEEP_MS + HOUR_MS),
      plant('killed-write.tsv.abc.tmp', foreign(), STAT_CACHE_TEMP_KEEP_MS + HOUR_MS),
    ];
    const kept = [
      own,
      plant('recent-foreign.tsv', foreign(), HOUR_MS),
      plant('writing-now.tsv.def.tmp', foreign(), 0),
      plant('not-a-cache.txt', 'whatever', STAT_CACHE_FOREIGN_KEEP_MS + HOUR_MS),
    ];

    const dry = await b.snapshots.gc({ graceMs: 0, dryRun: true });
    // A dry run lists what it would remove, and removes nothing.
    expect(dry.statCachesRemoved).toBe(doomed.length);
    expect([...dry.listing.statCachesRemoved].sort()).toEqual([...doomed].sort());
    for (const file of [...doomed, ...kept]) expect(fs.existsSync(file)).toBe(true);

    const report = await b.snapshots.gc({ graceMs: 0 });
    expect(report.statCachesRemoved).toBe(doomed.length);
    for (const file of doomed) expect(fs.existsSync(file)).toBe(false);
    for (const file of kept) expect(fs.existsSync(file)).toBe(true);
    expect((await b.snapshots.gc({ graceMs: 0 })).statCachesRemoved).toBe(0);
  }, 120_000);
});
