/**
 * Object-index insert throughput: 100k object rows (plus their 200 packs) into a fresh
 * SQLite file and a fresh PostgreSQL database, 5 repetitions each, through the real
 * `insertPacksAndObjects` (batched, one transaction). Also times `findMissing` over the same
 * 100k ids, the dedup query a checkpoint runs.
 *
 *   npx tsx bench/metadata-insert.ts          # table
 *   npx tsx bench/metadata-insert.ts --json   # JSON
 *
 * PostgreSQL comes from HOLDFAST_TEST_PG (default postgres://postgres@127.0.0.1:5432/postgres);
 * if it is unreachable the bench fails rather than reporting SQLite alone.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { MetaConfig } from '../src/config.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import type { ObjectRecord, PackRecord } from '../src/metadata/tables/objects-repo.js';
import { createTestDatabase } from '../test/support/postgres.js';
import { median, printTable, timeMs } from './stats.js';

const OBJECT_ROWS = 100_000;
const OBJECTS_PER_PACK = 500;
const REPETITIONS = 5;

interface BackendResult {
  readonly backend: 'sqlite' | 'postgres';
  readonly objectRows: number;
  readonly packRows: number;
  readonly repetitions: number;
  readonly insertMedianMs: number;
  readonly insertRowsPerSecond: number;
  readonly findMissingMedianMs: number;
  readonly insertRunsMs: number[];
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function makeRows(): { packs: PackRecord[]; objects: ObjectRecord[] } {
  const packs: PackRecord[] = [];
  const objects: ObjectRecord[] = [];
  for (let first = 0; first < OBJECT_ROWS; first += OBJECTS_PER_PACK) {
    const packId = sha256(`bench-pack:${first}`);
    packs.push({ id: packId, kind: 'data', size: OBJECTS_PER_PACK * 4_096, objectCount: OBJECTS_PER_PACK });
    for (let i = 0; i < OBJECTS_PER_PACK; i += 1) {
      objects.push({
        id: sha256(`bench-object:${first + i}`),
        packId,
        kind: 'data',
        offset: i * 4_096,
        length: 4_096,
        rawLength: 8_192,
        codec: 'zstd',
      });
    }
  }
  return { packs, objects };
}

async function freshDatabase(backend: 'sqlite' | 'postgres'): Promise<{ config: MetaConfig; cleanup(): Promise<void> }> {
  if (backend === 'sqlite') {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'holdfast-bench-'));
    return { config: { kind: 'sqlite', path: path.join(dir, 'meta.db') }, cleanup: () => rm(dir, { recursive: true, force: true }) };
  }
  const database = await createTestDatabase();
  return { config: { kind: 'postgres', url: database.url }, cleanup: () => database.drop() };
}

async function measure(backend: 'sqlite' | 'postgres', rows: { packs: PackRecord[]; objects: ObjectRecord[] }): Promise<BackendResult> {
  const ids = rows.objects.map((o) => o.id);
  const insertRunsMs: number[] = [];
  const findMissingRunsMs: number[] = [];
  for (let rep = 0; rep < REPETITIONS; rep += 1) {
    const database = await freshDatabase(backend);
    const store = await openMetadataStore(database.config);
    try {
      insertRunsMs.push(await timeMs(() => store.objects.insertPacksAndObjects(rows.packs, rows.objects)));
      let missing = new Set<string>();
      findMissingRunsMs.push(
        await timeMs(async () => {
          missing = await store.objects.findMissing(ids);
        }),
      );
      if (missing.size !== 0) throw new Error(`${backend}: ${missing.size} objects missing after insert`);
    } finally {
      await store.close();
      await database.cleanup();
    }
  }
  const insertMedianMs = median(insertRunsMs);
  return {
    backend,
    objectRows: rows.objects.length,
    packRows: rows.packs.length,
    repetitions: REPETITIONS,
    insertMedianMs: Math.round(insertMedianMs),
    insertRowsPerSecond: Math.round(rows.objects.length / (insertMedianMs / 1_000)),
    findMissingMedianMs: Math.round(median(findMissingRunsMs)),
    insertRunsMs: insertRunsMs.map((ms) => Math.round(ms)),
  };
}

function tableRows(results: readonly BackendResult[]): string[][] {
  return results.map((r) => [
    r.backend,
    String(r.objectRows),
    String(r.repetitions),
    String(r.insertMedianMs),
    r.insertRowsPerSecond.toLocaleString('en-US'),
    String(r.findMissingMedianMs),
  ]);
}

async function main(): Promise<void> {
  const json = process.argv.includes('--json');
  const rows = makeRows();
  const results = [await measure('sqlite', rows), await measure('postgres', rows)];
  if (json) process.stdout.write(`${JSON.stringify({ node: process.version, results }, null, 2)}\n`);
  else {
    const header = ['backend', 'object rows', 'runs', 'insert median ms', 'insert rows/s', 'findMissing median ms'];
    printTable(`metadata: insert ${OBJECT_ROWS} object rows (batched, one transaction)`, header, tableRows(results));
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
