import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { describeMetadataContract } from '../metadata.contract.js';
import { openMetadataStore } from '../metadata-store.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from '../migrations.js';
import { SQLITE_BUSY_TIMEOUT_MS } from './sqlite.js';

const tempDirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'holdfast-meta-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

describeMetadataContract({
  name: 'sqlite',
  async createDatabase() {
    const dir = await tempDir();
    return { config: { kind: 'sqlite', path: path.join(dir, 'meta.db') }, cleanup: () => rm(dir, { recursive: true, force: true }) };
  },
});

const storeModule = fileURLToPath(new URL('../metadata-store.ts', import.meta.url));
/** Loads the store, reports ready, and opens the database only when the parent says go. */
const CHILD_SCRIPT = `
import { openMetadataStore } from ${JSON.stringify(storeModule)};
process.stdout.write('ready\\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();
const store = await openMetadataStore({ kind: 'sqlite', path: process.argv[2] });
process.stdout.write('version ' + (await store.schemaVersion()) + '\\n');
await store.close();
`;

interface Child {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly done: Promise<string>;
}

function startChild(script: string, file: string): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', script, file], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.includes('ready\n')) markReady();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const done = new Promise<string>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`child exited with ${code}: ${stderr}`))));
  });
  // A child that dies before reporting ready must not leave the barrier waiting forever.
  return { process: child, ready: Promise.race([ready, done.then(() => undefined)]), done };
}

describe('sqlite dialect', () => {
  it('four processes migrating the same fresh file at once all succeed, each version recorded once', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'race.db');
    const script = path.join(dir, 'open.mts');
    await writeFile(script, CHILD_SCRIPT);
    const children = [1, 2, 3, 4].map(() => startChild(script, file));
    // Release all four at once, after each has paid its start-up cost, so the opens overlap.
    await Promise.all(children.map((child) => child.ready));
    for (const child of children) child.process.stdin?.end('go\n');
    const outputs = await Promise.all(children.map((child) => child.done));
    for (const stdout of outputs) expect(stdout).toContain(`version ${LATEST_SCHEMA_VERSION}\n`);
    const raw = new BetterSqlite3(file, { readonly: true });
    try {
      const rows = raw.prepare('SELECT version, count(*) AS n FROM holdfast_schema_migrations GROUP BY version').all();
      expect(rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, n: 1 })));
    } finally {
      raw.close();
    }
  });

  it('uses WAL, synchronous=FULL and foreign keys on every store', async () => {
    const store = await openMetadataStore({ kind: 'sqlite', path: path.join(await tempDir(), 'pragmas.db') });
    try {
      const pragma = async (name: string): Promise<unknown> => {
        const { rows } = await sql<Record<string, unknown>>`${sql.raw(`PRAGMA ${name}`)}`.execute(store.db);
        return Object.values(rows[0] ?? {})[0];
      };
      expect(await pragma('journal_mode')).toBe('wal');
      expect(await pragma('synchronous')).toBe(2);
      expect(await pragma('foreign_keys')).toBe(1);
      expect(await pragma('busy_timeout')).toBe(SQLITE_BUSY_TIMEOUT_MS);
    } finally {
      await store.close();
    }
  });

  it('a path that cannot be opened is STORE_UNAVAILABLE', async () => {
    const dir = await tempDir();
    await expect(openMetadataStore({ kind: 'sqlite', path: dir })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    const notADb = path.join(dir, 'garbage.db');
    await writeFile(notADb, 'this is not a sqlite database, just some text that is long enough to have a header'.repeat(20));
    await expect(openMetadataStore({ kind: 'sqlite', path: notADb })).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
