import { describe, expect, it } from 'vitest';
import { type FleetShape, fitLine, fitPowerLaw, S3_PRICES, type ScaleFigures, simulate } from '../bench/scale-sim.js';

/** A measured turn with `rows` rows per table, `put`/`get` requests and `bytesIn` bytes uploaded. */
function turn(rows: Record<string, number>, put: number, get: number, bytesIn: number, commits: number) {
  return {
    pg: { tables: Object.fromEntries(Object.entries(rows).map(([t, n]) => [t, { rows: n }])), commits },
    s3: { requests: { put, post: 0, list: 0, get, head: put, delete: 0 }, bytesIn, bytesOut: 0 },
  };
}

const figures: ScaleFigures = {
  turns: {
    smallEdit: turn({ checkpoints: 1, turns: 1, objects: 4 }, 2, 0, 1000, 30),
    tenFiles: turn({ checkpoints: 1, turns: 1, objects: 20 }, 2, 0, 40_000, 32),
    artifact100MB: turn({ checkpoints: 1, turns: 1, objects: 100 }, 8, 0, 100_000_000, 70),
    recovery: turn({ checkpoints: 1, turns: 1, objects: 4 }, 2, 6, 1000, 66),
    firstTurn: turn({ runs: 1, workspaces: 1, checkpoints: 1, turns: 1 }, 1, 0, 100, 50),
  },
  bytesPerRow: {
    checkpoints: { heap: 100, indexes: { checkpoints_pkey: 40 } },
    objects: { heap: 150, indexes: { objects_pkey: 60, objects_pack_idx: 20 } },
    runs: { heap: 300, indexes: {} },
  },
  gc: [
    {
      checkpoints: 100,
      sweepMsMedian: 1100,
      s3PerSweep: { requests: { put: 0, post: 0, list: 2, get: 210, head: 0, delete: 0 }, bytesIn: 0, bytesOut: 0 },
    },
    {
      checkpoints: 300,
      sweepMsMedian: 3100,
      s3PerSweep: { requests: { put: 0, post: 0, list: 2, get: 610, head: 0, delete: 0 }, bytesIn: 0, bytesOut: 0 },
    },
  ],
};

const shape: FleetShape = {
  runs: 1000,
  turnsPerDay: 10,
  retentionDays: 20,
  runLifetimeDays: 5,
  recoveryRate: 0.1,
  mix: { smallEdit: 0.5, tenFiles: 0.3, artifact100MB: 0.2 },
  peakFactor: 2,
};

describe('scale-sim: the fleet totals follow from the figures and the shape', () => {
  const r = simulate(figures, shape);
  // The weights of the turn kinds in the average turn: 90% split by the mix, 10% recoveries.
  const w = { smallEdit: 0.45, tenFiles: 0.27, artifact100MB: 0.18, recovery: 0.1 };
  const turnsPerDay = 1000 * 10;
  const retainedTurns = turnsPerDay * 20;
  // Active runs plus the runs ended within the retention: 1000 new runs every 5 days for 20 days.
  const retainedRuns = 1000 + (1000 / 5) * 20;

  it('turns per second, average and peak', () => {
    expect(r.turnsPerDay).toBe(turnsPerDay);
    expect(r.turnsPerSecond.average).toBeCloseTo(turnsPerDay / 86_400, 10);
    expect(r.turnsPerSecond.peak).toBeCloseTo((2 * turnsPerDay) / 86_400, 10);
    expect(r.runsRetained).toBe(retainedRuns);
  });

  it('rows and bytes per table and index: per-turn rows over the retained turns, per-run rows over the retained runs', () => {
    const objectsPerTurn = w.smallEdit * 4 + w.tenFiles * 20 + w.artifact100MB * 100 + w.recovery * 4;
    expect(r.tables.objects?.rows).toBeCloseTo(objectsPerTurn * retainedTurns, 6);
    expect(r.tables.objects?.heapBytes).toBeCloseTo(objectsPerTurn * retainedTurns * 150, 3);
    expect(r.tables.objects?.indexes.objects_pack_idx).toBeCloseTo(objectsPerTurn * retainedTurns * 20, 3);
    expect(r.tables.checkpoints?.rows).toBeCloseTo(retainedTurns + retainedRuns, 6);
    expect(r.tables.runs?.rows).toBe(retainedRuns);
    expect(r.tables.runs?.heapBytes).toBe(retainedRuns * 300);
    // No size measured for turns: rows are counted, bytes are not invented.
    expect(r.tables.turns?.heapBytes).toBe(0);
    const bytes = objectsPerTurn * retainedTurns * (150 + 60 + 20) + (retainedTurns + retainedRuns) * (100 + 40) + retainedRuns * 300;
    expect(r.pg.bytes).toBeCloseTo(bytes, 0);
    const commitsPerTurn = w.smallEdit * 30 + w.tenFiles * 32 + w.artifact100MB * 70 + w.recovery * 66;
    expect(r.pg.commitsPerSecondPeak).toBeCloseTo((commitsPerTurn * 2 * turnsPerDay) / 86_400, 8);
  });

  it('S3 requests per second, per pack prefix, stored bytes and costs at the stated prices', () => {
    const putPerTurn = w.smallEdit * 2 + w.tenFiles * 2 + w.artifact100MB * 8 + w.recovery * 2;
    const getPerTurn = w.recovery * 6 + putPerTurn; // GET plus HEAD (one HEAD per PUT in these figures)
    expect(r.s3.putTierPerSecond.average).toBeCloseTo((putPerTurn * turnsPerDay) / 86_400, 10);
    expect(r.s3.getTierPerSecond.peakPerPackPrefix).toBeCloseTo((getPerTurn * 2 * turnsPerDay) / 86_400 / 256, 10);
    const bytesPerTurn = w.smallEdit * 1000 + w.tenFiles * 40_000 + w.artifact100MB * 100_000_000 + w.recovery * 1000;
    expect(r.s3.storedBytes).toBeCloseTo(bytesPerTurn * retainedTurns, 0);
    expect(r.monthlyCost.storage).toBeCloseTo(((bytesPerTurn * retainedTurns) / 1e9) * 0.023, 6);
    expect(r.requestCostPerMillionTurns).toBeCloseTo(putPerTurn * 1000 * 0.005 + getPerTurn * 1000 * 0.0004, 8);
    expect(r.monthlyCost.requests).toBeCloseTo(((putPerTurn * 0.005 + getPerTurn * 0.0004) * turnsPerDay * 30) / 1000, 8);
    expect(S3_PRICES).toEqual({ putTierPer1000: 0.005, getTierPer1000: 0.0004, storagePerGbMonth: 0.023 });
  });

  it('GC: the sweep line through the measured sweeps, at the retained checkpoints', () => {
    // The two sweeps lie on ms = 100 + 10 * checkpoints and GETs = 10 + 2 * checkpoints.
    expect(
      fitLine([
        [100, 1100],
        [300, 3100],
      ]),
    ).toEqual({ intercept: 100, slope: 10 });
    const checkpoints = retainedTurns; // one checkpoint per turn of every kind
    expect(r.gc.checkpoints).toBe(checkpoints);
    expect(r.gc.sweepSecondsLinear).toBeCloseTo((100 + 10 * checkpoints) / 1000, 6);
    // The power law through (100, 1100) and (300, 3100): exponent ln(3100/1100)/ln(3).
    const exponent = Math.log(3100 / 1100) / Math.log(3);
    expect(r.gc.sweepExponent).toBeCloseTo(exponent, 10);
    expect(r.gc.sweepSeconds).toBeCloseTo((1100 * (checkpoints / 100) ** exponent) / 1000, 3);
    expect(r.gc.getsPerSweep).toBeCloseTo(10 + 2 * checkpoints, 6);
    expect(r.gc.listsPerSweep).toBeCloseTo(2, 10);
    const sweepsPerMonth = 480 * 30;
    expect(r.monthlyCost.gcRequests).toBeCloseTo(((10 + 2 * checkpoints) * sweepsPerMonth * 0.0004 + 2 * sweepsPerMonth * 0.005) / 1000, 6);
  });

  it('fits a power law exactly through points on one', () => {
    const fit = fitPowerLaw([
      [10, 3 * 10 ** 1.5],
      [40, 3 * 40 ** 1.5],
      [90, 3 * 90 ** 1.5],
    ]);
    expect(fit.coefficient).toBeCloseTo(3, 10);
    expect(fit.exponent).toBeCloseTo(1.5, 10);
  });

  it('refuses a mix that does not sum to 1', () => {
    expect(() => simulate(figures, { ...shape, mix: { smallEdit: 0.5, tenFiles: 0.5, artifact100MB: 0.5 } })).toThrow();
  });
});
