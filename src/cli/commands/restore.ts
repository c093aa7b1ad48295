import type { Command } from 'commander';
import { InputError } from '../../errors.js';
import type { RestoreProgress, RestoreReceipt } from '../../index.js';
import { withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

/** `holdfast restore <dir> --workspace <name> [--checkpoint <id>] [--replace]`. */
export function registerRestore(program: Command): void {
  program
    .command('restore')
    .description('restore a checkpoint (default: the workspace head) into a directory or a sandbox, verified and published atomically')
    .argument('[dir]', 'target directory (must be absent or empty unless --replace), or use --sandbox')
    .option('-s, --sandbox <id>', 'restore into the workspace of this sandbox')
    .option('-p, --provider <name>', 'provider of the sandbox (default: look in each)')
    .requiredOption('-w, --workspace <name>', 'workspace name')
    .option('-c, --checkpoint <id>', 'checkpoint to restore (default: the head)')
    .option('--replace', 'replace a non-empty target; unchanged files are reused')
    .action(
      async (
        dir: string | undefined,
        flags: { workspace: string; checkpoint?: string; replace?: boolean; sandbox?: string; provider?: string },
        command: Command,
      ) => {
        if ((dir === undefined) === (flags.sandbox === undefined)) {
          throw new InputError('INVALID_INPUT', 'restore takes a directory or --sandbox <id> (exactly one)', {
            data: { flag: '--sandbox' },
          });
        }
        await withHoldfast(command, async (hf, { output }) => {
          const progress = await startProgress(output, 'restore');
          let receipt: RestoreReceipt;
          try {
            const input = {
              workspace: flags.workspace,
              replace: flags.replace === true,
              ...(flags.checkpoint === undefined ? {} : { checkpoint: flags.checkpoint }),
              onProgress: (p: RestoreProgress) => progress.update(p.bytes, p.bytesTotal),
            };
            receipt =
              flags.sandbox === undefined
                ? await hf.snapshots.restore({ ...input, dir: dir as string })
                : await (await import('../../sandbox/transport/sandbox-snapshots.js')).restoreSandbox(hf.snapshots, {
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
              `  files ${receipt.files} (${formatBytes(receipt.bytes)}), dirs ${receipt.dirs}, symlinks ${receipt.symlinks}`,
              `  fetched ${formatBytes(receipt.bytesFetched)}; reused ${receipt.filesReused} unchanged files; copied ${formatBytes(receipt.bytesCopiedLocally)} from the old copy; every object and file verified`,
              `  took ${(receipt.durationMs / 1000).toFixed(2)} s`,
            ].join('\n'),
          );
        });
      },
    );
}
