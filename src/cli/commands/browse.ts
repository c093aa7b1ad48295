import type { Command } from 'commander';
import type { TreeEntry } from '../../core/tree.js';
import type { Holdfast } from '../../index.js';
import { positiveInt, readHoldfast } from '../program.js';
import { formatBytes } from '../progress.js';
import { noteText } from './checkpoint-note-flags.js';

/** How a checkpoint argument is given. */
const CHECKPOINT_ID_HELP =
  "checkpoint id, a unique prefix of it (8+ characters), or latest (this tenant's newest ready checkpoint; with -w, that workspace's head)";
/** `-w`: where `latest` and prefixes are looked up, as restic's `ls latest --host` narrows its snapshots. */
const WORKSPACE_FLAG = ['-w, --workspace <name>', 'look the checkpoint up in this workspace only (latest: its head)'] as const;

/** The id of checkpoint `ref`: in `workspace` when one is named (its head for `latest`), else as the library resolves it. */
async function checkpointIn(hf: Holdfast, ref: string, workspace: string | undefined): Promise<string> {
  if (workspace === undefined) return ref;
  return (await hf.snapshots.restorePoint(workspace, ref)).checkpoint.id;
}

function describeEntry(e: TreeEntry): string {
  if (e.type === 'dir') return `d ${e.mode.toString(8).padStart(4, '0')}            ${e.name}/`;
  if (e.type === 'symlink') return `l                  ${e.name} -> ${e.target}`;
  return `- ${e.mode.toString(8).padStart(4, '0')} ${formatBytes(e.size).padStart(10)}  ${e.name}`;
}

/** `log`, `workspaces`, `ls`, `cat` and `diff`: reading what is stored. */
export function registerBrowse(program: Command): void {
  program
    .command('log')
    .description("list a workspace's checkpoints, newest first (failed ones with their errors)")
    .requiredOption('-w, --workspace <name>', 'workspace name')
    .option('-n, --limit <n>', 'show at most N', positiveInt('--limit'))
    .action(async (flags: { workspace: string; limit?: number }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const list = await hf.snapshots.log(flags.workspace, flags.limit);
        output.result(list, () =>
          list.length === 0
            ? `workspace ${flags.workspace} has no checkpoints`
            : list
                .map((c) => {
                  const when = new Date(c.createdAt).toISOString();
                  const error =
                    c.error === null
                      ? ''
                      : `  ${String((c.error as { code?: unknown }).code)}: ${String((c.error as { message?: unknown }).message)}`;
                  const note = noteText(c);
                  return `${c.id}  ${when}  ${c.status.padEnd(7)}  ${c.reason}${note === '' ? '' : `  ${note}`}${error}`;
                })
                .join('\n'),
        );
      });
    });

  program
    .command('workspaces')
    .description('list workspaces and their head checkpoints')
    .action(async (_flags: unknown, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const list = await hf.snapshots.workspaces();
        output.result(list, () =>
          list.length === 0
            ? 'no workspaces yet'
            : list
                .map(
                  (w) =>
                    `${w.name}  head ${w.head?.id ?? '(none)'}${w.head === undefined ? '' : `  ${new Date(w.head.createdAt).toISOString()}`}`,
                )
                .join('\n'),
        );
      });
    });

  program
    .command('ls')
    .description('list a directory (default: the root) inside a checkpoint')
    .argument('<checkpoint>', CHECKPOINT_ID_HELP)
    .argument('[path]', 'path inside the checkpoint', '')
    .option(...WORKSPACE_FLAG)
    .action(async (checkpoint: string, relPath: string, flags: { workspace?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const found = await hf.snapshots.ls(await checkpointIn(hf, checkpoint, flags.workspace), relPath);
        const entries = found.kind === 'dir' ? found.entries : [found.entry];
        output.result(found.kind === 'dir' ? { path: relPath, entries } : { path: relPath, entry: found.entry }, () =>
          entries.map(describeEntry).join('\n'),
        );
      });
    });

  program
    .command('cat')
    .description("write a file's bytes from a checkpoint to stdout (verified)")
    .argument('<checkpoint>', CHECKPOINT_ID_HELP)
    .argument('<path>', 'file path inside the checkpoint')
    .option(...WORKSPACE_FLAG)
    .action(async (ref: string, relPath: string, flags: { workspace?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const checkpoint = await checkpointIn(hf, ref, flags.workspace);
        if (output.json) {
          const parts: Buffer[] = [];
          for await (const piece of hf.snapshots.cat(checkpoint, relPath)) parts.push(Buffer.from(piece));
          const bytes = Buffer.concat(parts);
          output.result({ path: relPath, size: bytes.length, contentBase64: bytes.toString('base64') }, () => '');
          return;
        }
        for await (const piece of hf.snapshots.cat(checkpoint, relPath)) {
          if (!process.stdout.write(piece)) await new Promise((resolve) => process.stdout.once('drain', resolve));
        }
      });
    });

  program
    .command('diff')
    .description('show what changed between two checkpoints')
    .argument('<a>', `older checkpoint: ${CHECKPOINT_ID_HELP}`)
    .argument('<b>', `newer checkpoint: ${CHECKPOINT_ID_HELP}`)
    .option(...WORKSPACE_FLAG)
    .action(async (a: string, b: string, flags: { workspace?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const [from, to] = [await checkpointIn(hf, a, flags.workspace), await checkpointIn(hf, b, flags.workspace)];
        const changes = await hf.snapshots.diff(from, to);
        const mark = { added: '+', removed: '-', modified: 'M', 'type-changed': 'T', 'mode-changed': 'm' } as const;
        output.result(changes, () =>
          changes.length === 0
            ? 'no differences'
            : changes.map((c) => `${mark[c.change]} ${c.path}${c.type === 'dir' ? '/' : ''}`).join('\n'),
        );
      });
    });
}
