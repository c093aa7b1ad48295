import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isHoldfastError } from '../src/errors.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { describeTree, writeFile } from './support/trees.js';

const sqliteBackend = BACKENDS.find((backend) => backend.name === 'local-disk + sqlite');
/** Files in the checkpoint that no longer fits: enough new object rows to need new pages. */
const FILES_THAT_DO_NOT_FIT = 2_000;

/** A real SQLITE_FULL: the database may not grow past the pages it has now. */
async function fillDatabase(b: OpenedBackends): Promise<void> {
  const { rows } = await sql<{ page_count: number }>`PRAGMA page_count`.execute(b.meta.db);
  await sql.raw(`PRAGMA max_page_count = ${rows[0]?.page_count ?? 1}`).execute(b.meta.db);
}

/** Lifts the limit again (the pragma is per connection; SQLite's ceiling is 2^32 - 2 pages). */
async function freeSpace(b: OpenedBackends): Promise<void> {
  await sql.raw('PRAGMA max_page_count = 4294967294').execute(b.meta.db);
}

describe('a full SQLite metadata database', () => {
  let b: OpenedBackends;
  let good: string;
  let big: string;
  let goodId: string;

  beforeAll(async () => {
    if (sqliteBackend === undefined) throw new Error('the local-disk + sqlite backend is missing from test/support/backends.ts');
    b = await sqliteBackend.open();
    good = path.join(b.dir, 'good');
    big = path.join(b.dir, 'big');
    writeFile(good, 'README.md', 'the last good state\n');
    writeFile(good, 'src/main.ts', 'export {};\n');
    for (let i = 0; i < FILES_THAT_DO_NOT_FIT; i++) writeFile(big, `f/${i}.txt`, `file ${i} with its own bytes\n`);
    goodId = (await b.snapshots.checkpoint({ dir: good, workspace: 'ws' })).checkpoint.id;
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('a checkpoint that does not fit fails with STORE_FULL naming the store; the head and its bytes are intact', async () => {
    await fillDatabase(b);
    let failure: unknown;
    try {
      await b.snapshots.checkpoint({ dir: big, workspace: 'ws' });
    } catch (error) {
      failure = error;
    }
    expect(isHoldfastError(failure) ? { code: failure.code, store: failure.data.store, dialect: failure.data.dialect } : failure).toEqual({
      code: 'STORE_FULL',
      store: 'metadata',
      dialect: 'sqlite',
    });
    const restored = path.join(b.dir, 'restored-full');
    expect((await b.snapshots.restore({ dir: restored, workspace: 'ws' })).checkpointId).toBe(goodId);
    expect(describeTree(restored)).toEqual(describeTree(good));
  }, 120_000);

  it('a metadata transaction SQLite rolled back by itself reports STORE_FULL, not the failed ROLLBACK, and keeps none of its rows', async () => {
    await fillDatabase(b);
    const before = await sql<{ n: number }>`select count(*) as n from tenants`.execute(b.meta.db);
    const attempt = b.meta.transaction(async (tx) => {
      for (let i = 0; i < FILES_THAT_DO_NOT_FIT; i++) {
        await sql`insert into tenants (id, name, created_at) values (${`full-${i}`}, ${`tenant with a long enough name ${i}`.repeat(4)}, ${Date.now()})`.execute(
          tx.db,
        );
      }
    });
    expect(await codeOf(attempt)).toBe('STORE_FULL');
    const after = await sql<{ n: number }>`select count(*) as n from tenants`.execute(b.meta.db);
    expect(after.rows).toEqual(before.rows);
  });

  it('once space is freed the same checkpoint succeeds and becomes the head', async () => {
    await freeSpace(b);
    const result = await b.snapshots.checkpoint({ dir: big, workspace: 'ws' });
    expect(result.checkpoint.status).toBe('ready');
    const restored = path.join(b.dir, 'restored-freed');
    expect((await b.snapshots.restore({ dir: restored, workspace: 'ws' })).checkpointId).toBe(result.checkpoint.id);
    expect(describeTree(restored)).toEqual(describeTree(big));
  }, 120_000);
});
