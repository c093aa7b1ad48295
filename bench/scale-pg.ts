/**
 * What PostgreSQL holds and did, read from its catalogue and statistics: per table, live rows,
 * heap bytes (`pg_relation_size`), bytes of each index, total bytes (`pg_total_relation_size`:
 * heap, indexes, TOAST, free space and visibility maps) and the tuple writes it counted; per
 * database, committed transactions. The scale measurements take one of these before and after
 * a step on a fresh database and divide the difference by the turns in between.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/**
 * PostgreSQL 15 backends flush their statistics when idle for 10 s at the latest: a reading of
 * the tuple and transaction counters waits this long after the last statement it must see.
 */
export const PG_STATS_SETTLE_MS = 11_000;

/** One table now. */
export interface PgTable {
  readonly rows: number;
  readonly heapBytes: number;
  readonly totalBytes: number;
  /** Bytes per index, by index name. */
  readonly indexes: Readonly<Record<string, number>>;
  readonly inserted: number;
  readonly updated: number;
  readonly deleted: number;
}

/** The database now. */
export interface PgSnapshot {
  readonly tables: Readonly<Record<string, PgTable>>;
  readonly commits: number;
}

interface TableRow {
  name: string;
  heap: string;
  total: string;
  ins: string;
  upd: string;
  del: string;
}

/** Reads every table of schema `public` of the database at `url`, waiting `settleMs` first for the counters. */
export async function pgSnapshot(url: string, settleMs = PG_STATS_SETTLE_MS): Promise<PgSnapshot> {
  if (settleMs > 0) await sleep(settleMs);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('SELECT pg_stat_clear_snapshot()');
    const tables = await client.query<TableRow>(
      `SELECT c.relname AS name, pg_relation_size(c.oid) AS heap, pg_total_relation_size(c.oid) AS total,
              coalesce(s.n_tup_ins, 0) AS ins, coalesce(s.n_tup_upd, 0) AS upd, coalesce(s.n_tup_del, 0) AS del
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
        WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY c.relname`,
    );
    const indexes = await client.query<{ tbl: string; idx: string; bytes: string }>(
      `SELECT t.relname AS tbl, i.relname AS idx, pg_relation_size(i.oid) AS bytes
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'public' ORDER BY i.relname`,
    );
    const out: Record<string, PgTable> = {};
    for (const row of tables.rows) {
      const count = await client.query<{ n: string }>(`SELECT count(*) AS n FROM "${row.name}"`);
      out[row.name] = {
        rows: Number(count.rows[0]?.n ?? 0),
        heapBytes: Number(row.heap),
        totalBytes: Number(row.total),
        indexes: Object.fromEntries(indexes.rows.filter((i) => i.tbl === row.name).map((i) => [i.idx, Number(i.bytes)])),
        inserted: Number(row.ins),
        updated: Number(row.upd),
        deleted: Number(row.del),
      };
    }
    const db = await client.query<{ commits: string }>(
      'SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()',
    );
    return { tables: out, commits: Number(db.rows[0]?.commits ?? 0) };
  } finally {
    await client.end();
  }
}

/** A table's change over `turns` turns, per turn. */
export interface PgTableDelta {
  readonly rows: number;
  readonly heapBytes: number;
  readonly indexBytes: number;
  readonly totalBytes: number;
  readonly inserted: number;
  readonly updated: number;
  readonly deleted: number;
}

/** `(after - before) / turns` per table (tables that did not change are left out), and commits per turn. */
export function pgPerTurn(after: PgSnapshot, before: PgSnapshot, turns: number): { tables: Record<string, PgTableDelta>; commits: number } {
  const tables: Record<string, PgTableDelta> = {};
  const sum = (r: Readonly<Record<string, number>>) => Object.values(r).reduce((a, b) => a + b, 0);
  for (const [name, a] of Object.entries(after.tables)) {
    const b = before.tables[name];
    const d = (x: number, y: number | undefined) => (x - (y ?? 0)) / turns;
    const delta: PgTableDelta = {
      rows: d(a.rows, b?.rows),
      heapBytes: d(a.heapBytes, b?.heapBytes),
      indexBytes: d(sum(a.indexes), b === undefined ? 0 : sum(b.indexes)),
      totalBytes: d(a.totalBytes, b?.totalBytes),
      inserted: d(a.inserted, b?.inserted),
      updated: d(a.updated, b?.updated),
      deleted: d(a.deleted, b?.deleted),
    };
    if (Object.values(delta).some((v) => v !== 0)) tables[name] = delta;
  }
  return { tables, commits: (after.commits - before.commits) / turns };
}

/**
 * Bytes per live row of each table and each of its indexes (page overhead and fill included),
 * for tables with rows, with the row count it was read at (a few rows in one 8 KiB page say little).
 */
export function bytesPerRow(snapshot: PgSnapshot): Record<string, { rows: number; heap: number; indexes: Record<string, number> }> {
  const out: Record<string, { rows: number; heap: number; indexes: Record<string, number> }> = {};
  for (const [name, t] of Object.entries(snapshot.tables)) {
    if (t.rows === 0) continue;
    out[name] = {
      rows: t.rows,
      heap: t.heapBytes / t.rows,
      indexes: Object.fromEntries(Object.entries(t.indexes).map(([i, bytes]) => [i, bytes / t.rows])),
    };
  }
  return out;
}
