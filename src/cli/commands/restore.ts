import type { Command } from 'commander';
import type { RestoreReceipt } from '../../index.js';
import { withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

/** `holdfast restore <dir> --workspace <name> [--checkpoint <id>] [--replace]`. */
export function registerRestore(program: Command): void {
  program
    .command('restore')
    .description('restore a checkpoint (default: the workspace head) into a directory, verified and published atomically')
    .argument('<dir>', 'target directory (must be absent or empty unless --replace)')
    .requiredOption('-w, --workspace <name>', 'workspace name')
    .option('-c, --checkpoint <id>', 'checkpoint to restore (default: the head)')
    .option('--replace', 'replace a non-empty target; unchanged files are reused')
    .action(async (dir: string, flags: { workspace: string; checkpoint?: string; replace?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const progress = await startProgress(output, 'restore');
        let receipt: RestoreReceipt;
        try {
          receipt = await hf.snapshots.restore({
            dir,
            workspace: flags.workspace,
            replace: flags.replace === true,
            ...(flags.checkpoint === undefined ? {} : { checkpoint: flags.checkpoint }),
            onProgress: (p) => progress.update(p.bytes, p.bytesTotal),
          });
        } finally {
          progress.stop();
        }
        output.result(receipt, () =>
          [
            `restored checkpoint ${receipt.checkpointId} into ${receipt.target}`,
            `  files ${receipt.files} (${formatBytes(receipt.bytes)}), dirs ${receipt.dirs}, symlinks ${receipt.symlinks}`,
            `  fetched ${formatBytes(receipt.bytesFetched)}; reused ${receipt.filesReused} unchanged files; every object and file verified`,
            `  took ${(receipt.durationMs / 1000).toFixed(2)} s`,
          ].join('\n'),
        );
      });
    });
}
