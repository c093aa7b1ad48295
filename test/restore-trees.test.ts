import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { type CraftedObject, commitCrafted, dirEntry, fileEntry, rawChunk, rawTree, symlinkEntry } from './support/crafted-trees.js';
import { codeOf } from './support/error-code.js';
import { describeTree, writeFile } from './support/trees.js';

const GiB = 1024 * 1024 * 1024;
const MiB = 1024 * 1024;

/**
 * Stored trees written as an attacker with write access to the store would write them, made
 * the head of a workspace, then restored: every restore fails with a code, and the target
 * (holding a file of its own, restored with --replace) is exactly as it was, with no staging
 * left beside it.
 */
describe.each(BACKENDS)('restore of a crafted tree on $name', (backend) => {
  let b: OpenedBackends;
  let n = 0;
  const chunk = rawChunk('payload\n');

  beforeAll(async () => {
    b = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  /** Commits `root` as the head of a fresh workspace and restores it over a target holding keep.txt. */
  async function restoreCrafted(objects: readonly CraftedObject[], root: CraftedObject, limits = {}): Promise<string> {
    n += 1;
    const workspace = `crafted-${n}`;
    await commitCrafted(b, workspace, [chunk, ...objects], root);
    const target = path.join(b.dir, `target-${n}`);
    writeFile(target, 'keep.txt', 'mine\n');
    const before = describeTree(target);
    const code = await codeOf(b.snapshots.restore({ dir: target, workspace, replace: true, limits }));
    expect(describeTree(target)).toEqual(before);
    expect(fs.readdirSync(b.dir).filter((name) => name.includes('holdfast-'))).toEqual([]);
    return code;
  }

  const tree = (...entries: Record<string, unknown>[]): CraftedObject => rawTree(entries);

  it.each([
    ['an absolute symlink', symlinkEntry('out', '/etc')],
    ['a symlink climbing out of the root', symlinkEntry('out', '..')],
    ['a symlink into a reserved name', symlinkEntry('out', '.holdfast/x')],
  ])('refuses %s at the root (INTEGRITY)', async (_what, entry) => {
    expect(await restoreCrafted([], tree(entry))).toBe('INTEGRITY');
  });

  it('refuses ../.. one level down and the d/up -> .. , d/up2 -> up/.. chain (INTEGRITY)', async () => {
    const deep = tree(symlinkEntry('out', '../..'));
    expect(await restoreCrafted([deep], tree(dirEntry('d', deep)))).toBe('INTEGRITY');
    const chain = tree(symlinkEntry('up', '..'), symlinkEntry('up2', 'up/..'));
    expect(await restoreCrafted([chain], tree(dirEntry('d', chain)))).toBe('INTEGRITY');
    // The same link alone (d/up -> ..) stays inside, and restores.
    const alone = tree(symlinkEntry('up', '..'));
    const workspace = 'crafted-ok';
    await commitCrafted(b, workspace, [alone], tree(dirEntry('d', alone)));
    const ok = path.join(b.dir, 'ok-target');
    await b.snapshots.restore({ dir: ok, workspace });
    expect(fs.readlinkSync(path.join(ok, 'd/up'))).toBe('..');
    fs.rmSync(ok, { recursive: true });
  });

  it.each([
    ['..', dirEntry('..', rawTree([]))],
    ['a/b', fileEntry('a/b', rawChunk('payload\n'))],
    ['.holdfast', fileEntry('.holdfast', rawChunk('payload\n'))],
  ])('refuses an entry named %j (INTEGRITY)', async (_name, entry) => {
    expect(await restoreCrafted([rawTree([])], tree(entry))).toBe('INTEGRITY');
  });

  it('refuses duplicate and unsorted names (INTEGRITY)', async () => {
    expect(await restoreCrafted([], tree(fileEntry('a', chunk), fileEntry('a', chunk)))).toBe('INTEGRITY');
    expect(await restoreCrafted([], tree(fileEntry('b', chunk), fileEntry('a', chunk)))).toBe('INTEGRITY');
  });

  it('refuses a setuid file and a sticky directory (INTEGRITY), so none is ever created', async () => {
    expect(await restoreCrafted([], tree(fileEntry('su', chunk, 0o4755)))).toBe('INTEGRITY');
    expect(await restoreCrafted([], tree(fileEntry('sg', chunk, 0o2755)))).toBe('INTEGRITY');
    const empty = rawTree([]);
    expect(await restoreCrafted([empty], tree(dirEntry('tmp', empty, 0o1777)))).toBe('INTEGRITY');
  });

  it('refuses a chunk list that does not match the size (INTEGRITY)', async () => {
    const bigger = { ...fileEntry('f', chunk), size: 5 * MiB };
    expect(await restoreCrafted([], tree(bigger))).toBe('INTEGRITY');
    const extra = { ...fileEntry('f', chunk), chunks: [chunk.id, chunk.id] };
    expect(await restoreCrafted([], tree(extra))).toBe('INTEGRITY');
  });

  it('refuses a tiny store that fans out to 131,072 files through shared subtrees (LIMIT_EXCEEDED)', async () => {
    const objects: CraftedObject[] = [];
    let level = tree(fileEntry('f0', chunk), fileEntry('f1', chunk));
    for (let i = 0; i < 16; i += 1) {
      objects.push(level);
      level = tree(dirEntry('a', level), dirEntry('b', level));
    }
    expect(objects.reduce((sum, o) => sum + o.bytes.length, level.bytes.length)).toBeLessThan(36 * 1024);
    // 131,070 directories: the directory limit trips first.
    expect(await restoreCrafted(objects, level)).toBe('LIMIT_EXCEEDED');
    // With directories allowed, the 131,072 files pass the file limit all the same.
    expect(await restoreCrafted(objects, level, { maxDirs: 1_000_000 })).toBe('LIMIT_EXCEEDED');
  });

  it('refuses a file over the file limit and files over the total byte limit, before fetching a byte (LIMIT_EXCEEDED)', async () => {
    // Chunk ids that are in no pack at all: the walk refuses before anything is read.
    const fake = rawChunk('never stored').id;
    const huge = { name: 'huge', type: 'file', mode: 0o644, size: 2 * GiB, mtimeMs: 0, sha256: fake, chunks: Array(512).fill(fake) };
    expect(await restoreCrafted([], tree(huge))).toBe('LIMIT_EXCEEDED');
    const one = { type: 'file', mode: 0o644, size: GiB, mtimeMs: 0, sha256: fake, chunks: Array(256).fill(fake) };
    const many = Array.from({ length: 101 }, (_, i) => ({ name: `f${String(i).padStart(3, '0')}`, ...one }));
    expect(await restoreCrafted([], rawTree(many))).toBe('LIMIT_EXCEEDED');
  });

  it('refuses the same trees through ls and diff (INTEGRITY)', async () => {
    const escaping = tree(symlinkEntry('up', '..'), symlinkEntry('up2', 'up/..'));
    const cp = await commitCrafted(b, 'crafted-browse', [escaping], tree(dirEntry('d', escaping)));
    expect(await codeOf(b.snapshots.ls(cp.id, 'd'))).toBe('INTEGRITY');
    const clean = await commitCrafted(b, 'crafted-browse', [], tree(fileEntry('x', chunk)));
    expect(await codeOf(b.snapshots.diff(clean.id, cp.id))).toBe('INTEGRITY');
  });
});
