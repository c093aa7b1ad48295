import type { Command } from 'commander';
import type { CheckpointResult } from '../../index.js';
import { collect, positiveInt, withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

interface CheckpointFlags {
  workspace: string;
  reason?: 'manual' | 'turn' | 'periodic' | 'final' | 'upgrade' | 'shutdown';
  exclude?: string[];
  include?: string[];
  cacheExcludes: boolean;
  gitignore?: boolean;
  allowSecretPath?: string[];
  maxEntries?: number;
  maxFileBytes?: number;
}

/** `holdfast checkpoint <dir> --workspace <name>`. */
export function registerCheckpoint(program: Command): void {
  program
    .command('checkpoint')
    .description('capture a directory as a new checkpoint of a workspace')
    .argument('<dir>', 'directory to capture')
    .requiredOption('-w, --workspace <name>', 'workspace name (created on first checkpoint)')
    .option('--reason <reason>', 'manual | turn | periodic | final | upgrade | shutdown', 'manual')
    .option('--exclude <pattern>', 'also leave out paths matching this gitignore-style pattern (repeatable)', collect)
    .option('--include <pattern>', 're-include paths a cache or ignore rule leaves out; never secrets (repeatable)', collect)
    .option('--no-cache-excludes', 'keep dependency and cache trees (node_modules/, .cache/, …)')
    .option('--gitignore', 'honour .gitignore files')
    .option('--allow-secret-path <path>', 'capture this exact path although a secret rule matches it (repeatable)', collect)
    .option('--max-entries <n>', 'most files and symlinks to accept', positiveInt('--max-entries'))
    .option('--max-file-bytes <n>', 'largest file to capture', positiveInt('--max-file-bytes'))
    .action(async (dir: string, flags: CheckpointFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const progress = await startProgress(output, 'checkpoint');
        let result: CheckpointResult;
        try {
          result = await hf.snapshots.checkpoint({
            dir,
            workspace: flags.workspace,
            ...(flags.reason === undefined ? {} : { reason: flags.reason }),
            excludes: {
              cacheExcludes: flags.cacheExcludes,
              gitignore: flags.gitignore === true,
              ...(flags.exclude === undefined ? {} : { exclude: flags.exclude }),
              ...(flags.include === undefined ? {} : { include: flags.include }),
              ...(flags.allowSecretPath === undefined ? {} : { allowSecretPaths: flags.allowSecretPath }),
            },
            limits: {
              ...(flags.maxEntries === undefined ? {} : { maxEntries: flags.maxEntries }),
              ...(flags.maxFileBytes === undefined ? {} : { maxFileBytes: flags.maxFileBytes }),
            },
            onProgress: (p) => progress.update(p.bytes, p.bytesTotal, p.phase),
          });
        } finally {
          progress.stop();
        }
        const { checkpoint, stats, excluded, allowed } = result;
        output.result({ id: checkpoint.id, workspace: flags.workspace, rootTree: checkpoint.rootTree, stats, excluded, allowed }, () =>
          [
            `checkpoint ${checkpoint.id} of ${flags.workspace} is ready`,
            `  files ${stats.files} (${formatBytes(stats.bytes)}), dirs ${stats.dirs}, symlinks ${stats.symlinks}; read ${stats.filesHashed} files (${formatBytes(stats.bytesHashed)})`,
            `  new: ${stats.objectsWritten} objects, ${formatBytes(stats.rawBytesWritten)} (${formatBytes(stats.storedBytesWritten)} stored) in ${stats.packsWritten} packs, ${stats.blobWrites} blob writes`,
            ...allowed.map((a) => `  allowed by --allow-secret-path: ${a.path} (${a.rule})`),
            `  excluded: ${excluded.length}`,
            ...excluded.slice(0, 50).map((e) => `    ${e.path}  ${e.reason} (${e.rule})`),
            ...(excluded.length > 50 ? [`    … and ${excluded.length - 50} more (--json lists all)`] : []),
            `  took ${(stats.durationMs / 1000).toFixed(2)} s`,
          ].join('\n'),
        );
      });
    });
}
