import type { Command } from 'commander';
import { InputError } from '../../errors.js';
import type { CheckpointProgress, CheckpointResult } from '../../index.js';
import { CHECKPOINT_REASONS } from '../../metadata/schema.js';
import { collect, oneOf, positiveInt, withHoldfast } from '../program.js';
import { formatBytes, startProgress } from '../progress.js';

interface CheckpointFlags {
  workspace: string;
  sandbox?: string;
  provider?: string;
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
    .description('capture a directory, or a sandbox\u2019s workspace, as a new checkpoint of a workspace')
    .argument('[dir]', 'directory to capture (or use --sandbox)')
    .option('-s, --sandbox <id>', 'capture the workspace of this sandbox (through its agent unless the provider exposes a host path)')
    .option('-p, --provider <name>', 'provider of the sandbox (default: look in each)')
    .requiredOption('-w, --workspace <name>', 'workspace name (created on first checkpoint)')
    .option('--reason <reason>', CHECKPOINT_REASONS.join(' | '), oneOf('--reason', CHECKPOINT_REASONS), 'manual')
    .option('--exclude <pattern>', 'also leave out paths matching this gitignore-style pattern (repeatable)', collect)
    .option('--include <pattern>', 're-include paths a cache or ignore rule leaves out; never secrets (repeatable)', collect)
    .option('--no-cache-excludes', 'keep dependency and cache trees (node_modules/, .cache/, …)')
    .option('--gitignore', 'honour .gitignore files')
    .option('--allow-secret-path <path>', 'capture this exact path although a secret rule matches it (repeatable)', collect)
    .option('--max-entries <n>', 'most files and symlinks to accept', positiveInt('--max-entries'))
    .option('--max-file-bytes <n>', 'largest file to capture', positiveInt('--max-file-bytes'))
    .action(async (dir: string | undefined, flags: CheckpointFlags, command: Command) => {
      if ((dir === undefined) === (flags.sandbox === undefined)) {
        throw new InputError('INVALID_INPUT', 'checkpoint takes a directory or --sandbox <id> (exactly one)', {
          data: { flag: '--sandbox' },
        });
      }
      await withHoldfast(command, async (hf, { output }) => {
        const progress = await startProgress(output, 'checkpoint');
        let result: CheckpointResult;
        try {
          const input = {
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
            onProgress: (p: CheckpointProgress) => progress.update(p.bytes, p.bytesTotal, p.phase),
          };
          result =
            flags.sandbox === undefined
              ? await hf.snapshots.checkpoint({ ...input, dir: dir as string })
              : await hf.sandboxes.checkpoint({
                  ...input,
                  sandbox: flags.sandbox,
                  ...(flags.provider === undefined ? {} : { provider: flags.provider }),
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
