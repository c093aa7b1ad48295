import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError } from '../src/errors.js';
import { GROUP_FILE_MAX_BYTES, GROUP_MAX_WRITES } from '../src/folders/content-ingest.js';
import { type FolderRef, Folders } from '../src/folders/folders.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const CONCURRENT = 40;

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
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

describe.each(BACKENDS)('group commit of small folder writes on $name', (backend) => {
  let b: OpenedBackends;
  let blobs: FaultInjectingBlobStore;
  let folders: Folders;
  let ref: FolderRef;

  beforeEach(async () => {
    b = await backend.open();
    blobs = new FaultInjectingBlobStore(b.blobs);
    folders = new Folders({ meta: b.meta, blobs, workers: b.workers });
    ref = { tenantId: (await b.snapshots.tenant(true)).id, scope: 'project', ownerId: 'group' };
  }, 60_000);
  afterEach(async () => {
    await b?.cleanup();
  });

  async function packBlobs(): Promise<number> {
    let n = 0;
    for await (const _ of b.blobs.list('packs/')) n += 1;
    return n;
  }

  async function expectFiles(files: ReadonlyMap<string, Buffer>): Promise<void> {
    for (const [p, bytes] of files) {
      const { entry, body } = await folders.open(ref, p);
      expect(entry.sha256).toBe(sha(bytes));
      expect(sha(await readAll(body))).toBe(sha(bytes));
    }
  }

  /** No upload intent is left: every member released its own after its commit or failure. */
  async function expectNoIntents(): Promise<void> {
    const packs = (await b.meta.objects.listPacks()).map((p) => p.id);
    expect([...(await b.meta.gc.protectedPacks(packs, 0))]).toEqual([]);
  }

  it('concurrent small writes share packs; each one is published and reads back', async () => {
    const files = new Map(Array.from({ length: CONCURRENT }, (_, i) => [`f/${i}.bin`, randomBytes(4096)] as const));
    const results = await Promise.all([...files].map(([p, bytes], i) => folders.write(ref, p, once(bytes), { operationId: `w${i}` })));
    expect(results.every((r) => r.applied)).toBe(true);
    expect(results.map((r) => r.entry?.sha256)).toEqual([...files.values()].map(sha));
    // One pack for all of them: every write joined while the others were still ingesting.
    const packs = await packBlobs();
    expect(packs).toBe(1);
    expect(blobs.count('put')).toBe(packs);
    await expectFiles(files);
    await expectNoIntents();
    const verified = await verifyStore(b, { readData: true });
    expect(verified.problems).toEqual([]);
  }, 120_000);

  it('a member that fails alone leaves the others published; a large write streams through its own pack', async () => {
    const files = new Map(Array.from({ length: 8 }, (_, i) => [`ok/${i}.bin`, randomBytes(2048)] as const));
    await folders.write(ref, 'blocker', once(Buffer.from('a file')), { operationId: 'blocker' });
    const big = randomBytes(GROUP_FILE_MAX_BYTES + 4096);
    const bad = randomBytes(2048);
    const [ok, clash, mismatch, large] = await Promise.allSettled([
      Promise.all([...files].map(([p, bytes], i) => folders.write(ref, p, once(bytes), { operationId: `ok${i}` }))),
      // Its parent is a file: refused in its own transaction, after its chunks were packed with the others.
      folders.write(ref, 'blocker/child', once(bad), { operationId: 'clash' }),
      folders.write(ref, 'mismatch.bin', once(randomBytes(2048)), { operationId: 'mismatch', expectedSha256: '0'.repeat(64) }),
      folders.write(ref, 'big.bin', once(big), { operationId: 'big' }),
    ]);
    expect(ok.status).toBe('fulfilled');
    expect(clash.status === 'rejected' && (clash.reason as { code?: string }).code).toBe('CONFLICT');
    expect(mismatch.status === 'rejected' && (mismatch.reason as { code?: string }).code).toBe('CONFLICT');
    expect(large.status).toBe('fulfilled');
    await expectFiles(new Map([...files, ['big.bin', big]]));
    expect(await codeOf(folders.open(ref, 'blocker/child'))).toBe('NOT_FOUND');
    expect(await codeOf(folders.open(ref, 'mismatch.bin'))).toBe('NOT_FOUND');
    await expectNoIntents();
    const verified = await verifyStore(b, { readData: true });
    expect(verified.problems).toEqual([]);
  }, 120_000);

  it('when the shared pack cannot be written, every member fails and nothing is published', async () => {
    blobs.inject({
      ops: ['put'],
      key: /^packs\//,
      fault: { kind: 'error', error: () => new StoreError('disk full', { transient: false }) },
    });
    const files = Array.from({ length: 6 }, (_, i) => [`lost/${i}.bin`, randomBytes(1024)] as const);
    const settled = await Promise.allSettled(files.map(([p, bytes], i) => folders.write(ref, p, once(bytes), { operationId: `l${i}` })));
    // One group, one failed put: every write of it rejects with the store's error.
    expect(blobs.count('put')).toBe(1);
    expect(settled.map((s) => s.status === 'rejected' && (s.reason as { code?: string }).code)).toEqual(
      files.map(() => 'STORE_UNAVAILABLE'),
    );
    expect((await folders.list(ref)).files).toEqual([]);
    await expectNoIntents();
    // A retry of the same operations goes through.
    blobs.clear();
    await Promise.all(files.map(([p, bytes], i) => folders.write(ref, p, once(bytes), { operationId: `l${i}` })));
    await expectFiles(new Map(files));
  }, 120_000);

  it('a group holds at most GROUP_MAX_WRITES writes', async () => {
    const count = GROUP_MAX_WRITES + 10;
    const writes = Array.from({ length: count }, (_, i) =>
      folders.write(ref, `n/${i}`, once(Buffer.from(`file ${i}`)), { operationId: `n${i}` }),
    );
    await Promise.all(writes);
    expect(await packBlobs()).toBe(2);
    expect((await folders.list(ref, { limit: 1000 })).files.filter((f) => f.kind === 'file')).toHaveLength(count);
  }, 120_000);
});
