/** Text output of the snapshot benchmark: one table of medians per workload (goals: snapshot-goals.ts). */
import { type MetricField, medianOf, type OpId, type WorkloadResult } from './snapshot-results.js';
import type { SnapshotTool } from './snapshot-tool.js';
import { printTable } from './stats.js';
import { WORKLOADS } from './workloads.js';

/** One row of a workload table. */
interface RowSpec {
  readonly label: string;
  readonly op: OpId;
  readonly field: MetricField;
  /** The tar column shows "(full again)": tar has no incremental mode. */
  readonly fullAgain?: boolean;
  /** A Holdfast warm-restore row: its ratio is to Holdfast's own cold restore. */
  readonly vsCold?: boolean;
}

/** The rows of a workload's table, from what its spec measures. */
function rowsOf(result: WorkloadResult): RowSpec[] {
  const spec = WORKLOADS[result.manifest.name];
  const rows: RowSpec[] = [
    { label: '1. full checkpoint (s)', op: 'full', field: 'ms' },
    { label: '2. no-change checkpoint (s)', op: 'noChange', field: 'ms', fullAgain: true },
  ];
  if (spec.changed10) rows.push({ label: '3. 10 files changed (s)', op: 'changed10', field: 'ms', fullAgain: true });
  if (spec.restore) rows.push({ label: '4. cold restore (s)', op: 'restore', field: 'ms' });
  rows.push(
    { label: `5. store after 1+2${spec.changed10 ? '+3' : ''} (MB on disk)`, op: 'store', field: 'diskBytes' },
    { label: '6. peak RSS, full checkpoint (MB)', op: 'full', field: 'peakRssKiB' },
  );
  if (!spec.restore) return rows;
  rows.push(
    { label: '   cold restore: fetched', op: 'restore', field: 'bytesFetched' },
    { label: '7. warm restore, unchanged (s)', op: 'warmRestore', field: 'ms', vsCold: true },
    { label: '   warm restore, unchanged: fetched', op: 'warmRestore', field: 'bytesFetched' },
  );
  if (result.renameDir !== undefined) {
    const files = result.renameDir.files.toLocaleString('en-US');
    rows.push(
      { label: `8. rename ${files}-file dir: checkpoint (s)`, op: 'renameCheckpoint', field: 'ms' },
      { label: '   then warm restore (s)', op: 'renameRestore', field: 'ms', vsCold: true },
      { label: '   then warm restore: fetched', op: 'renameRestore', field: 'bytesFetched' },
    );
  }
  if (result.manifest.bigFile !== undefined) {
    rows.push(
      { label: '9. 4 KiB edit in big file: checkpoint (s)', op: 'editCheckpoint', field: 'ms' },
      { label: '   then warm restore (s)', op: 'editRestore', field: 'ms', vsCold: true },
      { label: '   then warm restore: fetched', op: 'editRestore', field: 'bytesFetched' },
    );
  }
  return rows;
}

/** Formats a median for its field: seconds, MB (10^6 bytes), fetched bytes with a unit, or a count. */
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
    case 'bytesFetched':
      return formatBytes(value);
    default:
      return String(value);
  }
}

/** `0 B`, `4.0 KiB`, `12.3 MB`: fetched amounts span bytes to gigabytes. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1e6) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** `a / b` as `1.23x`, or a dash when either is missing. */
export function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined || b === 0 ? '—' : `${(a / b).toFixed(2)}x`;
}

/** Prints the table of one workload: rows = operations, columns = tools, then Holdfast's ratios. */
export function printWorkloadTable(title: string, result: WorkloadResult, tools: readonly SnapshotTool[]): void {
  const header = ['operation', ...tools.map((t) => t.label), 'hf/restic', 'hf/git', 'hf warm/cold'];
  const coldMs = medianOf(result, 'restore', 'holdfast', 'ms');
  const rows = rowsOf(result).map((spec) => {
    const cells = tools.map((tool) => {
      const value = medianOf(result, spec.op, tool.id, spec.field);
      const text = value === undefined && spec.field === 'bytesFetched' ? '' : formatValue(spec.field, value);
      return spec.fullAgain === true && !tool.incremental && value !== undefined ? `${text} (full again)` : text;
    });
    const hf = medianOf(result, spec.op, 'holdfast', spec.field);
    if (spec.vsCold === true || spec.field === 'bytesFetched') {
      return [spec.label, ...cells, '', '', spec.vsCold === true ? ratio(hf, coldMs) : ''];
    }
    return [
      spec.label,
      ...cells,
      ratio(hf, medianOf(result, spec.op, 'restic', spec.field)),
      ratio(hf, medianOf(result, spec.op, 'git', spec.field)),
      '',
    ];
  });
  if (WORKLOADS[result.manifest.name].s3 && tools.some((t) => t.id === 'holdfast-s3')) {
    for (const [label, op] of [
      ['S3 blob writes, no-change (reported / seen)', 'noChange'],
      ['S3 blob writes, 10 changed (reported / seen)', 'changed10'],
    ] as const) {
      const reported = formatValue('blobWrites', medianOf(result, op, 'holdfast-s3', 'blobWrites'));
      const seen = formatValue('s3WriteRequests', medianOf(result, op, 'holdfast-s3', 's3WriteRequests'));
      rows.push([label, ...tools.map((t) => (t.id === 'holdfast-s3' ? `${reported} / ${seen}` : '')), '', '', '']);
    }
  }
  printTable(title, header, rows);
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
        // Reported for the full checkpoint only: later ones of the run leave out the same paths.
        if (op === 'full' && run.excluded !== undefined && run.excluded.length > 0) {
          out.push(
            `${name} full ${tool} run ${run.run + 1}: excluded ${run.excluded.length} paths (${run.excluded.slice(0, 5).join(', ')}); ` +
              'the other tools store them, restore checks leave them out',
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
