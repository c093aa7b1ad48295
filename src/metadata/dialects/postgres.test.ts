import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestDatabase, DEFAULT_TEST_PG_URL } from '../../../test/support/postgres.js';
import { describeMetadataContract } from '../metadata.contract.js';
import { openMetadataStore } from '../metadata-store.js';

describeMetadataContract({
  name: 'postgres',
  async createDatabase() {
    const database = await createTestDatabase();
    return { config: { kind: 'postgres', url: database.url }, cleanup: () => database.drop() };
  },
});

describe('postgres dialect', () => {
  it('a connection terminated while a transaction holds it fails that transaction, not the process; the store goes on', async () => {
    const database = await createTestDatabase();
    const store = await openMetadataStore({ kind: 'postgres', url: database.url });
    const admin = new pg.Client({ connectionString: process.env.HOLDFAST_TEST_PG || DEFAULT_TEST_PG_URL });
    await admin.connect();
    try {
      const name = new URL(database.url).pathname.slice(1);
      const failed = await store
        .transaction(async (tx) => {
          await sql`SELECT 1`.execute(tx.db);
          // No query is in flight on this client while its backend is terminated.
          await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
          await new Promise((resolve) => setTimeout(resolve, 200));
          await sql`SELECT 1`.execute(tx.db);
        })
        .catch((e: unknown) => e);
      expect(failed).toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect(await store.workspaces.find('still-usable')).toBeUndefined();
    } finally {
      await admin.end();
      await store.close();
      await database.drop();
    }
  });

  it('an unreachable server is STORE_UNAVAILABLE naming host and database, password redacted', async () => {
    const url = 'postgres://holdfast:hunter2@127.0.0.1:1/holdfast_nowhere';
    const error = await openMetadataStore({ kind: 'postgres', url }).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      data: { transient: true, target: 'postgres://holdfast:***@127.0.0.1:1/holdfast_nowhere' },
    });
    expect(String((error as Error).message)).not.toContain('hunter2');
  });

  it('a missing database is STORE_UNAVAILABLE', async () => {
    const database = await createTestDatabase();
    await database.drop();
    await expect(openMetadataStore({ kind: 'postgres', url: database.url })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });

  it('parses int8 per pool and leaves the global pg type parsers alone', async () => {
    const database = await createTestDatabase();
    const store = await openMetadataStore({ kind: 'postgres', url: database.url });
    try {
      const { rows } = await sql<{ x: unknown; n: unknown }>`SELECT 9007199254740991::int8 AS x, 12.5::numeric AS n`.execute(store.db);
      expect(rows[0]).toEqual({ x: Number.MAX_SAFE_INTEGER, n: 12.5 });
      await expect(sql`SELECT 9007199254740993::int8 AS x`.execute(store.db)).rejects.toThrow(RangeError);
      expect(await store.workspaces.find('still-usable')).toBeUndefined();
      expect(pg.types.getTypeParser(20, 'text')('42')).toBe('42');
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
