import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { redactUrl } from '../../src/config.js';
import { openMetadataStore } from '../../src/metadata/metadata-store.js';

/** Admin URL used when HOLDFAST_TEST_PG is not set. */
export const DEFAULT_TEST_PG_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** A throwaway PostgreSQL database for one test file. */
export interface TestDatabase {
  /** Connection URL of the new database (same server and credentials as the admin URL). */
  readonly url: string;
  /** Drops the database, terminating any connections still open to it. Idempotent. */
  drop(): Promise<void>;
}

/** Options of {@link createTestDatabase}. */
export interface TestDatabaseOptions {
  /**
   * Copy a template already migrated to the latest schema (`CREATE DATABASE … TEMPLATE`)
   * instead of creating an empty database, for tests that open the store on it anyway; the
   * migration tests themselves need the empty one. Default false.
   */
  readonly migrated?: boolean;
}

/**
 * Creates a database `holdfast_test_<random>` on the server named by HOLDFAST_TEST_PG
 * (default {@link DEFAULT_TEST_PG_URL}, which must allow CREATE DATABASE): empty, or with
 * `migrated` a copy of the migrated template (see {@link migratedTemplate}).
 *
 * When the server is unreachable this throws, so the test fails: PostgreSQL is a required
 * component of the test run and is never skipped silently.
 */
export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const adminUrl = process.env.HOLDFAST_TEST_PG || DEFAULT_TEST_PG_URL;
  const name = `holdfast_test_${randomBytes(6).toString('hex')}`;
  const template = options.migrated === true ? await migratedTemplate(adminUrl) : undefined;
  await withAdmin(adminUrl, (client) => createDatabase(client, name, template));
  const url = databaseUrl(adminUrl, name);
  let dropped = false;
  return {
    url,
    async drop() {
      if (dropped) return;
      dropped = true;
      await withAdmin(adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/** The files whose text decides the migrated schema: the template is named by their hash. */
const SCHEMA_SOURCES = ['migrations.ts', 'migrator.ts', 'dialects/postgres.ts', 'migrations'];
const METADATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/metadata');

let template: Promise<string> | undefined;

/**
 * The database `holdfast_template_<hash>`, migrated to the latest schema by this build and
 * named by a hash of the migration sources, so a changed migration gets a template of its own
 * and branches with different schemas never share one. Built once per server (the first file
 * that needs it builds it under a temporary name and renames it; a concurrent builder that
 * loses the rename drops its copy), then only copied. Connections to it are disallowed, so a
 * copy never waits for one.
 */
export function migratedTemplate(adminUrl: string): Promise<string> {
  template ??= buildTemplate(adminUrl).catch((error: unknown) => {
    template = undefined;
    throw error;
  });
  return template;
}

async function buildTemplate(adminUrl: string): Promise<string> {
  const name = `holdfast_template_${schemaHash()}`;
  let exists = false;
  await withAdmin(adminUrl, async (client) => {
    exists = (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  });
  if (exists) return name;
  const building = `holdfast_test_${randomBytes(6).toString('hex')}`;
  await withAdmin(adminUrl, (client) => client.query(`CREATE DATABASE ${building}`));
  const store = await openMetadataStore({ kind: 'postgres', url: databaseUrl(adminUrl, building) });
  await store.close();
  await withAdmin(adminUrl, async (client) => {
    try {
      await client.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      await client.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`);
    } catch (error) {
      await client.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      // 42P04 duplicate_database: another worker published the same template first.
      if ((error as { code?: unknown }).code !== '42P04') throw error;
    }
  });
  return name;
}

function schemaHash(): string {
  const hash = createHash('sha256');
  for (const source of SCHEMA_SOURCES) {
    const full = path.join(METADATA_DIR, source);
    const files = fs.statSync(full).isDirectory()
      ? fs
          .readdirSync(full)
          .sort()
          .map((f) => path.join(full, f))
      : [full];
    for (const file of files)
      hash
        .update(`${path.relative(METADATA_DIR, file)}\0`)
        .update(fs.readFileSync(file))
        .update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** CREATE DATABASE, from `template` when given; retried while the server reports the template busy (55006). */
async function createDatabase(client: pg.Client, name: string, template: string | undefined): Promise<void> {
  const statement = template === undefined ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${template}`;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.query(statement);
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== '55006' || attempt >= 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
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
