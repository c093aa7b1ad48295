import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { describeTree, writeFile } from './support/trees.js';

const OLD_MS = Date.UTC(2024, 0, 2, 3, 4, 5);

/** Every file under `root` with its size, so a test can tell the store was not touched. */
function listing(root: string): string[] {
  return (fs.readdirSync(root, { recursive: true }) as string[])
    .map((rel) => {
      const st = fs.lstatSync(path.join(root, rel));
      return `${rel}:${st.isDirectory() ? 'd' : st.size}`;
    })
    .sort();
}

describe('restore targets on local-disk + sqlite', () => {
  let b: OpenedBackends;
  let source: string;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    source = path.join(b.dir, 'source');
    writeFile(source, 'd/f.txt', 'the same bytes inside and outside\n', 0o644, OLD_MS);
    writeFile(source, 'g.txt', 'g bytes\n', 0o644, OLD_MS);
    await b.snapshots.checkpoint({ dir: source, workspace: 'ws' });
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('warm restore never follows a symlink in the old target to hard-link an outside file in', async () => {
    const target = path.join(b.dir, 'warm');
    await b.snapshots.restore({ dir: target, workspace: 'ws' });
    // The attacker swaps d for a symlink to a directory outside holding a file that matches the
    // checkpoint in content, size, mode and mtime, and makes g.txt a symlink to another such file.
    const outside = path.join(b.dir, 'outside');
    writeFile(outside, 'f.txt', 'the same bytes inside and outside\n', 0o644, OLD_MS);
    writeFile(outside, 'g.txt', 'g bytes\n', 0o644, OLD_MS);
    fs.rmSync(path.join(target, 'd'), { recursive: true });
    fs.symlinkSync(outside, path.join(target, 'd'));
    fs.rmSync(path.join(target, 'g.txt'));
    fs.symlinkSync(path.join(outside, 'g.txt'), path.join(target, 'g.txt'));

    const receipt = await b.snapshots.restore({ dir: target, workspace: 'ws', replace: true });
    expect(receipt.filesReused).toBe(0);
    for (const name of ['f.txt', 'g.txt']) {
      const inside = fs.lstatSync(path.join(target, name === 'f.txt' ? 'd/f.txt' : name));
      const out = fs.lstatSync(path.join(outside, name));
      expect(inside.isFile()).toBe(true);
      expect(inside.ino).not.toBe(out.ino);
      expect(out.nlink).toBe(1);
    }
    expect(fs.lstatSync(path.join(target, 'd')).isDirectory()).toBe(true);
    fs.appendFileSync(path.join(target, 'd/f.txt'), 'edited in the workspace\n');
    expect(fs.readFileSync(path.join(outside, 'f.txt'), 'utf8')).toBe('the same bytes inside and outside\n');
  });

  it('warm restore never finds content by hash through a symlink in the old target, wherever it lies', async () => {
    const target = path.join(b.dir, 'warm-by-content');
    await b.snapshots.restore({ dir: target, workspace: 'ws' });
    // d/ is gone; a symlinked directory and a symlinked file elsewhere in the old copy lead to
    // outside files with d/f.txt's exact content, mode and mtime, under other names.
    const outside = path.join(b.dir, 'outside-by-content');
    writeFile(outside, 'renamed.txt', 'the same bytes inside and outside\n', 0o644, OLD_MS);
    fs.rmSync(path.join(target, 'd'), { recursive: true });
    fs.symlinkSync(outside, path.join(target, 'moved'));
    fs.symlinkSync(path.join(outside, 'renamed.txt'), path.join(target, 'also.txt'));

    const receipt = await b.snapshots.restore({ dir: target, workspace: 'ws', replace: true });
    expect(receipt).toMatchObject({ filesReused: 1, bytesCopiedLocally: 0, bytesFetched: 'the same bytes inside and outside\n'.length });
    const inside = fs.lstatSync(path.join(target, 'd/f.txt'));
    const out = fs.lstatSync(path.join(outside, 'renamed.txt'));
    expect(inside.ino).not.toBe(out.ino);
    expect(out.nlink).toBe(1);
    expect(fs.readdirSync(target).sort()).toEqual(['d', 'g.txt']);
  });

  it('refuses a target that is, contains or lies inside the blob store, the database file and its side files or the stat cache (INVALID_INPUT)', async () => {
    const blobs = b.blobs.localPath as string;
    const dbFile = b.meta.localPath as string;
    const dbDir = path.dirname(dbFile);
    const cache = path.join(b.dir, 'cache');
    fs.mkdirSync(cache, { recursive: true });
    fs.symlinkSync(dbDir, path.join(b.dir, 'alias'));
    const before = listing(dbDir);
    for (const target of [
      blobs,
      path.join(blobs, 'inside'),
      dbDir,
      dbFile,
      `${dbFile}-wal`,
      `${dbFile}-shm`,
      `${dbFile}-journal`,
      path.join(dbFile, 'inside'),
      b.dir,
      cache,
      path.join(cache, 'stat', 'x'),
      path.join(b.dir, 'alias', 'blobs', 'via-symlink'),
      path.join(b.dir, 'alias', 'meta.db'),
    ]) {
      expect(await codeOf(b.snapshots.restore({ dir: target, workspace: 'ws', replace: true })), target).toBe('INVALID_INPUT');
    }
    expect(listing(dbDir)).toEqual(before);
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, problems: [] });
    expect(describeTree(path.join(b.dir, 'source')).size).toBe(3);
  });

  it('a target beside the store, sharing only a name prefix, is still allowed', async () => {
    const target = `${path.dirname(b.meta.localPath as string)}-copy`;
    await b.snapshots.restore({ dir: target, workspace: 'ws' });
    expect(fs.readFileSync(path.join(target, 'g.txt'), 'utf8')).toBe('g bytes\n');
  });

  it('a target beside the SQLite file, in the same directory, is allowed (HOLDFAST_META=sqlite:/srv/meta.db, restore to /srv/ws)', async () => {
    const dbDir = path.dirname(b.meta.localPath as string);
    const before = listing(dbDir).filter((entry) => !entry.startsWith('ws-beside'));
    const target = path.join(dbDir, 'ws-beside');
    await b.snapshots.restore({ dir: target, workspace: 'ws' });
    expect(fs.readFileSync(path.join(target, 'd/f.txt'), 'utf8')).toBe('the same bytes inside and outside\n');
    expect(await codeOf(b.snapshots.restore({ dir: path.join(dbDir, 'meta.db-wal'), workspace: 'ws', replace: true }))).toBe(
      'INVALID_INPUT',
    );
    expect(listing(dbDir).filter((entry) => !entry.startsWith('ws-beside'))).toEqual(before);
  });
});
