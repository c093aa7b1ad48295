import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/support/postgres.js';
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
