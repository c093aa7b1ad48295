import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { describeBlobStoreContract } from '../blob-store.contract.js';
import { LocalDiskBlobStore } from './local-disk.js';

describeBlobStoreContract({
  name: 'local-disk',
  create: async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-blobs-'));
    return { store: await LocalDiskBlobStore.open({ path: dir }), cleanup: () => fs.rm(dir, { recursive: true, force: true }) };
  },
});

describe('local-disk driver', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((d) => fs.rm(d, { recursive: true, force: true })));
  });
  async function fresh(): Promise<string> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-blobs-'));
    dirs.push(dir);
    return dir;
  }

  it('stores keys under their own fan-out path and leaves no temp files', async () => {
    const dir = await fresh();
    const store = await LocalDiskBlobStore.open({ path: dir });
    await store.put('packs/ab/abcdef', Buffer.from('pack'));
    expect(await fs.readFile(path.join(dir, 'packs', 'ab', 'abcdef~'), 'utf8')).toBe('pack');
    expect(await fs.readdir(path.join(dir, '.tmp'))).toEqual([]);
  });

  it('a key may also be the directory prefix of another key', async () => {
    const store = await LocalDiskBlobStore.open({ path: await fresh() });
    await store.put('a', Buffer.from('1'));
    await store.put('a/b', Buffer.from('2'));
    expect(Buffer.from(await store.get('a')).toString()).toBe('1');
    expect(Buffer.from(await store.get('a/b')).toString()).toBe('2');
  });

  it('two stores on one directory race to create a key: exactly one wins', async () => {
    const dir = await fresh();
    const [s1, s2] = await Promise.all([LocalDiskBlobStore.open({ path: dir }), LocalDiskBlobStore.open({ path: dir })]);
    const bodies = Array.from({ length: 20 }, () => randomBytes(32 * 1024));
    const results = await Promise.all(bodies.map((b, i) => (i % 2 ? s1 : s2).put('race/one', b)));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const winner = bodies[results.findIndex((r) => r.created)];
    expect(Buffer.from(await s1.get('race/one')).equals(winner ?? Buffer.alloc(0))).toBe(true);
  });

  it('sweeps stale temp files of crashed writers on open, and keeps fresh ones', async () => {
    const dir = await fresh();
    await LocalDiskBlobStore.open({ path: dir });
    const stale = path.join(dir, '.tmp', 'dead.part');
    const live = path.join(dir, '.tmp', 'live.part');
    await fs.writeFile(stale, 'x');
    await fs.writeFile(live, 'y');
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    await fs.utimes(stale, old, old);
    const store = await LocalDiskBlobStore.open({ path: dir });
    expect((await fs.readdir(path.join(dir, '.tmp'))).sort()).toEqual(['live.part']);
    const listed: string[] = [];
    for await (const s of store.list('')) listed.push(s.key);
    expect(listed).toEqual([]);
  });

  it('ignores foreign files that are not objects when listing', async () => {
    const dir = await fresh();
    const store = await LocalDiskBlobStore.open({ path: dir });
    await store.put('p/k', Buffer.from('v'));
    await fs.writeFile(path.join(dir, 'p', 'README'), 'not an object');
    const listed: string[] = [];
    for await (const s of store.list('p/')) listed.push(s.key);
    expect(listed).toEqual(['p/k']);
  });

  it('reports a store it cannot create as STORE_UNAVAILABLE', async () => {
    const dir = await fresh();
    await fs.writeFile(path.join(dir, 'file'), 'x');
    await expect(LocalDiskBlobStore.open({ path: path.join(dir, 'file', 'sub') })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
