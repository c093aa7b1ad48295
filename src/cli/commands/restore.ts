import type { Command } from 'commander';
import { InputError } from '../../errors.js';
import type { RestoreProgress, RestoreReceipt } from '../../index.js';
import { plural } from '../output.js';
import { withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

/** Reasons that change what is kept rather than leave it out. */
const KEPT_CHANGED: ReadonlySet<string> = new Set(['mode-stripped', 'symlink-made-relative']);

/**
 * The receipt's account of what the checkpoint did not keep as it was: what it left out (which
 * a restore cannot bring back: setup must rebuild caches and dependencies, secrets come from
 * elsewhere) and what it kept changed. Counts by reason, largest first.
 */
export function exclusionLines(receipt: Pick<RestoreReceipt, 'excluded'>): string[] {
  const counts = Object.entries(receipt.excluded?.byReason ?? {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const list = (entries: Array<[string, number]>): string => entries.map(([reason, n]) => `${n} ${reason}`).join(', ');
  const out = counts.filter(([reason]) => !KEPT_CHANGED.has(reason));
  const changed = counts.filter(([reason]) => KEPT_CHANGED.has(reason));
  const lines: string[] = [];
  if (out.length > 0) lines.push(`  left out: ${list(out)}; setup must rebuild them`);
  if (changed.length > 0) lines.push(`  kept changed: ${list(changed)}`);
  const counted = counts.reduce((n, [, c]) => n + c, 0);
  const total = receipt.excluded?.total ?? 0;
  if (total > counted) lines.push(`  and ${total - counted} more left out (not listed by reason in this older checkpoint)`);
  return lines;
}

/** `holdfast restore <dir> [--workspace <name>] [--checkpoint <id>] [--replace]` (at least one of the two). */
export function registerRestore(program: Command): void {
  program
    .command('restore')
    .description('restore a checkpoint (default: the workspace head) into a directory or a sandbox, verified and published atomically')
    .argument('[dir]', 'target directory (must be absent or empty unless --replace), or use --sandbox')
    .option('-s, --sandbox <id>', 'restore into the workspace of this sandbox (id, unique prefix or latest)')
    .option('-p, --provider <name>', 'provider of the sandbox (default: look in each)')
    .option('-w, --workspace <name>', 'workspace name (optional with --checkpoint: the checkpoint knows its workspace)')
    .option(
      '-c, --checkpoint <id>',
      "checkpoint to restore: id, unique prefix (8+ characters) or latest (with --workspace its head, the default; without, the tenant's newest ready checkpoint)",
    )
    .option('--replace', 'replace a non-empty target; unchanged files are reused')
    .action(
      async (
        dir: string | undefined,
        flags: { workspace?: string; checkpoint?: string; replace?: boolean; sandbox?: string; provider?: string },
        command: Command,
      ) => {
        if ((dir === undefined) === (flags.sandbox === undefined)) {
          throw new InputError('INVALID_INPUT', 'restore takes a directory or --sandbox <id> (exactly one)', {
            data: { flag: '--sandbox' },
          });
        }
        if (flags.workspace === undefined && flags.checkpoint === undefined) {
          throw new InputError('INVALID_INPUT', 'restore needs --checkpoint <id>, --workspace <name>, or both', {
            data: { flag: '--checkpoint' },
          });
        }
        await withHoldfast(command, async (hf, { output }) => {
          const progress = startProgress(output, 'restore');
          let receipt: RestoreReceipt;
          try {
            const input = {
              workspace: flags.workspace,
              replace: flags.replace === true,
              ...(flags.checkpoint === undefined ? {} : { checkpoint: flags.checkpoint }),
              onProgress: (p: RestoreProgress) =>
                progress.report({
                  step: 'writing files',
                  items: { done: p.files, total: p.filesTotal, noun: 'file' },
                  bytes: { done: p.bytes, total: p.bytesTotal, verb: 'written' },
                }),
            };
            receipt =
              flags.sandbox === undefined
                ? await hf.snapshots.restore({ ...input, dir: dir as string })
                : await hf.sandboxes.restore({
                    ...input,
                    sandbox: flags.sandbox,
                    ...(flags.provider === undefined ? {} : { provider: flags.provider }),
                  });
          } finally {
            progress.stop();
          }
          output.result(receipt, () =>
            [
              `restored checkpoint ${receipt.checkpointId} into ${receipt.target}`,
              `  ${plural(receipt.files, 'file')} (${formatBytes(receipt.bytes)}), ${plural(receipt.dirs, 'dir')}, ${plural(receipt.symlinks, 'symlink')}`,
              `  fetched ${formatBytes(receipt.bytesFetched)}; reused ${plural(receipt.filesReused, 'unchanged file')}; copied ${formatBytes(receipt.bytesCopiedLocally)} from the old copy; ${plural(receipt.hardlinks, 'hard link')}`,
              '  verified as written: every object; every file (bytes, mode, mtime), directory, symlink and hard link',
              ...(receipt.mtimePrecisionMs === 1
                ? []
                : [
                    `  mtimes kept to whole seconds (the sandbox's touch sets no finer): ${plural(receipt.mtimesRounded, 'entry', 'entries')} rounded`,
                  ]),
              ...exclusionLines(receipt),
              `  took ${(receipt.durationMs / 1000).toFixed(2)} s`,
            ].join('\n'),
          );
        });
      },
    );
}
