import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../src/blob-store/blob-store.js';
import { createS3BlobStore } from '../src/blob-store/drivers/s3.js';
import type { FolderRef } from '../src/folders/folders.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './support/postgres.js';
import { startS3Target } from './support/s3-server.js';

async function* once(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text);
}

async function settle(p: Promise<unknown>): Promise<{ ok: true } | { ok: false; code: string }> {
  try {
    await p;
    return { ok: true };
  } catch (error) {
    return { ok: false, code: (error as { code?: string }).code ?? String(error) };
  }
}

describe('work folders: two Holdfast instances on one PostgreSQL + S3', () => {
  let db: TestDatabase;
  let s3: Awaited<ReturnType<typeof startS3Target>>;
  let blobs: BlobStore;
  let dir: string;
  let a: Holdfast;
  let b: Holdfast;
  let tenantId: string;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-folders-cluster-'));
    db = await createTestDatabase();
    s3 = await startS3Target();
    blobs = await createS3BlobStore({
      kind: 's3',
      bucket: s3.bucket,
      prefix: s3.prefix,
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: s3.forcePathStyle,
      credentials: { ...s3.credentials },
    });
    a = await openHoldfast({ meta: db.url, blobs, cacheDir: path.join(dir, 'a'), owner: 'replica-a' });
    b = await openHoldfast({ meta: db.url, blobs, cacheDir: path.join(dir, 'b'), owner: 'replica-b' });
    tenantId = a.tenant.id;
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await blobs?.close();
    await s3?.close();
    await db?.drop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('races `parent` as a file against `parent/child`: exactly one wins, the other is CONFLICT, the collection is consistent', async () => {
    for (let round = 0; round < 10; round += 1) {
      const ref: FolderRef = { tenantId, scope: 'task', ownerId: `race-${round}` };
      const [file, child] = await Promise.all([
        settle(a.folders.write(ref, 'parent', once('a file'), { operationId: `file-${round}` })),
        settle(b.folders.write(ref, 'parent/child', once('a child'), { operationId: `child-${round}` })),
      ]);
      expect([file, child].filter((r) => r.ok)).toHaveLength(1);
      expect([file, child].find((r) => !r.ok)).toEqual({ ok: false, code: 'CONFLICT' });
      const listed = (await a.folders.list(ref)).files.map((f) => [f.path, f.kind]);
      expect(listed).toEqual(
        file.ok
          ? [['parent', 'file']]
          : [
              ['parent', 'directory'],
              ['parent/child', 'file'],
            ],
      );
      expect((await b.folders.list(ref)).files.map((f) => [f.path, f.kind])).toEqual(listed);
    }
  });

  it('loses no acknowledged write when both instances write one collection, and replays stay no-ops', async () => {
    const ref: FolderRef = { tenantId, scope: 'project', ownerId: 'shared' };
    const writes = Array.from({ length: 40 }, (_, i) =>
      (i % 2 === 0 ? a : b).folders.write(ref, `f/${i}`, once(`content ${i}`), { operationId: `op-${i}` }),
    );
    const done = await Promise.all(writes);
    expect(done.every((w) => w.applied)).toBe(true);
    const again = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? b : a).folders.write(ref, `f/${i}`, once(`content ${i}`), { operationId: `op-${i}` }),
      ),
    );
    expect(again.every((w) => !w.applied)).toBe(true);
    const files = (await a.folders.list(ref, { limit: 1000 })).files.filter((f) => f.kind === 'file');
    expect(files).toHaveLength(40);
  });

  it('runs the GC sweep on one replica at a time', async () => {
    const [first, second] = await Promise.all([a.sweepGarbage(), b.sweepGarbage()]);
    const kinds = [first.kind, second.kind].sort();
    expect(kinds).toEqual(['skipped', 'swept']);
    const winner = first.kind === 'swept' ? a : b;
    const loser = winner === a ? b : a;
    const skipped = (first.kind === 'skipped' ? first : second) as { kind: 'skipped'; holder: string | null };
    expect(skipped.holder).toBe(winner === a ? 'gc:replica-a' : 'gc:replica-b');
    // Within the claim's interval the other replica keeps skipping; the holder may sweep again.
    expect((await loser.sweepGarbage()).kind).toBe('skipped');
    expect((await winner.sweepGarbage()).kind).toBe('swept');
    // Once the claim expires, the other replica takes over.
    await a.meta.db.updateTable('service_claims').set({ expires_at: 0 }).execute();
    expect((await loser.sweepGarbage()).kind).toBe('swept');
    expect((await winner.sweepGarbage()).kind).toBe('skipped');
  });
});
