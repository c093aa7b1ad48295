import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { InputError, NotFoundError } from '../../errors.js';
import type { FolderEntry, FolderRef } from '../../folders/folders.js';
import type { Holdfast } from '../../index.js';
import { FOLDER_SCOPES, type FolderScope } from '../../model/folder-scopes.js';
import { isoTime, renderTable } from '../output.js';
import { oneOf, positiveInt, readHoldfast, withHoldfast } from '../program.js';
import { formatBytes } from '../progress.js';

/** Tenant of a command without `--tenant`, as `holdfast token create`. */
const DEFAULT_FOLDER_TENANT = 'default';

/** The flags every `folder` subcommand takes. */
interface CollectionFlags {
  readonly scope: FolderScope;
  readonly owner: string;
  readonly tenant: string;
}

/** Flags of a mutation. */
interface MutationFlags extends CollectionFlags {
  readonly opId?: string;
}

/**
 * The collection the flags name. The operator's CLI goes straight to the store and so sees
 * every collection (as `holdfast run show` sees every run): no folder policy applies here.
 * A tenant that does not exist is `NOT_FOUND`, never created by a folder command.
 */
async function collectionOf(hf: Holdfast, flags: CollectionFlags): Promise<FolderRef> {
  const tenant = await hf.meta.tenants.findByName(flags.tenant);
  if (tenant === undefined) {
    throw new NotFoundError(`tenant ${flags.tenant} not found: holdfast token create --tenant ${flags.tenant} creates it`, {
      data: { tenant: flags.tenant },
    });
  }
  if (flags.scope !== 'user') return { tenantId: tenant.id, scope: flags.scope, ownerId: flags.owner };
  // A user collection is keyed by the user's immutable id: --owner is the name of the live user.
  const user = await hf.meta.users.findActive(tenant.id, flags.owner);
  if (user === undefined) {
    throw new NotFoundError(`no live user ${flags.owner} in tenant ${flags.tenant}: holdfast user ls shows them`, {
      data: { tenant: flags.tenant, user: flags.owner },
    });
  }
  return { tenantId: tenant.id, scope: 'user', ownerId: user.id };
}

/**
 * The operation id of a mutation: `--op-id`, or a new one, told on stderr so a retry after a
 * lost answer (a crash, a dropped connection to the store) can repeat the same operation.
 */
function operationId(flags: MutationFlags, note: (line: string) => void): string {
  if (flags.opId !== undefined) return flags.opId;
  const id = `cli-${randomUUID()}`;
  note(`operation id ${id} (repeat with --op-id ${id} to retry this operation safely)`);
  return id;
}

function describeEntry(e: FolderEntry, withId: boolean): string[] {
  const kind = e.kind === 'directory' ? 'd' : e.executable ? 'x' : '-';
  const size = e.kind === 'directory' ? '' : formatBytes(e.size);
  const when = isoTime(e.deletedAt ?? e.updatedAt);
  const name = e.kind === 'directory' ? `${e.path}/` : e.path;
  return withId ? [kind, size, when, e.id, name] : [kind, size, when, name];
}

/** Adds the collection options to a subcommand. */
function onCollection(command: Command): Command {
  return command
    .requiredOption('--scope <scope>', `collection scope: ${FOLDER_SCOPES.join(', ')}`, oneOf('--scope', FOLDER_SCOPES))
    .requiredOption('--owner <id>', "owner id of the collection (the task, agent or project; for --scope user the live user's name)")
    .option('-t, --tenant <name>', 'tenant of the collection', DEFAULT_FOLDER_TENANT);
}

/** Adds `--op-id` to a mutation. */
function withOpId(command: Command): Command {
  return command.option('--op-id <id>', 'operation id (default: a new one); the same id again is a no-op, with other content CONFLICT');
}

/** `holdfast folder ls | get | put | mkdir | rm | restore | purge | sync | refresh`: work folders, straight on the store. */
export function registerFolder(program: Command): void {
  const folder = program
    .command('folder')
    .exitOverride()
    .description('work folders: list, download, upload, mkdir, delete to the trash, restore and purge (directly on the store)');

  onCollection(folder.command('ls'))
    .description('list the live files of a collection (or its trash), by path')
    .option('--trash', 'list the trash instead (with the row ids restore and purge take)')
    .option('-n, --limit <n>', 'rows per page (default 200, at most 1000)', positiveInt('--limit'))
    .option('--cursor <cursor>', 'continue after a page (its nextCursor)')
    .option('--all', 'follow every page')
    .action(async (flags: CollectionFlags & { trash?: boolean; limit?: number; cursor?: string; all?: boolean }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const files: FolderEntry[] = [];
        let cursor = flags.cursor;
        let page: Awaited<ReturnType<typeof hf.folders.list>>;
        do {
          page = await hf.folders.list(ref, {
            trash: flags.trash === true,
            ...(cursor === undefined ? {} : { cursor }),
            ...(flags.limit === undefined ? {} : { limit: flags.limit }),
          });
          files.push(...page.files);
          cursor = page.nextCursor ?? undefined;
        } while (flags.all === true && cursor !== undefined);
        const result = { files, nextCursor: page.nextCursor, lastOperationAt: page.lastOperationAt };
        const header = flags.trash === true ? ['KIND', 'SIZE', 'DELETED', 'ID', 'PATH'] : ['KIND', 'SIZE', 'UPDATED', 'PATH'];
        output.result(result, () => {
          if (files.length === 0) return flags.trash === true ? 'the trash is empty' : 'no files';
          const table = renderTable(
            header,
            files.map((f) => describeEntry(f, flags.trash === true)),
          );
          return page.nextCursor === null ? table : `${table}\n(more: --cursor ${page.nextCursor}, or --all)`;
        });
      });
    });

  onCollection(folder.command('get'))
    .description("write a file's bytes (verified as they stream) to stdout or to -o FILE")
    .argument('<path>', 'file path inside the collection')
    .option('-o, --output <file>', 'write to FILE (atomically: a failed download leaves no partial FILE)')
    .action(async (filePath: string, flags: CollectionFlags & { output?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        if (output.json && flags.output === undefined) {
          throw new InputError('INVALID_INPUT', 'with --json, name the file to write with -o FILE (stdout holds the JSON answer)');
        }
        const ref = await collectionOf(hf, flags);
        const opened = await hf.folders.open(ref, filePath);
        if (flags.output === undefined) {
          await pipeline(opened.body, process.stdout, { end: false });
          return;
        }
        const target = path.resolve(flags.output);
        const partial = `${target}.${process.pid}.partial`;
        try {
          await pipeline(opened.body, createWriteStream(partial, { mode: opened.entry.executable ? 0o755 : 0o644 }));
          await fs.rename(partial, target);
        } catch (error) {
          await fs.rm(partial, { force: true });
          throw error;
        }
        output.result(
          { path: filePath, file: target, entry: opened.entry },
          () => `${filePath} -> ${target} (${formatBytes(opened.entry.size)})`,
        );
      });
    });

  withOpId(onCollection(folder.command('put')))
    .description('upload a file from FILE or stdin, streamed (published only when complete)')
    .argument('<path>', 'file path inside the collection')
    .argument('[file]', 'local file to upload; - or absent: stdin', '-')
    .option('--content-type <type>', 'content type to store with the file')
    .option('--executable', 'mark the file executable')
    .option('--sha256 <hex>', 'the SHA-256 the content must have (a mismatch is CONFLICT, nothing published)')
    .option('--replace-kind', 'replace a directory at the path (it goes to the trash)')
    .action(
      async (
        filePath: string,
        source: string,
        flags: MutationFlags & { contentType?: string; executable?: boolean; sha256?: string; replaceKind?: boolean },
        command: Command,
      ) => {
        await withHoldfast(command, async (hf, { output }) => {
          const ref = await collectionOf(hf, flags);
          const body = source === '-' ? process.stdin : createReadStream(source);
          const result = await hf.folders.write(ref, filePath, body, {
            operationId: operationId(flags, (line) => output.note(line)),
            executable: flags.executable === true,
            replaceKind: flags.replaceKind === true,
            ...(flags.contentType === undefined ? {} : { contentType: flags.contentType }),
            ...(flags.sha256 === undefined ? {} : { expectedSha256: flags.sha256.toLowerCase() }),
          });
          output.result(result, () =>
            result.applied
              ? `${filePath}: ${formatBytes(result.entry?.size ?? 0)}, sha256 ${result.entry?.sha256 ?? '-'}`
              : `${filePath}: this operation was already applied; nothing changed`,
          );
        });
      },
    );

  withOpId(onCollection(folder.command('mkdir')))
    .description('create a directory and its missing parents')
    .argument('<path>', 'directory path inside the collection')
    .option('--replace-kind', 'replace a file at the path (it goes to the trash)')
    .action(async (dirPath: string, flags: MutationFlags & { replaceKind?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const result = await hf.folders.mkdir(ref, dirPath, {
          operationId: operationId(flags, (line) => output.note(line)),
          ...(flags.replaceKind === true ? { replaceKind: true } : {}),
        });
        output.result(result, () => (result.applied ? `${dirPath}/ created` : `${dirPath}: already applied; nothing changed`));
      });
    });

  withOpId(onCollection(folder.command('rm')))
    .description('move a path and everything under it to the trash (one unit, restorable)')
    .argument('<path>', 'path inside the collection')
    .action(async (target: string, flags: MutationFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const result = await hf.folders.remove(ref, target, { operationId: operationId(flags, (line) => output.note(line)) });
        output.result(result, () => (result.applied ? `${target}: ${result.removed} moved to the trash` : `${target}: already applied`));
      });
    });

  withOpId(onCollection(folder.command('restore')))
    .description('bring a trashed row (and what was trashed with it beneath it) back; refused if a path is live again')
    .argument('<file-id>', 'row id (from holdfast folder ls --trash)')
    .action(async (fileId: string, flags: MutationFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const result = await hf.folders.restore(ref, fileId, { operationId: operationId(flags, (line) => output.note(line)) });
        output.result(result, () => (result.applied ? `${result.restored} restored` : 'already applied; nothing changed'));
      });
    });

  onCollection(folder.command('sync'))
    .description('the save state of the collection in every sandbox that synced it (never saved, saving, saved, failed)')
    .action(async (flags: CollectionFlags, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const tenant = { id: ref.tenantId, name: flags.tenant };
        const sandboxes = await hf.folderSync.status(tenant, { scope: ref.scope, ownerId: ref.ownerId });
        output.result({ sandboxes }, () => {
          if (sandboxes.length === 0) return 'no sandbox has synced this collection';
          return renderTable(
            ['RUN', 'SANDBOX', 'STATE', 'LAST SAVED', 'FINAL FLUSH', 'REFRESH', 'ERROR'],
            sandboxes.map((s) => [
              s.runId,
              `${s.sandbox.provider}:${s.sandbox.id}${s.active ? '' : ' (ended)'}`,
              s.state.replace('_', ' '),
              s.lastSavedAt === null ? 'never' : isoTime(s.lastSavedAt),
              s.finalCheckpointAt === null ? '-' : isoTime(s.finalCheckpointAt),
              s.refresh.state,
              s.error === null ? '-' : s.error.code,
            ]),
          );
        });
      });
    });

  onCollection(folder.command('refresh'))
    .description("queue a refresh of the collection in a bound run's sandbox, applied at the run's next safe boundary")
    .requiredOption('--run <id>', 'a run bound to the collection')
    .action(async (flags: CollectionFlags & { run: string }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const ref = await collectionOf(hf, flags);
        const run = await (await hf.forTenant(flags.tenant)).runs.get(flags.run);
        const tenant = { id: ref.tenantId, name: flags.tenant };
        const result = await hf.folderSync.requestRefresh(tenant, run.id, { scope: ref.scope, ownerId: ref.ownerId });
        output.result(result, () =>
          result.queued
            ? `refresh of ${flags.scope}/${flags.owner} queued for run ${run.id}'s next safe boundary`
            : `run ${run.id}'s sandbox has not synced ${flags.scope}/${flags.owner} yet: its next start hydrates it`,
        );
      });
    });

  withOpId(onCollection(folder.command('purge')))
    .description('remove a trashed row for good, or with --collection the whole collection')
    .argument('[file-id]', 'row id (from holdfast folder ls --trash)')
    .option('--collection', "purge the owner's whole collection: live files, trash and operation ids")
    .action(async (fileId: string | undefined, flags: MutationFlags & { collection?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        if ((fileId === undefined) === (flags.collection !== true)) {
          throw new InputError('INVALID_INPUT', 'name one trashed row id, or pass --collection (not both)');
        }
        const ref = await collectionOf(hf, flags);
        if (fileId === undefined) {
          const result = await hf.folders.purgeCollection(ref);
          output.result(result, () => `collection ${flags.scope}/${flags.owner}: ${result.purged} rows purged`);
          return;
        }
        const result = await hf.folders.purge(ref, fileId, { operationId: operationId(flags, (line) => output.note(line)) });
        output.result(result, () => (result.applied ? `${result.purged} purged` : 'already applied; nothing changed'));
      });
    });
}
