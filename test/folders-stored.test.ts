import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FolderRef, Folders, MAX_STORED_BATCH_OPERATIONS, type StoredContent } from '../src/folders/folders.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf as errorCode } from './support/error-code.js';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}

describe.each(BACKENDS)('stored-content folder writes on $name', (backend) => {
  let b: OpenedBackends;
  let folders: Folders;
  let tenantId: string;
  let n = 0;
  const ref = (): FolderRef => ({ tenantId, scope: 'project', ownerId: `stored${++n}` });

  /** Streams `bytes` into a scratch collection and gives back how the store holds them. */
  const upload = async (bytes: Uint8Array): Promise<StoredContent> => {
    const scratch = ref();
    await folders.write(scratch, 'f', once(bytes), { operationId: 'seed' });
    const collection = await b.meta.folders.findCollection(scratch.tenantId, scratch.scope, scratch.ownerId);
    const [row] = await b.meta.folders.liveAt(collection?.id as string, ['f']);
    return { sha256: row?.sha256 as string, size: row?.size as number, chunks: (row?.chunks ?? []).map(([id]) => id) };
  };

  beforeAll(async () => {
    b = await backend.open();
    folders = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers });
    tenantId = (await b.snapshots.tenant(true)).id;
  });
  afterAll(async () => {
    await b?.cleanup();
  });

  it('publishes known content without moving bytes, by the same receipts and fingerprint as a streamed write', async () => {
    const small = randomBytes(3000);
    const big = randomBytes(5 * 1024 * 1024 + 3);
    const [smallContent, bigContent] = [await upload(small), await upload(big)];
    expect(bigContent.chunks.length).toBeGreaterThan(1);
    const r = ref();
    const w = await folders.writeStored(r, 'a/b/big.bin', bigContent, { operationId: 'w1', executable: true });
    expect(w).toMatchObject({ applied: true, entry: { path: 'a/b/big.bin', size: big.length, sha256: sha(big), executable: true } });
    expect(sha(await readAll((await folders.open(r, 'a/b/big.bin')).body))).toBe(sha(big));
    expect((await folders.list(r)).files.map((f) => f.path)).toEqual(['a', 'a/b', 'a/b/big.bin']);
    // A replay is answered, not applied; the same id for other content is refused.
    expect(await folders.writeStored(r, 'a/b/big.bin', bigContent, { operationId: 'w1', executable: true })).toMatchObject({
      applied: false,
    });
    expect(await errorCode(folders.writeStored(r, 'a/b/big.bin', smallContent, { operationId: 'w1', executable: true }))).toBe('CONFLICT');
    // A streamed write of the same bytes under the same id is the same operation.
    await folders.writeStored(r, 's', smallContent, { operationId: 'w2' });
    expect(await folders.write(r, 's', once(small), { operationId: 'w2' })).toMatchObject({ applied: false });
    const empty = await folders.writeStored(r, 'empty', { sha256: sha(new Uint8Array(0)), size: 0, chunks: [] }, { operationId: 'w3' });
    expect(empty.entry).toMatchObject({ size: 0, sha256: sha(new Uint8Array(0)) });
  });

  it('refuses chunks the store does not hold and lengths that do not add up', async () => {
    const r = ref();
    const content = await upload(randomBytes(100));
    const ghost = sha(randomBytes(8));
    expect(await errorCode(folders.writeStored(r, 'x', { sha256: ghost, size: 8, chunks: [ghost] }, { operationId: 'g' }))).toBe(
      'STORE_UNAVAILABLE',
    );
    expect(await errorCode(folders.writeStored(r, 'x', { ...content, size: 99 }, { operationId: 'g' }))).toBe('INVALID_INPUT');
    expect(await errorCode(folders.writeStored(r, 'x', { ...content, sha256: ghost }, { operationId: 'g' }))).toBe('INVALID_INPUT');
    expect(await errorCode(folders.writeStored(r, '../x', content, { operationId: 'g' }))).toBe('INVALID_PATH');
    expect((await folders.list(r)).files).toEqual([]);
  });

  it('applies a batch in one transaction, each operation with its own receipt; a refused one changes nothing', async () => {
    const r = ref();
    const one = await upload(Buffer.from('one'));
    const two = await upload(Buffer.from('two'));
    await folders.writeStored(r, 'dir/old', one, { operationId: 'pre' });
    const outcomes = await folders.applyStored(r, [
      { op: 'mkdir', path: 'd1/d2', options: { operationId: 'b1' } },
      { op: 'write', path: 'd1/d2/f', content: two, options: { operationId: 'b2', replaceKind: true } },
      { op: 'remove', path: 'not-there', options: { operationId: 'b3' } },
      { op: 'write', path: 'dir/old/child', content: one, options: { operationId: 'b4' } },
      { op: 'remove', path: 'dir', options: { operationId: 'b5' } },
    ]);
    expect(outcomes.map((o) => (o.ok ? o.applied : o.error.code))).toEqual([true, true, 'NOT_FOUND', 'CONFLICT', true]);
    expect((await folders.list(r)).files.map((f) => f.path)).toEqual(['d1', 'd1/d2', 'd1/d2/f']);
    const collection = await b.meta.folders.findCollection(r.tenantId, r.scope, r.ownerId);
    const receipts = await Promise.all(
      ['b1', 'b2', 'b3', 'b4', 'b5'].map((id) => b.meta.folders.findReceipt(collection?.id as string, id)),
    );
    expect(receipts.map((x) => x !== undefined)).toEqual([true, true, false, false, true]);
    const replay = await folders.applyStored(r, [
      { op: 'write', path: 'd1/d2/f', content: two, options: { operationId: 'b2', replaceKind: true } },
    ]);
    expect(replay).toMatchObject([{ ok: true, applied: false }]);
    const tooMany = Array.from({ length: MAX_STORED_BATCH_OPERATIONS + 1 }, (_, i) => ({
      op: 'mkdir' as const,
      path: `m${i}`,
      options: { operationId: `m${i}` },
    }));
    expect(await errorCode(folders.applyStored(r, tooMany))).toBe('INVALID_INPUT');
  });
});

describe.each(BACKENDS)('stored mode changes on $name', (backend) => {
  let b: OpenedBackends;
  let folders: Folders;
  let tenantId: string;
  let n = 0;
  const ref = (): FolderRef => ({ tenantId, scope: 'project', ownerId: `mode${++n}` });

  beforeAll(async () => {
    b = await backend.open();
    folders = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers });
    tenantId = (await b.snapshots.tenant(true)).id;
  });
  afterAll(async () => {
    await b?.cleanup();
  });

  it('sets the bit on the content the row holds now, replays by id, and never makes a file where none is live', async () => {
    const r = ref();
    const newer = randomBytes(1000);
    await folders.write(r, 'tool.sh', once(randomBytes(10)), { operationId: 'old' });
    await folders.write(r, 'tool.sh', once(newer), { operationId: 'new' });
    await folders.mkdir(r, 'dir', { operationId: 'd' });
    const [set, replay, none, dir, under] = await folders.applyStored(r, [
      { op: 'mode', path: 'tool.sh', executable: true, options: { operationId: 'm1' } },
      { op: 'mode', path: 'tool.sh', executable: true, options: { operationId: 'm1' } },
      { op: 'mode', path: 'missing.sh', executable: true, options: { operationId: 'm2' } },
      { op: 'mode', path: 'dir', executable: true, options: { operationId: 'm3' } },
      { op: 'mode', path: 'tool.sh/x', executable: true, options: { operationId: 'm4' } },
    ]);
    expect(set).toMatchObject({ ok: true, applied: true });
    expect(replay).toMatchObject({ ok: true, applied: false });
    for (const refused of [none, dir, under]) expect(refused).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    const listed = (await folders.list(r)).files.map((e) => [e.path, e.kind, e.sha256, e.executable]);
    expect(listed).toEqual([
      ['dir', 'directory', null, false],
      ['tool.sh', 'file', sha(newer), true],
    ]);
    expect(await readAll((await folders.open(r, 'tool.sh')).body)).toEqual(newer);
    // The same id for another operation is refused, as for every operation.
    const [reused] = await folders.applyStored(r, [{ op: 'mode', path: 'tool.sh', executable: false, options: { operationId: 'm1' } }]);
    expect(reused).toMatchObject({ ok: false, error: { code: 'CONFLICT' } });
    expect(await errorCode(folders.applyStored(r, [{ op: 'mode', path: '../x', executable: true, options: { operationId: 'm5' } }]))).toBe(
      'INVALID_PATH',
    );
  });
});
