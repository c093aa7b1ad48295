/**
 * `npm run scale-measure`: what one turn costs in PostgreSQL rows and bytes and in S3 requests
 * and bytes, measured, for the typical turns (a small edit, 10 files, a 100 MB artifact), for a
 * recovery (sandbox gone -> next turn) and for a run's first turn; and what a GC sweep costs at
 * a few store sizes. The engine runs in-process on bwrap sandboxes, a fresh PostgreSQL database
 * per scenario and a counting s3rver on loopback (`scale-s3.ts`). Writes the figures as JSON
 * (default `docs/scale-figures.json`, `--out FILE`), keeping a `load` section a previous
 * `bench/load.ts` wrote there. `--quick` runs a fraction of the turns (a smoke run, written to
 * the temp directory unless `--out` says otherwise).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createS3BlobStore } from '../src/blob-store/drivers/s3.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { createTestDatabase } from '../test/support/postgres.js';
import { bytesPerRow, pgPerTurn, pgSnapshot } from './scale-pg.js';
import { type CountingS3, diffCounts, S3_REQUEST_KINDS, type S3Counts, startCountingS3 } from './scale-s3.js';
import { median } from './stats.js';

const arg = (name: string): string | undefined => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const quick = process.argv.includes('--quick');
const outFile = path.resolve(arg('--out') ?? (quick ? path.join(os.tmpdir(), 'scale-figures-quick.json') : 'docs/scale-figures.json'));
/** Turns per scenario (full / quick). */
const SMALL_RUNS = quick ? 2 : 4;
const SMALL_TURNS_PER_RUN = quick ? 5 : 50;
const TEN_FILES_RUNS = quick ? 2 : 3;
const TEN_FILES_TURNS_PER_RUN = quick ? 3 : 20;
const ARTIFACT_TURNS = quick ? 1 : 3;
const ARTIFACT_BYTES = 100_000_000;
const RECOVERIES = quick ? 2 : 5;
/** Runs created without turns before sizes per row are read, so per-run tables span many pages. */
const EXTRA_RUNS_FOR_ROW_SIZES = quick ? 20 : 300;
/** GC: workspaces, and the checkpoints the store holds at each measured size. */
const GC_WORKSPACES = 10;
const GC_STAGES = quick ? [20, 40] : [100, 300, 900];
const GC_SWEEPS_PER_STAGE = 3;
/** The base workspace every run starts with: 20 directories of 10 text files of ~2.7 KiB. */
const BASE_FILL =
  'for d in $(seq 20); do mkdir -p src/d$d; for f in $(seq 10); do head -c 2048 /dev/urandom | base64 > src/d$d/f$f.txt; done; done';
const SMALL_EDIT = (i: number) => `echo "edit ${i}" >> src/d1/f1.txt`;
const TEN_FILES = 'for k in $(seq 10); do head -c 3072 /dev/urandom | base64 > src/d$k/new.txt; done';
const ARTIFACT = `head -c ${ARTIFACT_BYTES} /dev/urandom > artifact.bin`;

interface Engine {
  readonly hf: Holdfast;
  readonly s3: CountingS3;
  readonly dbUrl: string;
  readonly sandboxRoot: string;
  close(): Promise<void>;
}

async function openEngine(tmp: string, name: string): Promise<Engine> {
  const dir = fs.mkdtempSync(path.join(tmp, `${name}-`));
  const s3 = await startCountingS3();
  const db = await createTestDatabase();
  const blobs = await createS3BlobStore({
    kind: 's3',
    bucket: s3.bucket,
    prefix: 'scale',
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    credentials: { ...s3.credentials },
  });
  const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
  const sandboxRoot = path.join(dir, 'sandboxes');
  const provider = new BwrapSandboxProvider({ root: sandboxRoot });
  const hf = await openHoldfast({ blobs, meta, cacheDir: path.join(dir, 'cache'), providers: () => provider, gcSweepIntervalMs: 0 });
  return {
    hf,
    s3,
    dbUrl: db.url,
    sandboxRoot,
    async close() {
      await hf.close();
      await meta.close();
      await blobs.close();
      for (const s of await provider.list()) await provider.destroy(s.id);
      await db.drop();
      await s3.close();
    },
  };
}

/** Per-turn figures of one scenario. */
interface TurnFigures {
  readonly turns: number;
  readonly wallMsMedian: number;
  readonly pg: ReturnType<typeof pgPerTurn> & { totalRows: number; totalBytes: number };
  readonly s3: S3Counts;
}

function perTurnS3(after: S3Counts, before: S3Counts, turns: number): S3Counts {
  const d = diffCounts(after, before);
  const requests = Object.fromEntries(S3_REQUEST_KINDS.map((k) => [k, d.requests[k] / turns])) as S3Counts['requests'];
  return { requests, bytesIn: d.bytesIn / turns, bytesOut: d.bytesOut / turns };
}

/** Measures `step` (`turns` turns in all) between two readings of both stores. */
async function measured(engine: Engine, turns: number, step: () => Promise<number[]>): Promise<TurnFigures> {
  const pgBefore = await pgSnapshot(engine.dbUrl);
  const s3Before = engine.s3.counts();
  const walls = await step();
  const s3After = engine.s3.counts();
  const pgAfter = await pgSnapshot(engine.dbUrl);
  const pg = pgPerTurn(pgAfter, pgBefore, turns);
  const rows = Object.values(pg.tables).reduce((a, t) => a + t.rows, 0);
  const bytes = Object.values(pg.tables).reduce((a, t) => a + t.totalBytes, 0);
  return { turns, wallMsMedian: median(walls), pg: { ...pg, totalRows: rows, totalBytes: bytes }, s3: perTurnS3(s3After, s3Before, turns) };
}

async function command(hf: Holdfast, runId: string, script: string): Promise<number> {
  const started = performance.now();
  const outcome = await hf.runs.command(runId, { argv: ['sh', '-c', script] });
  const exit = (outcome as { summary?: { exitCode?: number } }).summary?.exitCode;
  if (exit !== undefined && exit !== 0) throw new Error(`turn ${script} exited ${exit}`);
  return performance.now() - started;
}

async function newRuns(hf: Holdfast, count: number): Promise<string[]> {
  const deployment = await hf.deployments.create({ provider: 'bwrap' });
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await hf.runs.create({ deploymentId: deployment.id })).id);
  return ids;
}

const log = (msg: string) => process.stderr.write(`[scale-measure] ${msg}\n`);

/** A run's first turn (sandbox created, empty workspace saved), then small edits on the base workspace. */
async function smallEdits(
  tmp: string,
): Promise<{ firstTurn: TurnFigures; smallEdit: TurnFigures; bytesPerRow: ReturnType<typeof bytesPerRow> }> {
  const engine = await openEngine(tmp, 'small');
  try {
    const { hf } = engine;
    const deployment = await hf.deployments.create({ provider: 'bwrap' });
    const runs: string[] = [];
    const firstTurn = await measured(engine, SMALL_RUNS, async () => {
      const walls: number[] = [];
      for (let i = 0; i < SMALL_RUNS; i += 1) {
        const started = performance.now();
        const run = await hf.runs.create({ deploymentId: deployment.id });
        runs.push(run.id);
        await command(hf, run.id, 'true');
        walls.push(performance.now() - started);
      }
      return walls;
    });
    for (const id of runs) await command(hf, id, BASE_FILL);
    log('first turns done; small edits');
    const smallEdit = await measured(engine, SMALL_RUNS * SMALL_TURNS_PER_RUN, async () => {
      const walls: number[] = [];
      for (let t = 0; t < SMALL_TURNS_PER_RUN; t += 1) for (const id of runs) walls.push(await command(hf, id, SMALL_EDIT(t)));
      return walls;
    });
    // Rows per run (runs, workspaces) need pages of them for a size per row: runs without turns.
    for (let i = 0; i < EXTRA_RUNS_FOR_ROW_SIZES; i += 1) await hf.runs.create({ deploymentId: deployment.id });
    return { firstTurn, smallEdit, bytesPerRow: bytesPerRow(await pgSnapshot(engine.dbUrl, 0)) };
  } finally {
    await engine.close();
  }
}

async function repeatedTurns(tmp: string, name: string, runCount: number, perRun: number, script: string): Promise<TurnFigures> {
  const engine = await openEngine(tmp, name);
  try {
    const runs = await newRuns(engine.hf, runCount);
    for (const id of runs) await command(engine.hf, id, BASE_FILL);
    return await measured(engine, runCount * perRun, async () => {
      const walls: number[] = [];
      for (let t = 0; t < perRun; t += 1) for (const id of runs) walls.push(await command(engine.hf, id, script));
      return walls;
    });
  } finally {
    await engine.close();
  }
}

/** The run's sandbox destroyed by another provider instance (nothing Holdfast holds knows), then a small-edit turn. */
async function recoveries(tmp: string): Promise<TurnFigures> {
  const engine = await openEngine(tmp, 'recovery');
  try {
    const [id = ''] = await newRuns(engine.hf, 1);
    await command(engine.hf, id, BASE_FILL);
    const outside = new BwrapSandboxProvider({ root: engine.sandboxRoot });
    return await measured(engine, RECOVERIES, async () => {
      const walls: number[] = [];
      for (let i = 0; i < RECOVERIES; i += 1) {
        await outside.destroy((await engine.hf.runs.get(id)).sandbox?.id ?? '');
        walls.push(await command(engine.hf, id, SMALL_EDIT(i)));
      }
      return walls;
    });
  } finally {
    await engine.close();
  }
}

/** One GC measurement: the store's size and a sweep's median time and S3 requests. */
interface GcFigures {
  readonly checkpoints: number;
  readonly packs: number;
  readonly objects: number;
  readonly pgBytes: number;
  readonly sweeps: number;
  readonly sweepMsMedian: number;
  readonly s3PerSweep: S3Counts;
}

/** Grows a store by checkpoints of host directories (one file edited per checkpoint) and sweeps it at each size. */
async function gcSweeps(tmp: string): Promise<GcFigures[]> {
  const engine = await openEngine(tmp, 'gc');
  const out: GcFigures[] = [];
  try {
    const dirs = Array.from({ length: GC_WORKSPACES }, (_, w) => {
      const dir = path.join(tmp, `gc-ws-${w}`);
      for (let d = 0; d < 5; d += 1) {
        fs.mkdirSync(path.join(dir, `d${d}`), { recursive: true });
        for (let f = 0; f < 10; f += 1)
          fs.writeFileSync(path.join(dir, `d${d}`, `f${f}.txt`), `${w}/${d}/${f} ${'x'.repeat(2000)}${Math.random()}`);
      }
      return dir;
    });
    let made = 0;
    for (const target of GC_STAGES) {
      for (; made < target; made += 1) {
        const w = made % GC_WORKSPACES;
        const dir = dirs[w] ?? '';
        fs.appendFileSync(path.join(dir, `d${made % 5}`, `f${made % 10}.txt`), `edit ${made}\n`);
        await engine.hf.snapshots.checkpoint({ dir, workspace: `gc-${w}` });
      }
      const times: number[] = [];
      const before = engine.s3.counts();
      for (let i = 0; i < GC_SWEEPS_PER_STAGE; i += 1) {
        const started = performance.now();
        const outcome = await engine.hf.sweepGarbage();
        if (outcome.kind !== 'swept') throw new Error(`sweep skipped: claim held by ${outcome.holder}`);
        times.push(performance.now() - started);
      }
      const snap = await pgSnapshot(engine.dbUrl, 0);
      out.push({
        checkpoints: snap.tables.checkpoints?.rows ?? 0,
        packs: snap.tables.packs?.rows ?? 0,
        objects: snap.tables.objects?.rows ?? 0,
        pgBytes: Object.values(snap.tables).reduce((a, t) => a + t.totalBytes, 0),
        sweeps: GC_SWEEPS_PER_STAGE,
        sweepMsMedian: median(times),
        s3PerSweep: perTurnS3(engine.s3.counts(), before, GC_SWEEPS_PER_STAGE),
      });
      log(`gc at ${target} checkpoints: ${median(times).toFixed(0)} ms`);
    }
    return out;
  } finally {
    await engine.close();
  }
}

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-scale-'));
  try {
    const started = Date.now();
    const small = await smallEdits(tmp);
    log('ten files');
    const tenFiles = await repeatedTurns(tmp, 'ten', TEN_FILES_RUNS, TEN_FILES_TURNS_PER_RUN, TEN_FILES);
    log('artifact');
    const artifact = await repeatedTurns(tmp, 'artifact', 1, ARTIFACT_TURNS, ARTIFACT);
    log('recovery');
    const recovery = await recoveries(tmp);
    log('gc');
    const gc = await gcSweeps(tmp);
    const previous = fs.existsSync(outFile) ? (JSON.parse(fs.readFileSync(outFile, 'utf8')) as { load?: unknown }) : {};
    const figures = {
      measuredAt: new Date().toISOString(),
      machine: { cores: os.cpus().length, node: process.version, note: 'shared with other engineers: medians, loaded machine' },
      quick,
      durationS: Math.round((Date.now() - started) / 1000),
      workloads: {
        base: '20 directories x 10 files of ~2.7 KiB random base64 (200 files, ~550 KB)',
        smallEdit: 'append one line to one file',
        tenFiles: 'rewrite 10 files of ~4 KiB random base64 in 10 directories',
        artifact100MB: `rewrite one ${ARTIFACT_BYTES}-byte file of random bytes`,
        recovery: 'sandbox destroyed behind the engine, then a small-edit turn (restore of the base workspace included)',
        firstTurn: 'run created, sandbox created, empty workspace checkpointed',
      },
      turns: { firstTurn: small.firstTurn, smallEdit: small.smallEdit, tenFiles, artifact100MB: artifact, recovery },
      bytesPerRow: small.bytesPerRow,
      gc,
      ...(previous.load === undefined ? {} : { load: previous.load }),
    };
    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    fs.writeFileSync(outFile, `${JSON.stringify(figures, null, 2)}\n`);
    log(`wrote ${outFile}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
