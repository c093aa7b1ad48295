import { describe, expect, it } from 'vitest';
import { randomSeed } from '../bench/soak/rng.js';
import { DEFAULT_FAULT_KINDS, formatReport, runSoak, SOAK_TIMINGS } from '../bench/soak/soak.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

/** HOLDFAST_SOAK_SEED repeats a soak's fault schedule; otherwise each run draws (and prints) its own. */
const SEED = process.env.HOLDFAST_SOAK_SEED === undefined ? randomSeed() : Number(process.env.HOLDFAST_SOAK_SEED);
const SOAK_TIMEOUT_MS = 300_000;

/**
 * The short fault soak (`npm run soak` is the long one): three `holdfast serve` replicas on a
 * fresh PostgreSQL database and a loopback S3 endpoint, tens of runs bound to one project
 * folder, turns and folder writes over HTTP while seeded faults hit the fleet (kill -9,
 * SIGSTOP, this database's connections terminated, S3 errors, slowness and cut uploads,
 * sandboxes destroyed, a replica's cache disk full, GC with no grace), then the history
 * checker: every promise of the acknowledged history must hold.
 */
describe('fleet soak', () => {
  it(
    'under mixed faults, every acknowledged turn and folder write survives and every run progresses afterwards',
    async () => {
      expectBwrapInstalled();
      console.log(`fleet soak seed ${SEED} (repeat with HOLDFAST_SOAK_SEED=${SEED})`);
      const report = await runSoak({
        seed: SEED,
        replicas: 3,
        runs: 12,
        turnsPerRun: 3,
        concurrency: 4,
        kinds: DEFAULT_FAULT_KINDS,
        timings: SOAK_TIMINGS,
        log: () => {},
      });
      const lines = formatReport(report);
      console.log(lines.join('\n'));
      expect(report.faults.length).toBeGreaterThan(0);
      expect(report.turnsAcked).toBeGreaterThan(0);
      expect(report.check.violations, lines.join('\n')).toEqual([]);
    },
    SOAK_TIMEOUT_MS,
  );
});
