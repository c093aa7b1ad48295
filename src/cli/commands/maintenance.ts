import { Argument, type Command, InvalidArgumentError } from 'commander';
import { IntegrityError } from '../../errors.js';
import type { RebuildReport } from '../../objects/index-rebuild.js';
import type { GcPackEntry, GcPhase, GcReport } from '../../snapshot/gc/gc.js';
import type { VerifyProgress, VerifyReport } from '../../snapshot/inspect/verify.js';
import { listFirst, plural } from '../output.js';
import { readHoldfast, withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const GC_PHASES: readonly GcPhase[] = ['resume', 'retention', 'mark', 'repack', 'condemn', 'sweep', 'orphans'];
/** Problems printed in text mode; `--json` lists them all. */
const SHOWN_PROBLEMS = 50;
/** Damaged checkpoints printed per missing pack in text mode; `--json` lists them all. */
const SHOWN_DAMAGED_CHECKPOINTS = 20;
/** What verify counts in each of its phases. */
const VERIFY_NOUNS: Readonly<Record<VerifyProgress['phase'], string>> = { trees: 'checkpoint', index: 'object', packs: 'pack' };
/** Items of each GC listing printed in text mode; `--json` lists them all. */
const SHOWN_GC_ITEMS = 20;

/** Parses a duration such as `24h`, `90m`, `0s` or `1.5d` into milliseconds (commander option parser). */
export function parseDuration(value: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value.trim());
  if (match === null) throw new InvalidArgumentError('expected a duration such as 24h, 90m, 30s or 0s');
  return Math.round(Number(match[1]) * (UNIT_MS[match[2] as string] as number));
}

function nonNegativeInt(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
    return n;
  };
}

/** `verify`, `gc` and `index rebuild`: keeping the store healthy and small. */
export function registerMaintenance(program: Command): void {
  program
    .command('verify')
    .description('check that every ready checkpoint can be restored; exit 1 when anything is missing or damaged')
    .option('--read-data', 'also read every reachable pack and check every byte (reads all stored data)')
    .action(async (flags: { readData?: boolean }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const progress = startProgress(output, 'verify');
        let report: VerifyReport;
        try {
          report = await hf.snapshots.verify({
            readData: flags.readData === true,
            onProgress: (p) =>
              progress.report({ step: `checking ${p.phase}`, items: { done: p.done, total: p.total, noun: VERIFY_NOUNS[p.phase] } }),
          });
        } finally {
          progress.stop();
        }
        output.result(report, () => renderVerify(report));
        if (!report.ok) {
          throw new IntegrityError(
            'INTEGRITY',
            `verify found ${plural(report.problems.filter((p) => p.kind !== 'unindexed-pack').length, 'problem')}; see the report above`,
            {
              data: { problemCounts: report.problemCounts },
            },
          );
        }
      });
    });

  program
    .command('gc')
    .description('forget old checkpoints by the retention policy and delete packs nothing needs any more')
    .option('--dry-run', 'report what would be done and change nothing')
    .option('--grace <duration>', 'delete condemned and unindexed packs only after this long (e.g. 24h, 0s)', parseDuration)
    .option('--keep-last <n>', 'keep the newest N checkpoints of each workspace (default 10)', nonNegativeInt('--keep-last'))
    .option(
      '--keep-daily <n>',
      'keep the newest checkpoint of each of the last N days that have one (default 7)',
      nonNegativeInt('--keep-daily'),
    )
    .action(async (flags: { dryRun?: boolean; grace?: number; keepLast?: number; keepDaily?: number }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const { DEFAULT_RETENTION } = await import('../../snapshot/gc/retention.js');
        const progress = startProgress(output, 'gc');
        let report: GcReport;
        try {
          report = await hf.snapshots.gc({
            dryRun: flags.dryRun === true,
            retention: {
              keepLast: flags.keepLast ?? DEFAULT_RETENTION.keepLast,
              keepDaily: flags.keepDaily ?? DEFAULT_RETENTION.keepDaily,
            },
            ...(flags.grace === undefined ? {} : { graceMs: flags.grace }),
            onProgress: (phase) =>
              progress.report({ step: phase, items: { done: GC_PHASES.indexOf(phase), total: GC_PHASES.length, noun: 'step' } }),
          });
        } finally {
          progress.stop();
        }
        output.result(report, () => renderGc(report));
      });
    });

  // One command with an action argument rather than a nested subcommand, so usage errors keep exit code 2.
  program
    .command('index')
    .description('maintain the object index; `index rebuild` re-registers every pack in the blob store from its trailer')
    .addArgument(new Argument('<action>', 'rebuild (after losing or restoring the metadata database)').choices(['rebuild']))
    .option('--verify-packs', 'read each pack whole and check every object before registering it')
    .action(async (_action: 'rebuild', flags: { verifyPacks?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const progress = startProgress(output, 'index rebuild');
        let report: RebuildReport;
        try {
          report = await hf.snapshots.rebuildIndex({
            verifyPacks: flags.verifyPacks === true,
            onProgress: (done, total) => progress.report({ step: 'registering packs', items: { done, total, noun: 'pack' } }),
          });
        } finally {
          progress.stop();
        }
        output.result(report, () =>
          [
            `scanned ${plural(report.packsScanned, 'pack')}: ${report.packsRegistered} newly registered, ${plural(report.objectsRegistered, 'object')} offered to the index`,
            `  skipped ${plural(report.packsSkippedCondemned, 'condemned pack')}; ${report.damaged.length} damaged`,
            ...report.damaged.slice(0, SHOWN_PROBLEMS).map((d) => `    ${d.packId}  ${d.detail}`),
          ].join('\n'),
        );
        if (report.damaged.length > 0) {
          throw new IntegrityError(
            'INTEGRITY',
            `${plural(report.damaged.length, 'pack')} could not be read; their objects were not registered`,
            {
              data: { damaged: report.damaged.length },
            },
          );
        }
      });
    });
}

function renderVerify(r: VerifyReport): string {
  const lines = [
    `${r.ok ? 'ok' : 'PROBLEMS FOUND'}: ${plural(r.checkpoints, 'checkpoint')}, ${plural(r.trees, 'tree')}, ${plural(r.objects, 'object')}, ${plural(r.packs, 'pack')}; read ${formatBytes(r.bytesRead)}`,
    ...Object.entries(r.problemCounts)
      .filter(([, n]) => n > 0)
      .map(([kind, n]) => `  ${kind}: ${n}`),
    ...r.problems.slice(0, SHOWN_PROBLEMS).map((p) => `    ${p.kind}  ${p.id}  ${p.detail}`),
  ];
  if (r.problems.length > SHOWN_PROBLEMS) lines.push(`    … and ${r.problems.length - SHOWN_PROBLEMS} more (--json lists them)`);
  for (const d of r.damage) {
    lines.push(`  missing pack ${d.pack}: ${plural(d.objects, 'object')} lost, ${plural(d.checkpoints.length, 'damaged checkpoint')}`);
    for (const c of d.checkpoints.slice(0, SHOWN_DAMAGED_CHECKPOINTS)) {
      const more = c.pathCount > c.paths.length ? ` … and ${c.pathCount - c.paths.length} more` : '';
      lines.push(`    checkpoint ${c.checkpointId}: ${c.paths.map((p) => (p === '' ? '(root)' : p)).join(', ')}${more}`);
    }
    if (d.checkpoints.length > SHOWN_DAMAGED_CHECKPOINTS)
      lines.push(`    … and ${d.checkpoints.length - SHOWN_DAMAGED_CHECKPOINTS} more (--json lists them)`);
  }
  if (r.damage.length > 0)
    lines.push('  a later checkpoint of a workspace that still has those files writes them again; what none has stays lost');
  return lines.join('\n');
}

function renderGc(r: GcReport): string {
  const would = r.dryRun ? 'would ' : '';
  const { listing } = r;
  const pack = (p: GcPackEntry): string =>
    `${p.id}  ${formatBytes(p.size).padStart(10)}  ${p.objects === null ? 'unindexed' : `${plural(p.objects, 'object')}, ${p.liveObjects ?? 0} live`}  (${p.reason})`;
  const deletedBytes = listing.packsDeleted.reduce((n, p) => n + p.size, 0);
  return [
    ...(r.dryRun ? ['dry run: nothing was changed; a run with the same options now would do this'] : []),
    `${r.dryRun ? 'would forget' : 'forgot'} ${plural(r.forgotten, 'checkpoint')}; ${plural(r.liveObjects, 'live object')}`,
    ...listFirst(listing.checkpointsForgotten, SHOWN_GC_ITEMS, '    ', (id) => id),
    ...(r.checkpointsInterrupted === 0
      ? []
      : [`  marked ${plural(r.checkpointsInterrupted, 'checkpoint')} failed: their writer was gone (INTERRUPTED)`]),
    `  ${would}condemn ${plural(listing.packsCondemned.length, 'empty pack')}, ${would}repack ${plural(listing.packsRepacked.length, 'sparse pack')}, ${would}compact ${plural(listing.packsCompacted.length, 'small pack')}${r.dryRun ? '' : `, revived ${plural(r.packsRevived, 'pack')}`}`,
    ...listFirst(listing.packsRepacked, SHOWN_GC_ITEMS, '    ', pack),
    ...listFirst(listing.packsCompacted, SHOWN_GC_ITEMS, '    ', pack),
    `  ${r.dryRun ? 'would delete' : 'deleted'} ${plural(listing.packsDeleted.length, 'pack')} (${formatBytes(deletedBytes)})`,
    ...listFirst(listing.packsDeleted, SHOWN_GC_ITEMS, '    ', pack),
    `  ${plural(r.orphanPacksQueued, 'unindexed pack')} waiting out the grace period`,
    ...listFirst(listing.orphanPacksQueued, SHOWN_GC_ITEMS, '    ', pack),
    ...(r.dryRun ? [] : [`  staging of killed restores: ${r.stagingRemoved} removed`]),
    `  stat caches no checkpoint here needs: ${r.statCachesRemoved} ${r.dryRun ? 'to remove' : 'removed'}`,
    ...listFirst(listing.statCachesRemoved, SHOWN_GC_ITEMS, '    ', (file) => file),
    `  ${r.dryRun ? 'would free' : 'freed'} ${formatBytes(r.bytesFreed)}`,
  ].join('\n');
}
