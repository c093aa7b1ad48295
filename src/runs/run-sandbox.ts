import { errorToJson, isHoldfastError } from '../errors.js';
import type { Checkpoint, CheckpointReason, MetadataTransaction, Run } from '../metadata/metadata-store.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../snapshot/checkpoint.js';
import type { Deployment, Deployments, TenantScope } from './deployments.js';
import { type HeldLease, recoveryRequired } from './lease.js';
import type { RunHost } from './run-host.js';
import { runWorkspaceName } from './run-names.js';
import { prepareSandbox, RUN_LABEL, rootedHandle, StepRecorder, stopSandbox } from './sandbox-steps.js';

/** What the run procedures need of the tenant-scoped service. */
export interface RunScope {
  readonly host: RunHost;
  readonly tenant: TenantScope;
  readonly deployments: Deployments;
}

/** A run with a live sandbox of its deployment. */
export interface ReadySandbox {
  readonly run: Run;
  readonly sandbox: SandboxHandle;
  readonly deployment: Deployment;
}

/**
 * Checkpoints the run's sandbox under `lease`: the head moves only if the lease epoch is still
 * current when the checkpoint commits (`STALE_LEASE` otherwise, nothing written). `onCommit`
 * runs in the same transaction (the turn completes there).
 */
export function saveSandbox(
  scope: RunScope,
  lease: HeldLease,
  sandbox: SandboxHandle,
  reason: CheckpointReason,
  options: { signal?: AbortSignal; onCommit?: (tx: MetadataTransaction, checkpoint: Checkpoint) => Promise<void> } = {},
): Promise<CheckpointResult> {
  const runId = lease.run.id;
  return scope.host.endpoints.checkpoint(scope.host.snapshotsFor(scope.tenant.name), sandbox, {
    workspace: runWorkspaceName(runId),
    reason,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onCommit: async (tx, checkpoint) => {
      await tx.runs.fence(runId, lease.epoch);
      await options.onCommit?.(tx, checkpoint);
    },
  });
}

/**
 * Makes sure the leased run has a live sandbox: after a takeover the previous owner's sandbox
 * is stopped first (an uncertain stop leaves `release_recovery_required`); an `automatic`
 * upgrade to the channel's active deployment is attempted when `upgrade` is set (a failure keeps
 * the old sandbox); a missing sandbox is rebuilt from the head checkpoint.
 */
export async function ensureSandbox(scope: RunScope, lease: HeldLease, options: { upgrade: boolean }): Promise<ReadySandbox> {
  const { host } = scope;
  let run = lease.run;
  if (run.lease.takenFrom !== null) run = await stopPrevious(scope, lease, run);
  const current = await scope.deployments.get(run.deploymentId);
  const target = options.upgrade ? await upgradeTarget(scope, run, current) : current;
  const started = performance.now();
  const sandbox = await liveSandbox(scope, run, current);
  if (sandbox === undefined) return rebuild(scope, lease, run, [target, current], performance.now() - started);
  host.touched.set(run.id, scope.tenant);
  if (target.id === current.id) return { run, sandbox, deployment: current };
  try {
    return await upgradeSandbox(scope, lease, run, sandbox, target);
  } catch (error) {
    if (isHoldfastError(error, 'STALE_LEASE')) throw error;
    host.log({
      event: 'upgrade_failed',
      level: 'warn',
      msg: 'upgrade failed; the run stays on its deployment',
      runId: run.id,
      deploymentId: target.id,
      error,
    });
    return { run, sandbox, deployment: current };
  }
}

/** The run's committed sandbox as `deployment` sees it, or `undefined` when it is gone or was never made. */
export async function liveSandbox(scope: RunScope, run: Run, deployment: Deployment): Promise<SandboxHandle | undefined> {
  if (run.sandbox === null) return undefined;
  const handle = await scope.host.provider(run.sandbox.provider).get(run.sandbox.id);
  return handle === undefined ? undefined : rootedHandle(handle, deployment.spec);
}

async function upgradeTarget(scope: RunScope, run: Run, current: Deployment): Promise<Deployment> {
  if (run.channel === null) return current;
  const channel = await scope.host.meta.deployments.findChannel(scope.tenant.id, run.channel);
  if (channel === undefined || channel.deploymentId === current.id) return current;
  const next = await scope.deployments.get(channel.deploymentId);
  return next.spec.workspaceUpgradePolicy === 'automatic' ? next : current;
}

/**
 * After a takeover (`lease.run.lease.takenFrom` set): fails the dead owner's running turns, stops
 * the sandbox it left and forgets it (the next turn rebuilds from the head); an uncertain stop
 * marks the run `release_recovery_required` and rejects with its `CONFLICT`.
 */
export async function stopPrevious(scope: RunScope, lease: HeldLease, run: Run): Promise<Run> {
  const { host } = scope;
  const recorder = new StepRecorder(host, run.id, 'lease');
  await recorder.record('takeover', 'ok', 0, { from: run.lease.takenFrom, epoch: lease.epoch });
  for (const turn of await host.meta.turns.list(run.id, 10)) {
    if (turn.status !== 'running' || turn.epoch >= lease.epoch) continue;
    const error = { code: 'STALE_LEASE', message: `owner ${turn.owner} lost the run's lease before the turn completed` };
    await host.meta.turns.finish(turn.id, { status: 'failed', error }).catch(() => undefined);
  }
  if (run.sandbox === null) return run;
  const { provider, id } = run.sandbox;
  try {
    await recorder.step(
      'stop_previous_sandbox',
      () => stopSandbox(host, provider, id),
      () => ({ sandbox: id }),
    );
  } catch (error) {
    const stuck = await host.meta.runs.requireRecovery(run.id, lease.epoch, { ...errorToJson(error), sandbox: id, provider });
    throw recoveryRequired(stuck);
  }
  return host.meta.runs.setSandbox(run.id, lease.epoch, null, run.deploymentId);
}

/** Creates a sandbox for the first of `candidates` that works, restores the head and commits it to the run. */
async function rebuild(scope: RunScope, lease: HeldLease, run: Run, candidates: Deployment[], missingFor: number): Promise<ReadySandbox> {
  const { host } = scope;
  const workspace = await host.meta.workspaces.get(run.workspaceId);
  const head = workspace.headCheckpointId === null ? undefined : await host.meta.checkpoints.get(workspace.headCheckpointId);
  const recorder = new StepRecorder(host, run.id, run.sandbox === null && head === undefined ? 'create' : 'recovery');
  if (run.sandbox !== null) await recorder.record('detect_missing', 'ok', missingFor, { sandbox: run.sandbox.id });
  await removeStrays(scope, run, candidates, recorder);
  const unique = candidates.filter((d, i) => candidates.findIndex((o) => o.id === d.id) === i);
  let lastError: unknown;
  for (const deployment of unique) {
    try {
      const sandbox = await prepareFor(scope, run, recorder, deployment, head);
      const committed = await commitSwitch(scope, lease, run, sandbox, deployment, recorder);
      return { run: committed, sandbox, deployment };
    } catch (error) {
      if (isHoldfastError(error, 'STALE_LEASE')) throw error;
      lastError = error;
    }
  }
  throw lastError;
}

/** A ready sandbox of `deployment` for `run` holding `checkpoint` (see {@link prepareSandbox}). */
function prepareFor(
  scope: RunScope,
  run: Run,
  recorder: StepRecorder,
  deployment: Deployment,
  checkpoint: Checkpoint | undefined,
): Promise<SandboxHandle> {
  return prepareSandbox({
    host: scope.host,
    recorder,
    tenantName: scope.tenant.name,
    runId: run.id,
    workspaceName: runWorkspaceName(run.id),
    deploymentId: deployment.id,
    spec: deployment.spec,
    checkpoint,
    purpose: 'run',
  });
}

/**
 * Sandboxes made for this run that are not its committed one were left by a process that died
 * between creating and committing them (under the lease nobody else makes them): remove them
 * before making another, so a run never accumulates sandboxes.
 */
async function removeStrays(scope: RunScope, run: Run, deployments: readonly Deployment[], recorder: StepRecorder): Promise<void> {
  const providers = new Set(deployments.map((d) => d.spec.provider));
  for (const name of providers) {
    const strays = (await scope.host.provider(name).list()).filter((s) => s.labels[RUN_LABEL] === run.id && s.id !== run.sandbox?.id);
    if (strays.length === 0) continue;
    await recorder
      .step(
        'remove_strays',
        async () => {
          for (const stray of strays) await stopSandbox(scope.host, name, stray.id);
        },
        () => ({ sandboxes: strays.map((s) => s.id) }),
      )
      .catch(() => undefined); // recorded as failed; a stray must not stop the recovery
  }
}

/** Points the run at its new sandbox (fenced); a failed commit discards the new sandbox. */
async function commitSwitch(
  scope: RunScope,
  lease: HeldLease,
  run: Run,
  sandbox: SandboxHandle,
  deployment: Deployment,
  recorder: StepRecorder,
): Promise<Run> {
  const { host } = scope;
  try {
    const committed = await recorder.step('commit', () =>
      host.meta.runs.setSandbox(run.id, lease.epoch, { provider: sandbox.provider, id: sandbox.id }, deployment.id),
    );
    host.touched.set(run.id, scope.tenant);
    return committed;
  } catch (error) {
    await stopSandbox(host, sandbox.provider, sandbox.id).catch(() => undefined);
    throw error;
  }
}

/**
 * Moves the run from `old` to a sandbox of `target`: save from the old sandbox, create, restore
 * that checkpoint, set up, validate, commit the switch, and only then destroy the old sandbox.
 * Until the commit the old sandbox stays the run's; any failure leaves it so for a retry.
 */
export async function upgradeSandbox(
  scope: RunScope,
  lease: HeldLease,
  run: Run,
  old: SandboxHandle,
  target: Deployment,
): Promise<ReadySandbox> {
  const { host } = scope;
  const recorder = new StepRecorder(host, run.id, 'upgrade');
  const saved = await recorder.step(
    'save',
    () => saveSandbox(scope, lease, old, 'upgrade'),
    (r) => ({ checkpointId: r.checkpoint.id, from: run.deploymentId, to: target.id }),
  );
  const sandbox = await prepareFor(scope, run, recorder, target, saved.checkpoint);
  const committed = await commitSwitch(scope, lease, run, sandbox, target, recorder);
  await recorder
    .step(
      'destroy_old_sandbox',
      () => stopSandbox(host, old.provider, old.id),
      () => ({ sandbox: old.id }),
    )
    .catch(() => undefined);
  return { run: committed, sandbox, deployment: target };
}
