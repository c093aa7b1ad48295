import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { redactUrl } from '../../src/config.js';

/** Admin URL used when HOLDFAST_TEST_PG is not set. */
export const DEFAULT_TEST_PG_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** A throwaway PostgreSQL database for one test file. */
export interface TestDatabase {
  /** Connection URL of the new database (same server and credentials as the admin URL). */
  readonly url: string;
  /** Drops the database, terminating any connections still open to it. Idempotent. */
  drop(): Promise<void>;
}

/**
 * Creates an empty database `holdfast_test_<random>` on the server named by HOLDFAST_TEST_PG
 * (default {@link DEFAULT_TEST_PG_URL}, which must allow CREATE DATABASE).
 *
 * When the server is unreachable this throws, so the test fails: PostgreSQL is a required
 * component of the test run and is never skipped silently.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = process.env.HOLDFAST_TEST_PG || DEFAULT_TEST_PG_URL;
  const name = `holdfast_test_${randomBytes(6).toString('hex')}`;
  await withAdmin(adminUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      await withAdmin(adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

async function withAdmin(adminUrl: string, work: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw unreachable(adminUrl, error);
  }
  try {
    await work(client);
  } finally {
    await client.end();
  }
}

function unreachable(adminUrl: string, error: unknown): Error {
  let where = redactUrl(adminUrl);
  try {
    const url = new URL(adminUrl);
    where = `${url.hostname}:${url.port || '5432'}`;
  } catch {
    // keep the redacted URL
  }
  const reason = error instanceof Error ? [(error as { code?: unknown }).code, error.message].filter(Boolean).join(': ') : String(error);
  return new Error(
    `PostgreSQL is not reachable at ${where} (${reason}): start it with \`pg_ctlcluster 15 main start\` or set HOLDFAST_TEST_PG to an admin URL such as ${DEFAULT_TEST_PG_URL}`,
    { cause: error },
  );
}
