import type { Command } from 'commander';
import { resolveIdOrPrefix } from '../../core/id-prefix.js';
import { CREATED_KEY, DEFAULT_PAGE_SIZE, readPage } from '../../core/page-cursor.js';
import { InputError, isHoldfastError, NotFoundError } from '../../errors.js';
import type { RepositoryStatus } from '../../git/repository-checkpoints.js';
import type { Holdfast, Run, RunEvent, TenantServices, Turn } from '../../index.js';
import { isoTime, renderTable } from '../output.js';
import { collect, positiveInt, readHoldfast, withHoldfast } from '../program.js';
import { metaFlags } from './checkpoint-note-flags.js';

/** Most recent turns `run show` prints. */
const SHOWN_TURNS = 10;
/** Most recent events `run show` prints, oldest first: enough for several recoveries. */
const SHOWN_EVENTS = 200;

/** A run found by id alone, with the services of the tenant that owns it. */
export interface LocatedRun {
  readonly run: Run;
  readonly services: TenantServices;
}

/**
 * Finds run `runId` in whichever tenant holds it (only in tenant `tenantName` when given): an
 * operator with direct store access names runs by id, by a unique prefix of at least 8
 * characters, or `latest` (the most recently created run). `NOT_FOUND` when no tenant has it,
 * `CONFLICT` with the candidates for an ambiguous prefix, `INVALID_INPUT` for a shorter one.
 */
export async function locateRun(hf: Holdfast, runId: string, tenantName?: string): Promise<LocatedRun> {
  const scope = tenantName === undefined ? null : (await tenantNamed(hf, tenantName)).id;
  const { runs } = hf.meta;
  const run = await resolveIdOrPrefix(runId, {
    kind: 'run',
    idOf: (r) => r.id,
    exact: async (id) => {
      const found = await runs.get(id).catch((error: unknown) => {
        if (isHoldfastError(error, 'NOT_FOUND')) return undefined;
        throw error;
      });
      return scope === null || found?.tenantId === scope ? found : undefined;
    },
    byPrefix: (prefix, limit) => runs.findByPrefix(scope, prefix, limit),
    latest: () => runs.latest(scope),
  });
  const tenant = await hf.meta.tenants.get(run.tenantId);
  return { run, services: await hf.forTenant(tenant.name) };
}

/** `holdfast run ls | show | create | end`: runs, their turns and their recorded steps, in the store. */
export function registerRun(program: Command): void {
  // Subcommands copy this when created; runCli overrides only the first level, and a usage
  // error in `run <sub>` must still reach it to exit 2.
  const run = program.command('run').exitOverride().description('inspect durable runs: their lease, turns and recovery timeline');

  run
    .command('ls')
    .description('list runs, newest first (all tenants unless --tenant)')
    .option('-t, --tenant <name>', 'only this tenant')
    .option('--limit <n>', `most runs to list (default ${DEFAULT_PAGE_SIZE})`, positiveInt('--limit'))
    .option('--cursor <cursor>', 'continue after a page (its nextCursor)')
    .action(async (flags: { tenant?: string; limit?: number; cursor?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const scope = flags.tenant === undefined ? null : (await tenantNamed(hf, flags.tenant)).id;
        const names = new Map((await hf.meta.tenants.list()).map((t) => [t.id, t.name]));
        const page = await readPage(
          flags,
          CREATED_KEY,
          (after, n) => hf.meta.runs.list(scope, n, after),
          (r) => [r.createdAt, r.id],
        );
        const shown = page.items.map((r) => ({ ...r, tenant: names.get(r.tenantId) ?? r.tenantId }));
        const more = page.nextCursor === null ? '' : `\n(more: --cursor ${page.nextCursor})`;
        output.result({ runs: shown, nextCursor: page.nextCursor }, () =>
          shown.length === 0
            ? 'no runs'
            : renderTable(
                ['ID', 'TENANT', 'LEASE', 'EPOCH', 'TURNS', 'DEPLOYMENT', 'SANDBOX', 'UPDATED'],
                shown.map((r) => [
                  r.id,
                  r.tenant,
                  r.lease.state,
                  String(r.lease.epoch),
                  String(r.turnCount),
                  r.deploymentId,
                  r.sandbox === null ? '-' : `${r.sandbox.provider}/${r.sandbox.id}`,
                  isoTime(r.updatedAt),
                ]),
              ) + more,
        );
      });
    });

  run
    .command('create')
    .description('create a run on a channel or a pinned deployment; with bindings it gets a run token, printed once')
    .option('-t, --tenant <name>', 'tenant of the run', 'default')
    .option('--channel <name>', 'follow this channel (upgrades)')
    .option('--deployment <id>', 'pin this deployment id')
    .option('--task <owner>', 'bind the task collection of this owner')
    .option('--agent <owner>', 'bind the agent collection of this owner (the run may write it)')
    .option(
      '--user <name>',
      "bind this live user's private collection (stored by the user's id: a later user of the name is not bound). Binding a user needs that user's consent: over HTTP only a token of that user may; this command is the operator, who holds the store, giving it",
    )
    .option('--project <owner>', 'bind the project collection of this owner')
    .option(
      '--repo <url|json>',
      'bind a repository, checked out at $HOME/repos/<name> (repeatable): a URL, or JSON {"url", "name"?, "ref"?, "branch"?}',
      (value: string, all: string[]) => [...all, value],
      [] as string[],
    )
    .action(async (flags: RunCreateFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        if ((flags.channel === undefined) === (flags.deployment === undefined)) {
          throw new InputError('INVALID_INPUT', 'give exactly one of --channel and --deployment', { data: { field: 'channel' } });
        }
        const tenant = await tenantNamed(hf, flags.tenant);
        const { runs } = await hf.forTenant(tenant.name);
        const repos = (flags.repo ?? []).map(repoFlag);
        const bindings = {
          task: flags.task,
          agent: flags.agent,
          user: flags.user,
          project: flags.project,
          ...(repos.length === 0 ? {} : { repos }),
        };
        const created = await runs.create(
          flags.channel === undefined ? { deploymentId: flags.deployment ?? '', bindings } : { channel: flags.channel, bindings },
        );
        if (created.runToken !== null) output.note(`run ${created.id}: its run token is shown only once, store it now`);
        output.result({ ...(await runs.named(created)), tenant: tenant.name }, () =>
          created.runToken === null ? created.id : `${created.id}\n${created.runToken}`,
        );
      });
    });

  run
    .command('fork')
    .description(
      "start a new run from any checkpoint of the tenant, no byte copied: its first checkpoint shares the source's tree, its first turn restores it",
    )
    .argument('<checkpoint>', "checkpoint id, a unique prefix of it (8+ characters), or latest (the tenant's newest ready checkpoint)")
    .option('-t, --tenant <name>', 'tenant of the checkpoint and the new run', 'default')
    .option('--channel <name>', "follow this channel (default: the source run's channel or pinned deployment)")
    .option('--deployment <id>', 'pin this deployment id')
    .option('--label <text>', "a label for the fork's first checkpoint")
    .option('--meta <key=value>', "metadata for the fork's first checkpoint (repeatable)", collect)
    .action(async (checkpoint: string, flags: RunForkFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        if (flags.channel !== undefined && flags.deployment !== undefined) {
          throw new InputError('INVALID_INPUT', 'give at most one of --channel and --deployment', { data: { field: 'channel' } });
        }
        const tenant = await tenantNamed(hf, flags.tenant);
        const { runs } = await hf.forTenant(tenant.name);
        const meta = metaFlags(flags.meta);
        const forked = await runs.fork({
          fromCheckpoint: checkpoint,
          ...(flags.channel === undefined ? {} : { channel: flags.channel }),
          ...(flags.deployment === undefined ? {} : { deploymentId: flags.deployment }),
          ...(flags.label === undefined ? {} : { label: flags.label }),
          ...(meta === undefined ? {} : { meta }),
        });
        output.result(
          { ...(await runs.named(forked)), tenant: tenant.name },
          () => `${forked.id}\n  forked from checkpoint ${forked.checkpoint.forkedFrom ?? ''}; first checkpoint ${forked.checkpoint.id}`,
        );
      });
    });

  run
    .command('end')
    .description(
      'end a run of any tenant (idempotent): no more turns, and its run tokens reach nothing; its sandbox is saved (a final checkpoint) and destroyed',
    )
    .argument('<runId>', 'run id, a unique prefix of it (8+ characters), or latest')
    .option('-t, --tenant <name>', 'look only in this tenant')
    .option('--keep-sandbox', 'leave the sandbox running and save nothing (holdfast sandbox destroy removes it later)')
    .action(async (runId: string, flags: { tenant?: string; keepSandbox?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const { run: located, services } = await locateRun(hf, runId, flags.tenant);
        const ended = await services.runs.end(located.id, { keepSandbox: flags.keepSandbox === true });
        output.result({ ...ended, tenant: services.tenant.name }, () => `run ${ended.id} ended at ${isoTime(ended.endedAt)}`);
      });
    });

  run
    .command('show')
    .description('show a run of any tenant: deployment, sandbox, lease, its last turns and its recorded steps')
    .argument('<runId>', 'run id, a unique prefix of it (8+ characters), or latest')
    .option('-t, --tenant <name>', 'look only in this tenant')
    .action(async (runId: string, flags: { tenant?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const { run: located, services } = await locateRun(hf, runId, flags.tenant);
        const current = await services.runs.named(await services.runs.get(located.id));
        const turns = await services.runs.turns(located.id, SHOWN_TURNS);
        const events = await services.runs.events(located.id, SHOWN_EVENTS);
        const repositories = await hf.repositories.status(current);
        output.result({ run: { ...current, repositories }, tenant: services.tenant.name, turns, events }, () =>
          renderShow(current, services.tenant.name, turns, events, repositories),
        );
      });
    });
}

/** Flags of `holdfast run create`. */
interface RunForkFlags {
  readonly tenant: string;
  readonly channel?: string;
  readonly deployment?: string;
  readonly label?: string;
  readonly meta?: string[];
}

interface RunCreateFlags {
  readonly tenant: string;
  readonly channel?: string;
  readonly deployment?: string;
  readonly task?: string;
  readonly agent?: string;
  readonly user?: string;
  readonly project?: string;
  readonly repo?: readonly string[];
}

/** One `--repo` value: a JSON object when it starts with `{`, otherwise a URL. */
function repoFlag(value: string): { url: string } {
  if (!value.startsWith('{')) return { url: value };
  try {
    return JSON.parse(value) as { url: string };
  } catch {
    throw new InputError('INVALID_INPUT', `--repo ${value.slice(0, 64)} is not valid JSON: give a URL or {"url": ...}`, {
      data: { field: 'repo' },
    });
  }
}

/** The tenant named `name`; `NOT_FOUND` rather than creating it, since listing must not write. */
export async function tenantNamed(hf: Holdfast, name: string): Promise<{ id: string; name: string }> {
  const tenant = await hf.meta.tenants.findByName(name);
  if (tenant === undefined) throw new NotFoundError(`tenant ${name} not found: holdfast run ls without --tenant lists every tenant's runs`);
  return tenant;
}

function renderShow(
  run: Run,
  tenant: string,
  turns: readonly Turn[],
  events: readonly RunEvent[],
  repositories: readonly RepositoryStatus[],
): string {
  const { lease } = run;
  const lines = [
    `run ${run.id} (tenant ${tenant})`,
    `  deployment  ${run.deploymentId}${run.channel === null ? ' (pinned)' : ` (channel ${run.channel})`}`,
    `  sandbox     ${run.sandbox === null ? 'none' : `${run.sandbox.provider}/${run.sandbox.id}`}`,
    `  lease       ${lease.state}, epoch ${lease.epoch}, owner ${lease.owner ?? '-'}, expires ${isoTime(lease.expiresAt)}`,
    ...(lease.takenFrom === null ? [] : [`  taken from  ${lease.takenFrom}`]),
    ...(lease.error === null ? [] : [`  lease error ${JSON.stringify(lease.error)}`]),
    ...(lease.state === 'release_recovery_required' && lease.error?.reason === 'work_folder_save_required'
      ? [
          `  sandbox kept the work it holds could not be saved (${String(lease.error.code ?? 'failed')}): it is the only copy`,
          `  resolve it with: holdfast lease resolve ${run.id} (saves it again first; --discard-unsaved destroys it anyway)`,
        ]
      : []),
    ...(lease.state === 'release_recovery_required' && lease.error?.reason !== 'work_folder_save_required'
      ? [`  resolve it with: holdfast lease resolve ${run.id}`]
      : []),
    `  turns       ${run.turnCount}, created ${isoTime(run.createdAt)}, updated ${isoTime(run.updatedAt)}`,
    `  bindings    ${run.bindings === null ? 'none' : JSON.stringify(run.bindings)}${run.endedAt === null ? '' : `, ended ${isoTime(run.endedAt)}`}`,
    '',
  ];
  if (repositories.length > 0) {
    const rows = repositories.map((r) => [
      r.name,
      r.state,
      r.branch ?? '-',
      isoTime(r.lastCheckpointAt),
      r.checkpointId ?? '-',
      r.url,
      r.error === null ? '' : `${r.error.code}: ${r.error.message}`,
    ]);
    lines.push('repositories:', renderTable(['NAME', 'STATE', 'BRANCH', 'LAST_CHECKPOINT', 'CHECKPOINT', 'URL', 'ERROR'], rows), '');
  }
  lines.push(turns.length === 0 ? 'no turns' : `last ${turns.length} turns:`);
  if (turns.length > 0) {
    const rows = turns.map((t) => [
      String(t.seq),
      t.status,
      String(t.epoch),
      isoTime(t.startedAt),
      t.finishedAt === null ? '-' : String(t.finishedAt - t.startedAt),
      t.checkpointId ?? '-',
      t.error === null ? '' : JSON.stringify(t.error),
    ]);
    lines.push(renderTable(['SEQ', 'STATUS', 'EPOCH', 'STARTED', 'DURATION_MS', 'CHECKPOINT', 'ERROR'], rows));
  }
  lines.push('', events.length === 0 ? 'no recorded steps' : `steps (oldest first, last ${events.length}):`);
  if (events.length > 0) {
    const rows = events.map((e) => [
      isoTime(e.at),
      e.kind,
      e.step,
      e.status,
      e.durationMs === null ? '-' : String(e.durationMs),
      e.data === null ? '' : JSON.stringify(e.data),
    ]);
    lines.push(renderTable(['AT', 'KIND', 'STEP', 'STATUS', 'DURATION_MS', 'DATA'], rows));
  }
  return lines.join('\n');
}
