/**
 * `npm run scale-sim -- --runs 1000000 --turns-per-day 20 --retention-days 30`: what a fleet of
 * that shape costs, from the per-turn figures `scale-measure.ts` measured (docs/scale-figures.json,
 * `--figures FILE`): PostgreSQL rows and bytes per table and index, S3 requests per second
 * (average and peak, against S3's per-prefix limits), stored bytes, monthly request and storage
 * cost at the prices used, and a GC sweep's cost at that store size (its time by a power law
 * and its requests by a line in the checkpoints the store holds, fitted to the measured sweeps). `--json` prints the result as JSON.
 *
 * Model (stated, not hidden): `runs` runs are active at once, each takes `turnsPerDay` turns;
 * a fraction `recoveryRate` of turns find their sandbox gone (a recovery turn), the rest are
 * split by `mix` between small edits, 10-file turns and 100 MB artifacts; a run lives
 * `runLifetimeDays` and its rows are kept while they are within `retentionDays`; turns,
 * checkpoints and stored bytes of the last `retentionDays` days are retained (GC frees the
 * rest); peak turns/s is `peakFactor` times the day's average.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** List prices used (S3 Standard, us-east-1), dollars. */
export const S3_PRICES = Object.freeze({ putTierPer1000: 0.005, getTierPer1000: 0.0004, storagePerGbMonth: 0.023 });
/** S3's request rates per second per partitioned prefix. */
export const S3_PREFIX_LIMITS = Object.freeze({ putPerSecond: 3500, getPerSecond: 5500 });
/** Pack keys fan out under `packs/ab/`: 256 prefixes S3 can partition. */
export const PACK_PREFIXES = 256;
/** The service sweeps GC every 3 minutes. */
export const GC_SWEEPS_PER_DAY = (24 * 60) / 3;
const SECONDS_PER_DAY = 86_400;
const DAYS_PER_MONTH = 30;

/** The slice of docs/scale-figures.json the simulation reads. */
export interface ScaleFigures {
  readonly turns: Readonly<Record<TurnKind | 'firstTurn', MeasuredTurn>>;
  readonly bytesPerRow: Readonly<Record<string, { readonly heap: number; readonly indexes: Readonly<Record<string, number>> }>>;
  readonly gc: ReadonlyArray<{ readonly checkpoints: number; readonly sweepMsMedian: number; readonly s3PerSweep: S3PerStep }>;
}
export type TurnKind = 'smallEdit' | 'tenFiles' | 'artifact100MB' | 'recovery';
interface S3PerStep {
  readonly requests: Readonly<Record<'put' | 'post' | 'list' | 'get' | 'head' | 'delete', number>>;
  readonly bytesIn: number;
  readonly bytesOut: number;
}
interface MeasuredTurn {
  readonly pg: { readonly tables: Readonly<Record<string, { readonly rows: number }>>; readonly commits: number };
  readonly s3: S3PerStep;
}

/** A fleet's shape. */
export interface FleetShape {
  readonly runs: number;
  readonly turnsPerDay: number;
  readonly retentionDays: number;
  readonly runLifetimeDays: number;
  readonly recoveryRate: number;
  /** Shares of the non-recovery turns; must sum to 1. */
  readonly mix: Readonly<Record<Exclude<TurnKind, 'recovery'>, number>>;
  readonly peakFactor: number;
}

export const DEFAULT_SHAPE: FleetShape = Object.freeze({
  runs: 1_000_000,
  turnsPerDay: 20,
  retentionDays: 30,
  runLifetimeDays: 7,
  recoveryRate: 0.05,
  mix: Object.freeze({ smallEdit: 0.8, tenFiles: 0.18, artifact100MB: 0.02 }),
  peakFactor: 3,
});

/** What the fleet costs. */
export interface SimResult {
  readonly turnsPerDay: number;
  readonly turnsPerSecond: { readonly average: number; readonly peak: number };
  /** Runs whose rows are retained: the active ones and those ended within the retention. */
  readonly runsRetained: number;
  readonly tables: Readonly<Record<string, { rows: number; heapBytes: number; indexBytes: number; indexes: Record<string, number> }>>;
  readonly pg: { readonly rows: number; readonly bytes: number; readonly commitsPerSecondPeak: number };
  readonly s3: {
    readonly perTurn: Readonly<Record<string, number>>;
    readonly putTierPerSecond: { readonly average: number; readonly peak: number; readonly peakPerPackPrefix: number };
    readonly getTierPerSecond: { readonly average: number; readonly peak: number; readonly peakPerPackPrefix: number };
    readonly storedBytes: number;
  };
  readonly gc: {
    readonly checkpoints: number;
    /** Extrapolated by the power law fitted to the measured sweeps' medians. */
    readonly sweepSeconds: number;
    /** Extrapolated by the least-squares line through them instead. */
    readonly sweepSecondsLinear: number;
    readonly sweepExponent: number;
    readonly getsPerSweep: number;
    readonly listsPerSweep: number;
  };
  readonly monthlyCost: { readonly requests: number; readonly storage: number; readonly gcRequests: number };
  readonly requestCostPerMillionTurns: number;
}

/** Weights of each measured turn kind in the fleet's average turn. */
export function turnWeights(shape: FleetShape): Record<TurnKind, number> {
  const rest = 1 - shape.recoveryRate;
  return {
    smallEdit: shape.mix.smallEdit * rest,
    tenFiles: shape.mix.tenFiles * rest,
    artifact100MB: shape.mix.artifact100MB * rest,
    recovery: shape.recoveryRate,
  };
}

/** Least-squares line through (x, y) points; a single point gives a line through the origin. */
export function fitLine(points: ReadonlyArray<readonly [number, number]>): { intercept: number; slope: number } {
  if (points.length === 1) {
    const [[x, y]] = points as [readonly [number, number]];
    return { intercept: 0, slope: x === 0 ? 0 : y / x };
  }
  const n = points.length;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  const sxx = points.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  const sxy = points.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0);
  const slope = sxx === 0 ? 0 : sxy / sxx;
  return { intercept: my - slope * mx, slope };
}

/**
 * Least-squares power law `y = coefficient * x^exponent` through (x, y) points with x, y > 0
 * (a line in log-log space); a single point gives exponent 1.
 */
export function fitPowerLaw(points: ReadonlyArray<readonly [number, number]>): { coefficient: number; exponent: number } {
  const logs = points.filter(([x, y]) => x > 0 && y > 0).map(([x, y]) => [Math.log(x), Math.log(y)] as const);
  if (logs.length === 0) return { coefficient: 0, exponent: 1 };
  if (logs.length === 1) {
    const [[lx, ly]] = logs as [readonly [number, number]];
    return { coefficient: Math.exp(ly - lx), exponent: 1 };
  }
  const line = fitLine(logs);
  return { coefficient: Math.exp(line.intercept), exponent: line.slope };
}

/** The totals of a fleet of `shape` with the measured `figures`. */
export function simulate(figures: ScaleFigures, shape: FleetShape): SimResult {
  const mixSum = shape.mix.smallEdit + shape.mix.tenFiles + shape.mix.artifact100MB;
  if (Math.abs(mixSum - 1) > 1e-9) throw new Error(`the mix must sum to 1, not ${mixSum}`);
  const weights = turnWeights(shape);
  const kinds = Object.keys(weights) as TurnKind[];
  const mixed = (value: (t: MeasuredTurn) => number) => kinds.reduce((a, k) => a + weights[k] * value(figures.turns[k]), 0);

  const turnsPerDay = shape.runs * shape.turnsPerDay;
  const average = turnsPerDay / SECONDS_PER_DAY;
  const peak = average * shape.peakFactor;
  const turnsRetained = turnsPerDay * shape.retentionDays;
  const runsRetained = shape.runs + (shape.runs / shape.runLifetimeDays) * shape.retentionDays;
  const first = figures.turns.firstTurn;

  const tableNames = new Set([...kinds.flatMap((k) => Object.keys(figures.turns[k].pg.tables)), ...Object.keys(first.pg.tables)]);
  const tables: Record<string, { rows: number; heapBytes: number; indexBytes: number; indexes: Record<string, number> }> = {};
  let rowsTotal = 0;
  let bytesTotal = 0;
  for (const name of [...tableNames].sort()) {
    const perTurn = mixed((t) => t.pg.tables[name]?.rows ?? 0);
    const perRun = first.pg.tables[name]?.rows ?? 0;
    const rows = Math.max(0, perTurn * turnsRetained + perRun * runsRetained);
    const size = figures.bytesPerRow[name];
    const indexes = Object.fromEntries(Object.entries(size?.indexes ?? {}).map(([i, b]) => [i, rows * b]));
    const heapBytes = rows * (size?.heap ?? 0);
    const indexBytes = Object.values(indexes).reduce((a, b) => a + b, 0);
    tables[name] = { rows, heapBytes, indexBytes, indexes };
    rowsTotal += rows;
    bytesTotal += heapBytes + indexBytes;
  }

  const perTurn = Object.fromEntries(
    (['put', 'post', 'list', 'get', 'head', 'delete'] as const).map((k) => [k, mixed((t) => t.s3.requests[k])]),
  ) as Record<'put' | 'post' | 'list' | 'get' | 'head' | 'delete', number>;
  const putTier = perTurn.put + perTurn.post + perTurn.list;
  const getTier = perTurn.get + perTurn.head;
  const bytesInPerTurn = mixed((t) => t.s3.bytesIn);
  const storedBytes = bytesInPerTurn * turnsRetained;

  const checkpointsRetained = mixed((t) => t.pg.tables.checkpoints?.rows ?? 0) * turnsRetained;
  const timePoints = figures.gc.map((g) => [g.checkpoints, g.sweepMsMedian] as const);
  const time = fitLine(timePoints);
  const timePower = fitPowerLaw(timePoints);
  const gets = fitLine(figures.gc.map((g) => [g.checkpoints, g.s3PerSweep.requests.get + g.s3PerSweep.requests.head] as const));
  const lists = fitLine(figures.gc.map((g) => [g.checkpoints, g.s3PerSweep.requests.list] as const));
  const getsPerSweep = Math.max(0, gets.intercept + gets.slope * checkpointsRetained);
  const listsPerSweep = Math.max(0, lists.intercept + lists.slope * checkpointsRetained);
  const sweepSecondsLinear = Math.max(0, time.intercept + time.slope * checkpointsRetained) / 1000;
  const sweepSeconds = (timePower.coefficient * checkpointsRetained ** timePower.exponent) / 1000;

  const monthlyTurns = turnsPerDay * DAYS_PER_MONTH;
  const requestCost = (putTierCount: number, getTierCount: number) =>
    (putTierCount / 1000) * S3_PRICES.putTierPer1000 + (getTierCount / 1000) * S3_PRICES.getTierPer1000;
  return {
    turnsPerDay,
    turnsPerSecond: { average, peak },
    runsRetained,
    tables,
    pg: { rows: rowsTotal, bytes: bytesTotal, commitsPerSecondPeak: mixed((t) => t.pg.commits) * peak },
    s3: {
      perTurn,
      putTierPerSecond: { average: putTier * average, peak: putTier * peak, peakPerPackPrefix: (putTier * peak) / PACK_PREFIXES },
      getTierPerSecond: { average: getTier * average, peak: getTier * peak, peakPerPackPrefix: (getTier * peak) / PACK_PREFIXES },
      storedBytes,
    },
    gc: {
      checkpoints: checkpointsRetained,
      sweepSeconds,
      sweepSecondsLinear,
      sweepExponent: timePower.exponent,
      getsPerSweep,
      listsPerSweep,
    },
    monthlyCost: {
      requests: requestCost(putTier * monthlyTurns, getTier * monthlyTurns),
      storage: (storedBytes / 1e9) * S3_PRICES.storagePerGbMonth,
      gcRequests: requestCost(listsPerSweep * GC_SWEEPS_PER_DAY * DAYS_PER_MONTH, getsPerSweep * GC_SWEEPS_PER_DAY * DAYS_PER_MONTH),
    },
    requestCostPerMillionTurns: requestCost(putTier * 1e6, getTier * 1e6),
  };
}

function parseShape(argv: readonly string[]): FleetShape {
  const num = (flag: string, fallback: number) => {
    const i = argv.indexOf(flag);
    if (i < 0) return fallback;
    const value = Number(argv[i + 1]);
    if (!Number.isFinite(value) || value < 0) throw new Error(`${flag} takes a non-negative number`);
    return value;
  };
  const mixArg = argv.includes('--mix') ? (argv[argv.indexOf('--mix') + 1] ?? '') : '';
  const mix = { ...DEFAULT_SHAPE.mix };
  for (const part of mixArg.split(',').filter(Boolean)) {
    const [key, value] = part.split('=');
    if (key !== 'smallEdit' && key !== 'tenFiles' && key !== 'artifact100MB')
      throw new Error(`--mix takes smallEdit=, tenFiles=, artifact100MB=, not ${key}`);
    mix[key] = Number(value);
  }
  return {
    runs: num('--runs', DEFAULT_SHAPE.runs),
    turnsPerDay: num('--turns-per-day', DEFAULT_SHAPE.turnsPerDay),
    retentionDays: num('--retention-days', DEFAULT_SHAPE.retentionDays),
    runLifetimeDays: num('--run-lifetime-days', DEFAULT_SHAPE.runLifetimeDays),
    recoveryRate: num('--recovery-rate', DEFAULT_SHAPE.recoveryRate),
    mix,
    peakFactor: num('--peak-factor', DEFAULT_SHAPE.peakFactor),
  };
}

const si = (x: number) => {
  const units = ['', 'k', 'M', 'G', 'T', 'P'];
  let i = 0;
  for (; Math.abs(x) >= 1000 && i < units.length - 1; i += 1) x /= 1000;
  return `${x.toFixed(x < 10 ? 2 : x < 100 ? 1 : 0)}${units[i]}`;
};

function print(shape: FleetShape, r: SimResult): void {
  const out: string[] = [];
  out.push(
    `Fleet: ${si(shape.runs)} runs x ${shape.turnsPerDay} turns/day, retention ${shape.retentionDays} d, run lifetime ${shape.runLifetimeDays} d,`,
  );
  out.push(`       recovery ${shape.recoveryRate}, mix ${JSON.stringify(shape.mix)}, peak ${shape.peakFactor}x average`);
  out.push(
    `Prices used: S3 Standard us-east-1, PUT/COPY/POST/LIST $${S3_PRICES.putTierPer1000}/1000, GET $${S3_PRICES.getTierPer1000}/1000, storage $${S3_PRICES.storagePerGbMonth}/GB-month`,
  );
  out.push('');
  out.push(
    `turns: ${si(r.turnsPerDay)}/day, ${r.turnsPerSecond.average.toFixed(0)}/s average, ${r.turnsPerSecond.peak.toFixed(0)}/s peak; runs retained ${si(r.runsRetained)}`,
  );
  out.push(`PostgreSQL: ${si(r.pg.rows)} rows, ${si(r.pg.bytes)}B (heap + indexes), ${si(r.pg.commitsPerSecondPeak)} commits/s at peak`);
  for (const [name, t] of Object.entries(r.tables)) {
    out.push(
      `  ${name.padEnd(22)} ${si(t.rows).padStart(7)} rows  heap ${si(t.heapBytes).padStart(7)}B  indexes ${si(t.indexBytes).padStart(7)}B`,
    );
    for (const [i, b] of Object.entries(t.indexes)) out.push(`    ${i.padEnd(44)} ${si(b).padStart(7)}B`);
  }
  const s = r.s3;
  out.push(
    `S3 per turn: ${Object.entries(s.perTurn)
      .map(([k, v]) => `${k} ${v.toFixed(2)}`)
      .join(', ')}`,
  );
  out.push(
    `S3 PUT-tier/s: ${s.putTierPerSecond.average.toFixed(0)} average, ${s.putTierPerSecond.peak.toFixed(0)} peak, ${s.putTierPerSecond.peakPerPackPrefix.toFixed(1)} per pack prefix (limit ${S3_PREFIX_LIMITS.putPerSecond})`,
  );
  out.push(
    `S3 GET-tier/s: ${s.getTierPerSecond.average.toFixed(0)} average, ${s.getTierPerSecond.peak.toFixed(0)} peak, ${s.getTierPerSecond.peakPerPackPrefix.toFixed(1)} per pack prefix (limit ${S3_PREFIX_LIMITS.getPerSecond})`,
  );
  out.push(`S3 stored: ${si(s.storedBytes)}B`);
  out.push(
    `GC sweep at ${si(r.gc.checkpoints)} checkpoints: ~${si(r.gc.sweepSeconds)} s (time ~ checkpoints^${r.gc.sweepExponent.toFixed(2)}; ${si(r.gc.sweepSecondsLinear)} s if linear), ~${si(r.gc.getsPerSweep)} GETs, ~${si(r.gc.listsPerSweep)} LISTs (every 3 min today)`,
  );
  out.push(
    `monthly: requests $${r.monthlyCost.requests.toFixed(0)}, storage $${r.monthlyCost.storage.toFixed(0)}, GC sweep GETs $${r.monthlyCost.gcRequests.toFixed(0)} (if sweeps could keep their 3-minute interval)`,
  );
  out.push(`request cost per million turns: $${r.requestCostPerMillionTurns.toFixed(2)}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

function main(argv: readonly string[]): void {
  const file = argv.includes('--figures') ? (argv[argv.indexOf('--figures') + 1] ?? '') : 'docs/scale-figures.json';
  const figures = JSON.parse(fs.readFileSync(path.resolve(file), 'utf8')) as ScaleFigures;
  const shape = parseShape(argv);
  const result = simulate(figures, shape);
  if (argv.includes('--json')) process.stdout.write(`${JSON.stringify({ shape, result }, null, 2)}\n`);
  else print(shape, result);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main(process.argv.slice(2));
