/** Text output of the snapshot benchmark: one table of medians per workload, and the targets. */
import { type MetricField, maxOf, medianOf, type OpId, type WorkloadResult } from './snapshot-results.js';
import type { SnapshotTool, ToolId } from './snapshot-tool.js';
import { printTable } from './stats.js';

/** One row of a workload table. */
interface RowSpec {
  readonly label: string;
  readonly op: OpId;
  readonly field: MetricField;
  /** The tar column shows "(full again)": tar has no incremental mode. */
  readonly fullAgain?: boolean;
}

const ROWS_A: readonly RowSpec[] = [
  { label: '1. full checkpoint (s)', op: 'full', field: 'ms' },
  { label: '2. no-change checkpoint (s)', op: 'noChange', field: 'ms', fullAgain: true },
  { label: '3. 10 files changed (s)', op: 'changed10', field: 'ms', fullAgain: true },
  { label: '4. full restore (s)', op: 'restore', field: 'ms' },
  { label: '5. store after 1+2+3 (MB on disk)', op: 'store', field: 'diskBytes' },
  { label: '6. peak RSS, full checkpoint (MB)', op: 'full', field: 'peakRssKiB' },
];
const ROWS_B: readonly RowSpec[] = [
  { label: '1. full checkpoint (s)', op: 'full', field: 'ms' },
  { label: '2. no-change checkpoint (s)', op: 'noChange', field: 'ms', fullAgain: true },
  { label: '5. store after 1+2 (MB on disk)', op: 'store', field: 'diskBytes' },
  { label: '6. peak RSS, full checkpoint (MB)', op: 'full', field: 'peakRssKiB' },
];

/** Formats a median for its field: seconds, MB (10^6 bytes) or a count. */
export function formatValue(field: MetricField, value: number | undefined): string {
  if (value === undefined) return '—';
  switch (field) {
    case 'ms':
      return (value / 1000).toFixed(value < 1000 ? 3 : 2);
    case 'peakRssKiB':
      return ((value * 1024) / 1e6).toFixed(1);
    case 'diskBytes':
    case 'apparentBytes':
      return (value / 1e6).toFixed(1);
    default:
      return String(value);
  }
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined || b === 0 ? '—' : `${(a / b).toFixed(2)}x`;
}

/** Prints the table of one workload: rows = operations, columns = tools, then Holdfast's ratios. */
export function printWorkloadTable(name: 'A' | 'B', title: string, result: WorkloadResult, tools: readonly SnapshotTool[]): void {
  const header = ['operation', ...tools.map((t) => t.label), 'hf/restic', 'hf/git'];
  const rows = (name === 'A' ? ROWS_A : ROWS_B).map((spec) => {
    const cells = tools.map((tool) => {
      const value = formatValue(spec.field, medianOf(result, spec.op, tool.id, spec.field));
      return spec.fullAgain === true && !tool.incremental && value !== '—' ? `${value} (full again)` : value;
    });
    const hf = medianOf(result, spec.op, 'holdfast', spec.field);
    return [
      spec.label,
      ...cells,
      ratio(hf, medianOf(result, spec.op, 'restic', spec.field)),
      ratio(hf, medianOf(result, spec.op, 'git', spec.field)),
    ];
  });
  if (name === 'A' && tools.some((t) => t.id === 'holdfast-s3')) {
    for (const [label, op] of [
      ['S3 blob writes, no-change (reported / seen)', 'noChange'],
      ['S3 blob writes, 10 changed (reported / seen)', 'changed10'],
    ] as const) {
      const reported = formatValue('blobWrites', medianOf(result, op, 'holdfast-s3', 'blobWrites'));
      const seen = formatValue('s3WriteRequests', medianOf(result, op, 'holdfast-s3', 's3WriteRequests'));
      rows.push([label, ...tools.map((t) => (t.id === 'holdfast-s3' ? `${reported} / ${seen}` : '')), '', '']);
    }
  }
  printTable(title, header, rows);
}

/** One target and how the measurement compares with it. */
export interface TargetResult {
  readonly target: string;
  readonly measured: string;
  readonly status: 'PASS' | 'MISS' | 'n/a';
}

/** Evaluates the Holdfast targets on workload A (and B for memory). */
export function evaluateTargets(a: WorkloadResult | undefined, b: WorkloadResult | undefined): TargetResult[] {
  const vs = (target: string, op: OpId, field: MetricField, other: ToolId, limit: number): TargetResult => {
    const hf = medianOf(a, op, 'holdfast', field);
    const ref = medianOf(a, op, other, field);
    if (hf === undefined || ref === undefined || ref === 0) return { target, measured: 'not measured', status: 'n/a' };
    const r = hf / ref;
    const measured = `${r.toFixed(2)}x (${formatValue(field, hf)} vs ${formatValue(field, ref)})`;
    return { target, measured, status: r <= limit ? 'PASS' : 'MISS' };
  };
  return [
    vs('A no-change checkpoint <= 0.25x restic', 'noChange', 'ms', 'restic', 0.25),
    vs('A no-change checkpoint <= 3x git', 'noChange', 'ms', 'git', 3),
    vs('A 10 files changed <= 0.4x restic', 'changed10', 'ms', 'restic', 0.4),
    vs('A full checkpoint <= 0.6x restic', 'full', 'ms', 'restic', 0.6),
    vs('A full restore <= 1.0x restic', 'restore', 'ms', 'restic', 1.0),
    vs('A store after 1+2+3 <= 1.1x restic', 'store', 'diskBytes', 'restic', 1.1),
    blobWritesTarget(a),
    rssTarget(b),
  ];
}

function blobWritesTarget(a: WorkloadResult | undefined): TargetResult {
  const target = 'A <= 4 blob writes per incremental checkpoint (S3, worst run)';
  const worst = (op: OpId) => maxOf(a, op, 'holdfast-s3', 'blobWrites') ?? maxOf(a, op, 'holdfast-s3', 's3WriteRequests');
  const noChange = worst('noChange');
  const changed = worst('changed10');
  if (noChange === undefined || changed === undefined) return { target, measured: 'not measured', status: 'n/a' };
  const seen = (op: OpId) => formatValue('s3WriteRequests', maxOf(a, op, 'holdfast-s3', 's3WriteRequests'));
  const measured = `no-change ${noChange}, 10 changed ${changed} (S3 PUT/POST seen: ${seen('noChange')}, ${seen('changed10')})`;
  return { target, measured, status: Math.max(noChange, changed) <= 4 ? 'PASS' : 'MISS' };
}

function rssTarget(b: WorkloadResult | undefined): TargetResult {
  const files = b?.manifest.files;
  const target = `B peak RSS of full checkpoint <= 200 MB${files === undefined ? '' : ` (${files.toLocaleString('en-US')} files)`}`;
  const rss = medianOf(b, 'full', 'holdfast', 'peakRssKiB');
  if (rss === undefined) return { target, measured: 'not measured', status: 'n/a' };
  const mb = (rss * 1024) / 1e6;
  return { target, measured: `${mb.toFixed(1)} MB`, status: mb <= 200 ? 'PASS' : 'MISS' };
}

/** Prints the targets table. */
export function printTargets(targets: readonly TargetResult[]): void {
  printTable(
    'Targets (Holdfast, medians unless noted)',
    ['target', 'measured', 'result'],
    targets.map((t) => [t.target, t.measured, t.status]),
  );
}

/** Slowest run over fastest above which a measurement is flagged as noisy. */
const NOISY_SPREAD = 2;

/** Lines worth a reader's attention: failed restore checks, files a tool left out, noisy timings. */
export function warnings(name: string, result: WorkloadResult, expectedFiles: number): string[] {
  const out: string[] = [];
  for (const [op, byTool] of Object.entries(result.samples)) {
    for (const [tool, runs] of Object.entries(byTool ?? {})) {
      for (const run of runs ?? []) {
        if (run.verifyError !== undefined) out.push(`${name} ${op} ${tool} run ${run.run + 1}: restore check failed: ${run.verifyError}`);
        if (run.excluded !== undefined && run.excluded.length > 0) {
          out.push(
            `${name} ${op} ${tool} run ${run.run + 1}: excluded ${run.excluded.length} paths (${run.excluded.slice(0, 5).join(', ')})`,
          );
        }
        if (op === 'full' && run.files !== undefined && run.files !== expectedFiles) {
          out.push(`${name} full ${tool} run ${run.run + 1}: checkpointed ${run.files} files, the workspace has ${expectedFiles}`);
        }
      }
      const times = (runs ?? []).map((r) => r.ms).filter((ms): ms is number => ms !== undefined);
      const [min, max] = [Math.min(...times), Math.max(...times)];
      if (times.length > 1 && max > NOISY_SPREAD * min) {
        out.push(`${name} ${op} ${tool}: noisy, runs ranged ${formatValue('ms', min)}-${formatValue('ms', max)} s`);
      }
    }
  }
  return [...new Set(out)];
}
