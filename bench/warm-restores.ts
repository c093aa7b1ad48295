/**
 * Holdfast's warm restores in the snapshot benchmark: `restore --replace` onto the tree its cold
 * restore left, after (1) nothing changed, (2) a 1,000-file directory was renamed and checkpointed,
 * (3) 4 KiB inside the big file were overwritten and checkpointed. Each records time, peak RSS
 * and the receipt's `bytesFetched`: a restore that reuses what the target already holds fetches
 * nothing for (1) and (2) and about one chunk for (3).
 *
 * Only Holdfast has a warm restore, so these run after every tool's cold restore of the run, and
 * the workspace is put back (the directory renamed back) so the next run sees the same tree.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { compareTrees } from './dir-stats.js';
import { editBigFile } from './mixed-workload.js';
import { flushDirtyPages } from './process-runner.js';
import { checkpointRecord, log, noteLeftOut, type OpenRepo, type RunContext, restoreRecord, uncheckedPaths } from './run-context.js';
import { formatValue } from './snapshot-report.js';
import { addSample, type OpId } from './snapshot-results.js';

/** Suffix the rename measurement gives the moved directory. */
const RENAMED_SUFFIX = '-renamed';

/** Runs the warm restores of one run (see the file header); does nothing without a Holdfast repository. */
export async function warmRestores(ctx: RunContext): Promise<void> {
  const hf = ctx.repos.find((r) => r.tool.id === 'holdfast' && r.repo.warmRestore !== undefined);
  if (hf === undefined) return;
  const target = path.join(hf.dir, 'restored');
  await warmRestore(ctx, hf, 'warmRestore', target, []);
  const { renameDir, manifest } = ctx;
  if (renameDir !== undefined) {
    const from = path.join(manifest.root, renameDir.path);
    const to = `${from}${RENAMED_SUFFIX}`;
    await fs.rename(from, to);
    try {
      await checkpointOne(ctx, hf, 'renameCheckpoint');
      await warmRestore(ctx, hf, 'renameRestore', target, []);
    } finally {
      await fs.rename(to, from);
    }
  }
  if (manifest.bigFile !== undefined) {
    await editBigFile(manifest, ctx.run);
    await checkpointOne(ctx, hf, 'editCheckpoint');
    await warmRestore(ctx, hf, 'editRestore', target, [manifest.bigFile]);
  }
}

async function checkpointOne(ctx: RunContext, { tool, repo }: OpenRepo, op: OpId): Promise<void> {
  await flushDirtyPages();
  const m = await repo.checkpoint(ctx.manifest.root);
  noteLeftOut(ctx, tool, m);
  addSample(ctx.result, op, tool.id, checkpointRecord(ctx.run, m));
  log(`${ctx.tag} ${op}: ${tool.label} ${formatValue('ms', m.ms)} s`);
}

async function warmRestore(ctx: RunContext, { tool, repo }: OpenRepo, op: OpId, target: string, sample: readonly string[]): Promise<void> {
  if (repo.warmRestore === undefined) return;
  await flushDirtyPages();
  const m = await repo.warmRestore(target);
  const verifyError = await compareTrees(ctx.manifest.root, target, sample, uncheckedPaths(ctx, tool));
  addSample(ctx.result, op, tool.id, restoreRecord(ctx.run, m, verifyError));
  log(
    `${ctx.tag} ${op}: ${tool.label} ${formatValue('ms', m.ms)} s, fetched ${formatValue('bytesFetched', m.bytesFetched)}` +
      `${verifyError === undefined ? '' : `: CHECK FAILED, ${verifyError}`}`,
  );
}
