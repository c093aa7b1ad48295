import type { Command } from 'commander';
import type { Run } from '../../index.js';
import { isoTime } from '../output.js';
import { withHoldfast } from '../program.js';
import { locateRun } from './run.js';

/**
 * `holdfast lease resolve <runId>`: the operator's way out of `release_recovery_required`.
 * Goes straight to the store (any tenant), so it works while no server is running.
 */
export function registerLease(program: Command): void {
  // Subcommands copy this when created; runCli overrides only the first level, and a usage
  // error in `lease <sub>` must still reach it to exit 2.
  const lease = program.command('lease').exitOverride().description('operate on run leases directly in the store');

  lease
    .command('resolve')
    .description(
      'clear release_recovery_required on a run of any tenant: destroys its old sandbox if the provider still has it, ' +
        'then frees the lease at a new epoch (the next turn rebuilds the sandbox from the head checkpoint)',
    )
    .argument('<runId>', 'run id, a unique prefix of it (8+ characters), or latest')
    .option('-t, --tenant <name>', 'look only in this tenant')
    .option(
      '--discard-unsaved',
      'destroy the old sandbox even when the work it holds could not be saved (work_folder_save_required); by default it is saved first',
    )
    .action(async (runId: string, flags: { tenant?: string; discardUnsaved?: boolean }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const { run: located, services } = await locateRun(hf, runId, flags.tenant);
        const run = await services.runs.resolveLease(located.id, { discardUnsaved: flags.discardUnsaved === true });
        output.result(leaseView(run, services.tenant.name), () => renderLease(run));
      });
    });
}

/** The `--json` shape: the run's identity and its lease after resolution. */
function leaseView(run: Run, tenant: string) {
  return { runId: run.id, tenant, lease: run.lease, sandbox: run.sandbox, deploymentId: run.deploymentId };
}

function renderLease(run: Run): string {
  const { lease } = run;
  return [
    `run ${run.id}: lease ${lease.state} at epoch ${lease.epoch}`,
    `  owner ${lease.owner ?? '-'}, expires ${isoTime(lease.expiresAt)}, sandbox ${run.sandbox === null ? 'none' : `${run.sandbox.provider}/${run.sandbox.id}`}`,
    '  the next turn recreates the sandbox from the head checkpoint',
  ].join('\n');
}
