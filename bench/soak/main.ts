import { parseArgs } from 'node:util';
import type { FaultKind } from './faults.js';
import { randomSeed } from './rng.js';
import { ALL_FAULT_KINDS, DEFAULT_FAULT_KINDS, formatReport, runSoak, SOAK_TIMINGS } from './soak.js';

/**
 * `npm run soak [-- --seed N --runs N --turns N --replicas N --concurrency N --pg-restart]`:
 * a fault soak of a fleet of `holdfast serve` replicas, then a check of its history. Exits 1
 * on any violation.
 */
// The AWS SDK warns about Node 20 on every client; that says nothing about the soak.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    runs: { type: 'string', default: '200' },
    turns: { type: 'string', default: '4' },
    replicas: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '6' },
    'pg-restart': { type: 'boolean', default: false },
    faults: { type: 'string' },
    quiet: { type: 'boolean', default: false },
  },
});
const int = (name: string, value: string | undefined, min: number): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer of at least ${min}, got ${value}`);
    process.exit(2);
  }
  return n;
};
/** `--faults a,b` (or `none`) picks the kinds; `--pg-restart` adds the full PostgreSQL restart. */
function faultKinds(list: string | undefined, pgRestart: boolean): FaultKind[] {
  const kinds: FaultKind[] = list === undefined ? [...DEFAULT_FAULT_KINDS] : list === 'none' ? [] : (list.split(',') as FaultKind[]);
  for (const kind of kinds)
    if (!(ALL_FAULT_KINDS as readonly string[]).includes(kind)) {
      console.error(`--faults: unknown kind ${kind} (known: ${ALL_FAULT_KINDS.join(', ')})`);
      process.exit(2);
    }
  return pgRestart && !kinds.includes('pg-restart') ? [...kinds, 'pg-restart'] : kinds;
}
const seed = values.seed === undefined ? randomSeed() : int('seed', values.seed, 0);
console.log(`soak seed ${seed} (repeat with --seed ${seed})`);
const report = await runSoak({
  seed,
  runs: int('runs', values.runs, 1),
  turnsPerRun: int('turns', values.turns, 1),
  replicas: int('replicas', values.replicas, 3),
  concurrency: int('concurrency', values.concurrency, 1),
  kinds: faultKinds(values.faults, values['pg-restart']),
  timings: SOAK_TIMINGS,
  log: values.quiet ? () => {} : (line) => console.log(line),
});
for (const line of formatReport(report)) console.log(line);
process.exit(report.check.violations.length === 0 ? 0 : 1);
