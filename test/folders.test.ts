import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FolderRef, Folders } from '../src/folders/folders.js';
import { collectGarbage } from '../src/snapshot/gc/gc.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';

const DAY = 24 * 60 * 60 * 1000;
const HOUR = 60 * 60 * 1000;

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** A body yielding `bytes` in pieces of `piece` bytes. */
async function* pieces(bytes: Uint8Array, piece = 64 * 1024): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += piece) yield bytes.subarray(at, Math.min(bytes.length, at + piece));
}

/** A body that yields `bytes` and then fails, like a connection cut mid-upload. */
async function* cutOff(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield* pieces(bytes);
  throw new Error('connection reset by peer');
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

/** Pack blobs in the store. */
async function packBlobs(b: OpenedBackends): Promise<string[]> {
  const keys: string[] = [];
  for await (const s of b.blobs.list('packs/')) keys.push(s.key);
  return keys.sort();
}

describe.each(BACKENDS)('work folders on $name', (backend) => {
  let b: OpenedBackends;
  let folders: Folders;
  let tenantId: string;
  let n = 0;
  const ref = (): FolderRef => ({ tenantId, scope: 'project', ownerId: `p${++n}` });

  beforeAll(async () => {
    b = await backend.open();
    folders = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers });
    tenantId = (await b.snapshots.tenant(true)).id;
  });
  afterAll(async () => {
    await b?.cleanup();
  });

  it('streams nested and empty files back byte for byte, creating parents, with ranges', async () => {
    const r = ref();
    const big = randomBytes(5 * 1024 * 1024 + 17);
    const w = await folders.write(r, 'a/b/big.bin', pieces(big), {
      operationId: 'w1',
      executable: true,
      contentType: 'application/x-demo',
    });
    expect(w).toMatchObject({
      applied: true,
      entry: { path: 'a/b/big.bin', kind: 'file', size: big.length, sha256: sha(big), executable: true },
    });
    await folders.write(r, 'empty', pieces(new Uint8Array(0)), { operationId: 'w2' });
    const page = await folders.list(r);
    expect(page.files.map((f) => [f.path, f.kind])).toEqual([
      ['a', 'directory'],
      ['a/b', 'directory'],
      ['a/b/big.bin', 'file'],
      ['empty', 'file'],
    ]);
    expect(page.lastOperationAt).toBeGreaterThan(0);
    const opened = await folders.open(r, 'a/b/big.bin');
    expect(sha(await readAll(opened.body))).toBe(sha(big));
    const ranged = await folders.open(r, 'a/b/big.bin', { range: { offset: 4 * 1024 * 1024 - 3, length: 1024 * 1024 } });
    expect(Buffer.compare(await readAll(ranged.body), big.subarray(4 * 1024 * 1024 - 3, 5 * 1024 * 1024 - 3))).toBe(0);
    expect((await readAll((await folders.open(r, 'empty')).body)).length).toBe(0);
    expect(await codeOf(folders.open(r, 'a/b/big.bin', { maxBytes: 1024 }))).toBe('LIMIT_EXCEEDED');
    expect(await codeOf(folders.open(r, 'missing'))).toBe('NOT_FOUND');
  });

  it('keeps the newer content when an old write is replayed with its old operation id; reuse for other content is CONFLICT', async () => {
    const r = ref();
    const v1 = Buffer.from('version one');
    const v2 = Buffer.from('version two');
    await folders.write(r, 'notes.txt', pieces(v1), { operationId: 'op-1' });
    await folders.write(r, 'notes.txt', pieces(v2), { operationId: 'op-2' });
    const replay = await folders.write(r, 'notes.txt', pieces(v1), { operationId: 'op-1' });
    expect(replay.applied).toBe(false);
    expect(replay.entry?.sha256).toBe(sha(v2));
    expect((await readAll((await folders.open(r, 'notes.txt')).body)).toString()).toBe('version two');
    expect(await codeOf(folders.write(r, 'notes.txt', pieces(Buffer.from('other')), { operationId: 'op-2' }))).toBe('CONFLICT');
    expect((await readAll((await folders.open(r, 'notes.txt')).body)).toString()).toBe('version two');
  });

  it('publishes no cut-off, oversized or mismatched upload, and GC removes what they left after the grace', async () => {
    const r = ref();
    const small = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers }, { limits: { maxFileBytes: 6 * 1024 * 1024 } });
    const before = await packBlobs(b);
    const data = randomBytes(12 * 1024 * 1024);
    await expect(small.write(r, 'cut.bin', cutOff(data.subarray(0, 5 * 1024 * 1024)), { operationId: 'c' })).rejects.toThrow(
      'connection reset',
    );
    expect(await codeOf(small.write(r, 'big.bin', pieces(data), { operationId: 'o' }))).toBe('LIMIT_EXCEEDED');
    const other = randomBytes(5 * 1024 * 1024);
    expect(await codeOf(small.write(r, 'sha.bin', pieces(other), { operationId: 's', expectedSha256: sha(data) }))).toBe('CONFLICT');
    expect((await small.list(r)).files).toEqual([]);
    expect((await small.list(r, { trash: true })).files).toEqual([]);
    // The same ids are free again: nothing was recorded for them.
    const ok = await small.write(r, 'sha.bin', pieces(other), { operationId: 's', expectedSha256: sha(other) });
    expect(ok.applied).toBe(true);
    await small.remove(r, 'sha.bin', { operationId: 'rm' });
    const [trashed] = (await small.list(r, { trash: true })).files;
    await small.purge(r, trashed?.id as string, { operationId: 'purge' });
    const leftovers = (await packBlobs(b)).filter((k) => !before.includes(k));
    const t0 = Date.now();
    await collectGarbage(b, { graceMs: DAY, now: t0 });
    expect((await packBlobs(b)).filter((k) => leftovers.includes(k))).toEqual(leftovers);
    await collectGarbage(b, { graceMs: DAY, now: t0 + DAY + HOUR });
    await collectGarbage(b, { graceMs: DAY, now: t0 + 2 * DAY + 2 * HOUR });
    expect((await packBlobs(b)).filter((k) => leftovers.includes(k))).toEqual([]);
  });

  it('deletes a directory of 1,000 files and restores exactly them; refuses when one path is live again', async () => {
    const r = ref();
    // Written 8 at a time (distinct paths, as concurrent clients would; fewer than the PostgreSQL pool holds): the fixture, not what is tested.
    for (let first = 0; first < 1000; first += 8) {
      await Promise.all(
        Array.from({ length: Math.min(8, 1000 - first) }, (_, k) => first + k).map((i) =>
          folders.write(r, `dir/f${String(i).padStart(4, '0')}`, pieces(Buffer.from(`file ${i}`)), { operationId: `w${i}` }),
        ),
      );
    }
    const listAll = async (trash: boolean) => {
      const out = [];
      let cursor: string | undefined;
      do {
        const page = await folders.list(r, { trash, limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
        out.push(...page.files);
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      return out;
    };
    const live = await listAll(false);
    expect(live).toHaveLength(1001);
    const removed = await folders.remove(r, 'dir', { operationId: 'rm-dir' });
    expect(removed).toEqual({ removed: 1001, applied: true });
    expect(await listAll(false)).toEqual([]);
    const trash = await listAll(true);
    expect(trash).toHaveLength(1001);
    const dir = trash.find((f) => f.path === 'dir');
    await folders.write(r, 'dir/f0500', pieces(Buffer.from('new')), { operationId: 'again' });
    expect(await codeOf(folders.restore(r, dir?.id as string, { operationId: 'restore-1' }))).toBe('CONFLICT');
    expect((await listAll(true)).map((f) => f.id)).toEqual(trash.map((f) => f.id));
    expect((await listAll(false)).map((f) => f.path)).toEqual(['dir', 'dir/f0500']);
    await folders.remove(r, 'dir', { operationId: 'rm-again' });
    const restored = await folders.restore(r, dir?.id as string, { operationId: 'restore-2' });
    expect(restored).toEqual({ restored: 1001, applied: true });
    const back = await listAll(false);
    expect(back.map((f) => [f.id, f.path, f.sha256])).toEqual(live.map((f) => [f.id, f.path, f.sha256]));
    expect(await folders.restore(r, dir?.id as string, { operationId: 'restore-2' })).toEqual({ restored: 0, applied: false });
  });

  it('purge, then GC after the grace deletes the objects, and not before', async () => {
    const r = ref();
    const before = await packBlobs(b);
    const data = randomBytes(3 * 1024 * 1024);
    await folders.write(r, 'doomed.bin', pieces(data), { operationId: 'w' });
    const mine = (await packBlobs(b)).filter((k) => !before.includes(k));
    expect(mine.length).toBeGreaterThan(0);
    const t0 = Date.now();
    await folders.remove(r, 'doomed.bin', { operationId: 'rm' });
    // Trashed files are roots: GC keeps them.
    await collectGarbage(b, { graceMs: 0, now: t0 });
    expect((await packBlobs(b)).filter((k) => mine.includes(k))).toEqual(mine);
    const [trashed] = (await folders.list(r, { trash: true })).files;
    await folders.purge(r, trashed?.id as string, { operationId: 'purge' });
    await collectGarbage(b, { graceMs: DAY, now: t0 + HOUR });
    await collectGarbage(b, { graceMs: DAY, now: t0 + 2 * HOUR });
    expect((await packBlobs(b)).filter((k) => mine.includes(k))).toEqual(mine);
    await collectGarbage(b, { graceMs: DAY, now: t0 + DAY + 2 * HOUR });
    expect((await packBlobs(b)).filter((k) => mine.includes(k))).toEqual([]);
  });

  it('rejects bad paths with INVALID_PATH and writes nothing', async () => {
    const r = ref();
    const bad = [
      '../secret',
      '/absolute',
      'a/../../x',
      'a//b',
      'a\\b',
      'a\u0000b',
      'a\u007fb',
      '.holdfast/x',
      'a/.holdfast',
      './a',
      'a/.',
      'a/',
      '',
      'x'.repeat(1025),
      '\ud800',
    ];
    for (const path of bad) {
      let read = false;
      const body = (async function* () {
        read = true;
        yield Buffer.from('x');
      })();
      expect(await codeOf(folders.write(r, path, body, { operationId: `w-${path}` })), path).toBe('INVALID_PATH');
      expect(read).toBe(false);
      expect(await codeOf(folders.mkdir(r, path, { operationId: `m-${path}` })), path).toBe('INVALID_PATH');
      expect(await codeOf(folders.remove(r, path, { operationId: `r-${path}` })), path).toBe('INVALID_PATH');
      expect(await codeOf(folders.open(r, path)), path).toBe('INVALID_PATH');
    }
    expect(await b.meta.folders.findCollection(r.tenantId, r.scope, r.ownerId)).toBeUndefined();
    expect((await folders.write(r, `${'x'.repeat(1020)}/ok`, pieces(Buffer.from('ok')), { operationId: 'ok' })).applied).toBe(true);
  });

  it('deduplicates folder content with a checkpoint of the same bytes', async () => {
    const r = ref();
    const fs = await import('node:fs/promises');
    const path = await import('node:path');
    const ws = path.join(b.dir, `ws-${n}`);
    await fs.mkdir(ws, { recursive: true });
    const small = randomBytes(200 * 1024);
    const large = randomBytes(6 * 1024 * 1024);
    await fs.writeFile(path.join(ws, 'small.bin'), small);
    await fs.writeFile(path.join(ws, 'large.bin'), large);
    await b.snapshots.checkpoint({ dir: ws, workspace: `dedup-${n}` });
    const before = await packBlobs(b);
    const w1 = await folders.write(r, 'small.bin', pieces(small, 7000), { operationId: 's' });
    const w2 = await folders.write(r, 'large.bin', pieces(large, 100_000), { operationId: 'l' });
    expect([w1.applied, w2.applied]).toEqual([true, true]);
    expect(await packBlobs(b)).toEqual(before);
    expect(sha(await readAll((await folders.open(r, 'large.bin')).body))).toBe(sha(large));
  });

  it('refuses a parent that is a file and changes a kind only with replaceKind', async () => {
    const r = ref();
    await folders.write(r, 'x', pieces(Buffer.from('file')), { operationId: '1' });
    expect(await codeOf(folders.write(r, 'x/y', pieces(Buffer.from('child')), { operationId: '2' }))).toBe('CONFLICT');
    expect(await codeOf(folders.mkdir(r, 'x', { operationId: '3' }))).toBe('CONFLICT');
    await folders.mkdir(r, 'x', { operationId: '4', replaceKind: true });
    await folders.write(r, 'x/y', pieces(Buffer.from('child')), { operationId: '5' });
    expect(await codeOf(folders.write(r, 'x', pieces(Buffer.from('file again')), { operationId: '6' }))).toBe('CONFLICT');
    await folders.write(r, 'x', pieces(Buffer.from('file again')), { operationId: '7', replaceKind: true });
    expect((await folders.list(r)).files.map((f) => [f.path, f.kind])).toEqual([['x', 'file']]);
    expect((await folders.list(r, { trash: true })).files.map((f) => [f.path, f.kind]).sort()).toEqual([
      ['x', 'directory'],
      ['x', 'file'],
      ['x/y', 'file'],
    ]);
  });
});
