import type { Command } from 'commander';
import { InputError } from '../../errors.js';
import type { CheckpointProgress, CheckpointResult } from '../../index.js';
import { CHECKPOINT_REASONS } from '../../metadata/schema.js';
import { withInterrupt } from '../interrupt.js';
import { plural } from '../output.js';
import { collect, oneOf, positiveInt, withHoldfast } from '../program.js';
import { formatBytes, type ProgressState, startProgress } from '../progress.js';
import { metaFlags, noteText } from './checkpoint-note-flags.js';

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
  label?: string;
  meta?: string[];
}

/**
 * What a checkpoint is doing, in its true figures. While reading, the engine counts every file
 * it walks, unchanged ones (known by their stat cache, not read) included: hence "examined".
 * Its later events carry the scan's totals, not upload progress, so they are shown as steps only.
 */
export function checkpointState(p: CheckpointProgress): ProgressState {
  switch (p.phase) {
    case 'scan':
      return { step: 'scanning the workspace' };
    case 'read':
      return {
        step: 'reading changed files',
        items: { done: p.files, total: p.filesTotal, noun: 'file' },
        bytes: { done: p.bytes, total: p.bytesTotal, verb: 'examined' },
      };
    case 'upload':
      return { step: 'writing trees and finishing pack uploads' };
    default:
      return { step: 'committing' };
  }
}

/** `holdfast checkpoint <dir> --workspace <name>`. */
export function registerCheckpoint(program: Command): void {
  program
    .command('checkpoint')
    .description('capture a directory, or a sandbox\u2019s workspace, as a new checkpoint of a workspace')
    .argument('[dir]', 'directory to capture (or use --sandbox)')
    .option(
      '-s, --sandbox <id>',
      'capture the workspace of this sandbox (id, unique prefix or latest; through its agent unless the provider exposes a host path)',
    )
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
    .option('--label <text>', 'a label for the checkpoint (1-200 characters, shown by log)')
    .option('--meta <key=value>', 'metadata to keep with the checkpoint (repeatable; at most 4 KiB in all, never a credential)', collect)
    .action(async (dir: string | undefined, flags: CheckpointFlags, command: Command) => {
      if ((dir === undefined) === (flags.sandbox === undefined)) {
        throw new InputError('INVALID_INPUT', 'checkpoint takes a directory or --sandbox <id> (exactly one)', {
          data: { flag: '--sandbox' },
        });
      }
      await withHoldfast(command, async (hf, { output }) => {
        const progress = startProgress(output, 'checkpoint');
        let result: CheckpointResult;
        try {
          const input = {
            workspace: flags.workspace,
            ...(flags.reason === undefined ? {} : { reason: flags.reason }),
            ...(flags.label === undefined ? {} : { label: flags.label }),
            ...(flags.meta === undefined ? {} : { meta: metaFlags(flags.meta) }),
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
            onProgress: (p: CheckpointProgress) => progress.report(checkpointState(p)),
          };
          // Ctrl-C or SIGTERM: the checkpoint is marked failed (INTERRUPTED) before the process exits 130 / 143.
          result = await withInterrupt(`checkpoint of ${flags.workspace}`, (signal) =>
            flags.sandbox === undefined
              ? hf.snapshots.checkpoint({ ...input, signal, dir: dir as string })
              : hf.sandboxes.checkpoint({
                  ...input,
                  signal,
                  sandbox: flags.sandbox,
                  ...(flags.provider === undefined ? {} : { provider: flags.provider }),
                }),
          );
        } finally {
          progress.stop();
        }
        const { checkpoint, stats, excluded, allowed } = result;
        const { label, meta } = checkpoint;
        const note = noteText(checkpoint);
        output.result(
          { id: checkpoint.id, workspace: flags.workspace, rootTree: checkpoint.rootTree, label, meta, stats, excluded, allowed },
          () =>
            [
              `checkpoint ${checkpoint.id} of ${flags.workspace} is ready`,
              ...(note === '' ? [] : [`  ${note}`]),
              `  ${plural(stats.files, 'file')} (${formatBytes(stats.bytes)}), ${plural(stats.dirs, 'dir')}, ${plural(stats.symlinks, 'symlink')}; read ${plural(stats.filesHashed, 'file')} (${formatBytes(stats.bytesHashed)}), the rest unchanged`,
              `  new: ${plural(stats.objectsWritten, 'object')}, ${formatBytes(stats.rawBytesWritten)} (${formatBytes(stats.storedBytesWritten)} stored) in ${plural(stats.packsWritten, 'pack')}, ${plural(stats.blobWrites, 'blob write')}`,
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
