import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CDC_MAX_BYTES, chunkLengths } from '../src/core/fastcdc.js';
import { statCacheFile } from '../src/workspace-fs/stat-cache.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, seededBytes, settleDirMtimes, writeFile } from './support/trees.js';

const OLD_MS = Date.UTC(2024, 0, 2, 3, 4, 5);
const BIG_BYTES = 24 * 1024 * 1024;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The FastCDC chunks a checkpoint cuts `bytes` into: id and length of each. */
function chunksOf(bytes: Buffer): Array<{ id: string; length: number }> {
  let at = 0;
  return chunkLengths(bytes).map((length) => {
    const piece = bytes.subarray(at, at + length);
    at += length;
    return { id: sha(piece), length };
  });
}

/** Bytes of the distinct chunks of `wanted` whose ids are not in `have`: what a restore must fetch. */
function missingBytes(wanted: Array<{ id: string; length: number }>, have: Set<string>): number {
  const seen = new Set<string>();
  let n = 0;
  for (const c of wanted) {
    if (have.has(c.id) || seen.has(c.id)) continue;
    seen.add(c.id);
    n += c.length;
  }
  return n;
}

/** Identity of every file under `root` (inode and ctime), to tell that nothing was rewritten. */
function identities(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const rel of fs.readdirSync(root, { recursive: true }) as string[]) {
    const st = fs.lstatSync(path.join(root, rel));
    out.set(rel, `${st.ino}:${st.ctimeMs}:${st.nlink}`);
  }
  return out;
}

describe('warm restore reuses the old copy by content (local-disk + sqlite)', () => {
  let b: OpenedBackends;
  let source: string;
  let checkpointId: string;
  let workspaceId: string;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    source = path.join(b.dir, 'source');
    for (let i = 0; i < 40; i += 1) writeFile(source, `pkg/lib/f${i}.js`, `module.exports = ${i};\n`.repeat(i + 1), 0o644, OLD_MS);
    // Two files with the same bytes: a restore must give them two inodes, as the checkpoint has them.
    writeFile(source, 'pkg/LICENSE', 'the same licence text\n', 0o644, OLD_MS);
    writeFile(source, 'other/LICENSE', 'the same licence text\n', 0o644, OLD_MS);
    writeFile(source, 'pkg/bin/run', '#!/bin/sh\necho run\n', 0o755, OLD_MS);
    writeFile(source, 'big.bin', seededBytes(BIG_BYTES, 'big'), 0o644, OLD_MS);
    fs.symlinkSync('pkg/bin/run', path.join(source, 'run'));
    settleDirMtimes(source, OLD_MS);
    const result = await b.snapshots.checkpoint({ dir: source, workspace: 'ws' });
    checkpointId = result.checkpoint.id;
    workspaceId = result.checkpoint.workspaceId;
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  const restoreAt = async (name: string): Promise<string> => {
    const target = path.join(b.dir, name);
    await b.snapshots.restore({ dir: target, workspace: 'ws', checkpoint: checkpointId });
    return target;
  };
  const warm = (target: string, checkpoint = checkpointId) =>
    b.snapshots.restore({ dir: target, workspace: 'ws', checkpoint, replace: true });

  it('leaves a target that already is the checkpoint untouched: nothing written, nothing fetched', async () => {
    const target = await restoreAt('same');
    const before = identities(target);
    const receipt = await warm(target);
    expect(receipt).toMatchObject({ bytesFetched: 0, bytesCopiedLocally: 0, filesReused: receipt.files });
    expect(identities(target)).toEqual(before);
    expect(fs.readdirSync(b.dir).filter((n) => n.includes('holdfast-'))).toEqual([]);
    // Anything more, or any mode off, and the target is rebuilt to exactly the checkpoint.
    writeFile(target, 'pkg/extra.txt', 'not in the checkpoint');
    fs.chmodSync(path.join(target, 'pkg/bin/run'), 0o700);
    const again = await warm(target);
    expect(again.bytesFetched).toBe(0);
    expect(describeTree(target)).toEqual(describeTree(source));
  }, 120_000);

  it('links a renamed directory back from where it now lies, with or without a stat cache that knows it: nothing fetched', async () => {
    for (const [name, checkpointFirst] of [
      ['renamed', false],
      ['renamed-cached', true],
    ] as const) {
      const target = await restoreAt(name);
      fs.renameSync(path.join(target, 'pkg'), path.join(target, 'moved'));
      // A checkpoint of the renamed copy rewrites the target's stat cache with the new paths.
      if (checkpointFirst) await b.snapshots.checkpoint({ dir: target, workspace: 'ws' });
      const receipt = await warm(target);
      expect(receipt.bytesFetched).toBe(0);
      expect(receipt.filesReused).toBe(receipt.files);
      expect(describeTree(target)).toEqual(describeTree(source));
      // The two equal licences find an old inode each, never the same one.
      const [a, c] = ['pkg/LICENSE', 'other/LICENSE'].map((p) => fs.lstatSync(path.join(target, p)));
      expect(a?.ino).not.toBe(c?.ino);
      expect([a?.nlink, c?.nlink]).toEqual([1, 1]);
    }
  }, 120_000);

  it('gives back apart two files the old copy had hard-linked together (copied, not linked)', async () => {
    const target = await restoreAt('linked-old');
    fs.rmSync(path.join(target, 'other/LICENSE'));
    fs.linkSync(path.join(target, 'pkg/LICENSE'), path.join(target, 'other/LICENSE'));
    const receipt = await warm(target);
    expect(receipt).toMatchObject({ bytesFetched: 0, bytesCopiedLocally: 2 * 'the same licence text\n'.length });
    const [a, c] = ['pkg/LICENSE', 'other/LICENSE'].map((p) => fs.lstatSync(path.join(target, p)));
    expect(a?.ino).not.toBe(c?.ino);
    expect([a?.nlink, c?.nlink]).toEqual([1, 1]);
    expect(describeTree(target)).toEqual(describeTree(source));
  }, 120_000);

  it('fetches only the chunks a 4 KiB edit in a large file changed, and copies the rest from the old file', async () => {
    const target = await restoreAt('edited');
    const original = fs.readFileSync(path.join(source, 'big.bin'));
    const edited = Buffer.from(original);
    seededBytes(4096, 'edit').copy(edited, 10 * 1024 * 1024);
    fs.writeFileSync(path.join(target, 'big.bin'), edited);
    fs.utimesSync(path.join(target, 'big.bin'), OLD_MS / 1000, OLD_MS / 1000);
    const expected = missingBytes(chunksOf(original), new Set(chunksOf(edited).map((c) => c.id)));
    expect(expected).toBeGreaterThan(0);
    expect(expected).toBeLessThanOrEqual(2 * CDC_MAX_BYTES);
    const receipt = await warm(target);
    expect(receipt.bytesFetched).toBe(expected);
    expect(receipt.bytesCopiedLocally).toBe(BIG_BYTES - expected);
    expect(sha(fs.readFileSync(path.join(target, 'big.bin')))).toBe(sha(original));
    expect(describeTree(target)).toEqual(describeTree(source));
  }, 120_000);

  it('fetches an old chunk whose bytes changed after the stat cache vouched for them, and never writes them', async () => {
    // A second checkpoint whose big.bin differs from the first near its start.
    const v1 = fs.readFileSync(path.join(source, 'big.bin'));
    const v2 = Buffer.from(v1);
    seededBytes(4096, 'second version').copy(v2, 2 * 1024 * 1024);
    const second = path.join(b.dir, 'second');
    fs.cpSync(source, second, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    writeFile(second, 'big.bin', v2, 0o644, OLD_MS);
    const c2 = await b.snapshots.checkpoint({ dir: second, workspace: 'ws2' });
    const c2Restore = (target: string) =>
      b.snapshots.restore({ dir: target, workspace: 'ws2', checkpoint: c2.checkpoint.id, replace: true });

    const target = await restoreAt('stale');
    // The old file changes under an unchanged stat identity (forged into its cache line): the cache says v1.
    const file = path.join(target, 'big.bin');
    const corrupt = Buffer.from(v1);
    seededBytes(4096, 'corruption').copy(corrupt, 18 * 1024 * 1024);
    const before = fs.lstatSync(file);
    fs.writeFileSync(file, corrupt);
    fs.utimesSync(file, OLD_MS / 1000, OLD_MS / 1000);
    const after = fs.lstatSync(file);
    const cacheFile = statCacheFile(path.join(b.dir, 'cache'), workspaceId, target);
    const oldKey = `big.bin\t${before.size}\t${before.mtimeMs}\t${before.ctimeMs}\t${before.ino}\t`;
    const text = fs.readFileSync(cacheFile, 'utf8');
    expect(text).toContain(oldKey);
    fs.writeFileSync(cacheFile, text.replace(oldKey, `big.bin\t${after.size}\t${after.mtimeMs}\t${after.ctimeMs}\t${after.ino}\t`));

    // The stat cache is per workspace and directory: give ws2 the forged one for this target.
    fs.copyFileSync(cacheFile, statCacheFile(path.join(b.dir, 'cache'), c2.checkpoint.workspaceId, target));
    // Old chunks are read where the cache's chunk list puts them: all but the one holding the corruption still verify.
    const trusted = chunksOf(v1);
    const intact = new Set<string>();
    for (let i = 0, at = 0; i < trusted.length; at += (trusted[i] as { length: number }).length, i += 1) {
      const c = trusted[i] as { id: string; length: number };
      if (at + c.length <= 18 * 1024 * 1024 || at >= 18 * 1024 * 1024 + 4096) intact.add(c.id);
    }
    const expected = missingBytes(chunksOf(v2), intact);
    expect(expected).toBeGreaterThan(missingBytes(chunksOf(v2), new Set(trusted.map((c) => c.id))));
    const receipt = await c2Restore(target);
    expect(receipt.bytesFetched).toBe(expected);
    expect(sha(fs.readFileSync(file))).toBe(sha(v2));
  }, 120_000);
});
