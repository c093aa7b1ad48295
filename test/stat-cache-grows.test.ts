/**
 * A local workspace's stat cache grows by what a checkpoint read instead of being written whole
 * (`LocalWorkspaceSource.saveCache`, `StatCacheBuilder.appendTo`): a no-change checkpoint adds
 * one header line, a changed file adds its own line, and past two lines per file (plus a slack)
 * the file is written afresh. What it must keep: a path's last line is the one that vouches,
 * an earlier line never does (even for bytes and mtime put back as they were), and the header
 * the garbage collector reads is the last one.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { readStatCacheBase, statCacheDir } from '../src/workspace-fs/stat-cache.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { SeededMutator } from './support/seeded-mutator.js';
import { describeTree, settleDirMtimes, writeFile } from './support/trees.js';

const OLD = Date.UTC(2024, 0, 1);
const HEADER = 'holdfast-stat-cache 2';
const sha = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

/** Every directory's mtime, the root's too, far from the racy window, so each has its cache line. */
function settle(root: string): void {
  settleDirMtimes(root, OLD);
  fs.utimesSync(root, OLD / 1000, OLD / 1000);
}

describe('a local stat cache that grows', () => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let source: string;
  let cacheFile: string;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    ({ snapshots } = b);
    source = path.join(b.dir, 'source');
    writeFile(source, 'a.txt', 'alpha\n', 0o644, OLD);
    writeFile(source, 'sub/b.txt', 'beta\n', 0o644, OLD);
    writeFile(source, 'sub/deeper/c.txt', 'gamma\n', 0o644, OLD);
    settle(source);
    const first = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(first.stats.filesHashed).toBe(3);
    const files = fs.readdirSync(statCacheDir(path.join(b.dir, 'cache')));
    expect(files).toHaveLength(1);
    cacheFile = path.join(statCacheDir(path.join(b.dir, 'cache')), files[0] as string);
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  /** Each file line's path and sha256, in file order (directory lines and headers left out). */
  const fileLines = (): Array<[string, string]> =>
    fs
      .readFileSync(cacheFile, 'utf8')
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith(HEADER) && !l.startsWith('\u0001'))
      .map((l) => [l.slice(0, l.indexOf('\t')), l.slice(l.indexOf('\u0002') + 1, l.indexOf('\u0002') + 65)]);

  it('a no-change checkpoint appends only its header, and the next one still reads nothing', async () => {
    const before = fs.readFileSync(cacheFile);
    const second = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(second.stats.filesHashed).toBe(0);
    const after = fs.readFileSync(cacheFile);
    expect(after.subarray(0, before.length).equals(before)).toBe(true);
    expect(after.subarray(before.length).toString('utf8')).toBe(`${HEADER}\t${second.checkpoint.id}\n`);
    expect(readStatCacheBase(cacheFile)).toBe(second.checkpoint.id);
    const third = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(third.stats.filesHashed).toBe(0);
    expect(readStatCacheBase(cacheFile)).toBe(third.checkpoint.id);
  }, 120_000);

  it('a changed file appends its own line; its earlier line never vouches again, even for the old bytes and mtime put back', async () => {
    writeFile(source, 'sub/b.txt', 'BETA\n', 0o644, OLD + 1000);
    settle(source);
    const changed = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(changed.stats.filesHashed).toBe(1);
    expect(fileLines().filter(([p]) => p === 'sub/b.txt')).toEqual([
      ['sub/b.txt', sha('beta\n')],
      ['sub/b.txt', sha('BETA\n')],
    ]);
    // The last line vouches: nothing is read again.
    expect((await snapshots.checkpoint({ dir: source, workspace: 'grow' })).stats.filesHashed).toBe(0);

    // Same size and mtime as the first line records, other bytes: only the ctime (and the
    // cache's order) tells them apart, and the file must be read.
    writeFile(source, 'sub/b.txt', 'bEtA\n', 0o644, OLD);
    settle(source);
    const back = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(back.stats.filesHashed).toBe(1);
    const target = path.join(b.dir, 'restored');
    await snapshots.restore({ dir: target, workspace: 'grow' });
    expect(sha(fs.readFileSync(path.join(target, 'sub/b.txt')))).toBe(sha('bEtA\n'));
  }, 120_000);

  it('an append cut short by a crash vouches for nothing: every file is read, and the checkpoint holds the bytes on disk', async () => {
    // Only the content changes: no directory's stat does, so the cached tree ids above the file
    // still match their directories, and only the file's own new line says the tree changed.
    writeFile(source, 'sub/deeper/c.txt', 'GAMMA\n', 0o644, OLD + 2000);
    settle(source);
    const whole = fs.readFileSync(cacheFile);
    const changed = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(changed.stats.filesHashed).toBe(1);
    const added = fs.readFileSync(cacheFile).subarray(whole.length).toString('utf8');
    expect(added.endsWith(`${HEADER}\t${changed.checkpoint.id}\n`)).toBe(true);
    // A crash once the file's new line had reached the disk, and what the write held after it
    // (its directories' lines) had not: had that prefix vouched for anything, the directories'
    // old tree ids would have matched again and the old bytes been saved.
    const line = added.indexOf('sub/deeper/c.txt\t');
    expect(line).toBeGreaterThanOrEqual(0);
    fs.writeFileSync(cacheFile, Buffer.concat([whole, Buffer.from(added.slice(0, added.indexOf('\n', line) + 1))]));
    expect(readStatCacheBase(cacheFile)).not.toBe(changed.checkpoint.id);

    const after = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(after.stats.filesHashed).toBe(3);
    expect(after.checkpoint.rootTree).toBe(changed.checkpoint.rootTree);
    const target = path.join(b.dir, 'restored-after-cut');
    await snapshots.restore({ dir: target, workspace: 'grow' });
    expect(sha(fs.readFileSync(path.join(target, 'sub/deeper/c.txt')))).toBe(sha('GAMMA\n'));
    // Written whole again: one header, naming the new checkpoint.
    expect(
      fs
        .readFileSync(cacheFile, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith(HEADER)),
    ).toEqual([`${HEADER}\t${after.checkpoint.id}`]);
  }, 120_000);

  it('a subtree the cache vouches for whole is taken over (nothing read, the same tree), and one change under it is still seen', async () => {
    // Putting directory stats back changes their ctime: one checkpoint records them as they now are.
    settle(source);
    await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    const first = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(first.stats.filesHashed).toBe(0);
    const again = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(again.stats.filesHashed).toBe(0);
    expect(again.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    // A same-size rewrite deep down: no directory's stat moves (a file written in place leaves
    // its directory as it was), so only the file's own stat says the subtree changed.
    writeFile(source, 'sub/deeper/c.txt', 'GAMMA?\n', 0o644, OLD + 3000);
    const changed = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(changed.stats.filesHashed).toBe(1);
    expect(changed.checkpoint.rootTree).not.toBe(first.checkpoint.rootTree);
    const target = path.join(b.dir, 'restored-settled');
    await snapshots.restore({ dir: target, workspace: 'grow' });
    expect(sha(fs.readFileSync(path.join(target, 'sub/deeper/c.txt')))).toBe(sha('GAMMA?\n'));
    expect(sha(fs.readFileSync(path.join(target, 'a.txt')))).toBe(sha('alpha\n'));
  }, 120_000);

  it('past two lines per file plus the slack, the cache is written afresh with one line per file, still vouching', async () => {
    // Lines for paths long gone (a cache that grew over many checkpoints).
    const gone = Array.from({ length: 1100 }, (_, i) => `gone/${i}\t1\t2\t3\t4\t420\u0002${sha(String(i))}\t=\n`).join('');
    fs.appendFileSync(cacheFile, gone);
    const fresh = await snapshots.checkpoint({ dir: source, workspace: 'grow' });
    expect(fresh.stats.filesHashed).toBe(0);
    const text = fs.readFileSync(cacheFile, 'utf8');
    expect(text.startsWith(`${HEADER}\t${fresh.checkpoint.id}\n`)).toBe(true);
    expect(text.split('\n').filter((l) => l.startsWith(HEADER))).toHaveLength(1);
    expect(fileLines().sort()).toEqual([
      ['a.txt', sha('alpha\n')],
      ['sub/b.txt', sha('bEtA\n')],
      ['sub/deeper/c.txt', sha('GAMMA?\n')],
    ]);
    expect((await snapshots.checkpoint({ dir: source, workspace: 'grow' })).stats.filesHashed).toBe(0);
  }, 120_000);
});

/**
 * The attack on taking subtrees over whole: seeded changes of every kind (renames of files and
 * directories, hard links, same-size rewrites with the mtime put back, deletes, new
 * directories, chmod, symlinks), and now and then every directory's mtime put back to an old
 * value, so only ctime tells. Every checkpoint is restored and compared with the tree it claims
 * to be, bytes, modes and links.
 */
describe('a local stat cache that grows, under seeded changes', () => {
  let b: OpenedBackends;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it.each([0x5e77, 0x5e78, 0x5e79])(
    'seed %i: every checkpoint is the tree it claims',
    async (seed) => {
      const source = path.join(b.dir, `seeded-${seed}`);
      fs.mkdirSync(source);
      const mutator = new SeededMutator(source, seed);
      mutator.seed();
      let reads = 0;
      for (let step = 0; step < 40; step += 1) {
        const did = step === 0 ? 'start' : mutator.step();
        // Directories (the root too) put back to old stats after most changes: only ctime moves.
        if (step % 4 !== 3) settle(source);
        const result = await b.snapshots.checkpoint({ dir: source, workspace: `seeded-${seed}` });
        reads += result.stats.filesHashed;
        const target = path.join(b.dir, `seeded-${seed}-restored-${step}`);
        await b.snapshots.restore({ dir: target, workspace: `seeded-${seed}`, checkpoint: result.checkpoint.id });
        // A symlink a rename made point outside the workspace is left out, and said so.
        const expected = describeTree(source);
        for (const e of result.excluded) if (e.reason === 'symlink-escape') expected.delete(e.path);
        expect({ step, did, tree: describeTree(target) }).toEqual({ step, did, tree: expected });
        fs.rmSync(target, { recursive: true, force: true });
      }
      // The cache was used: far fewer reads than files checkpointed.
      expect(reads).toBeLessThan(40 * 30);
    },
    300_000,
  );
});
