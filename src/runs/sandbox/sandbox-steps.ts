import { bundleDirIn } from '../../deployments/bundle-record.js';
import { BUNDLE_DIR_ENV, installBundle } from '../../deployments/deployment-bundle.js';
import type { DeploymentSpec } from '../../deployments/deployment-spec.js';
import type { Deployment } from '../../deployments/deployments.js';
import { errorToJson, HoldfastError, InputError, IntegrityError } from '../../errors.js';
import type { Checkpoint, Run } from '../../metadata/metadata-store.js';
import { insideWorkspace, viewOf } from '../../sandbox/handle-views.js';
import type { SandboxHandle } from '../../sandbox/sandbox-provider.js';
import { runSetupCommand } from '../../sandbox/setup-command.js';
import type { RunHost } from '../run-host.js';

/**
 * Times the steps of one recovery, upgrade or creation and records each as a run event
 * (`kind`, `step`, ok|failed, duration, error), so a run's history shows where time went and
 * where it failed.
 */
export class StepRecorder {
  constructor(
    private readonly host: RunHost,
    private readonly runId: string,
    readonly kind: string,
  ) {}

  /** Runs `fn` as step `step`, recording its outcome; rethrows its error. */
  async step<T>(step: string, fn: () => Promise<T>, data?: (value: T) => Record<string, unknown>): Promise<T> {
    const started = performance.now();
    try {
      const value = await fn();
      await this.record(step, 'ok', performance.now() - started, data?.(value));
      return value;
    } catch (error) {
      await this.record(step, 'failed', performance.now() - started, { error: errorToJson(error) });
      throw error;
    }
  }

  /** Records a step measured elsewhere. */
  async record(step: string, status: 'ok' | 'failed', durationMs: number, data?: Record<string, unknown>): Promise<void> {
    this.host.log({
      event: 'step',
      level: status === 'ok' ? 'info' : 'warn',
      msg: `${this.kind} ${step} ${status}`,
      runId: this.runId,
      kind: this.kind,
      step,
      status,
      durationMs: Math.round(durationMs),
    });
    await this.host.meta.turns
      .addEvent({ runId: this.runId, kind: this.kind, step, status, durationMs, ...(data === undefined ? {} : { data }) })
      .catch(() => undefined);
  }
}

/**
 * The sandbox as a deployment sees it: rooted at the deployment's workspace root (which must lie
 * inside the provider's: `INVALID_INPUT` otherwise) and, for a deployment with a bundle, with
 * `HOLDFAST_BUNDLE_DIR` in every command (the path is the spec's, so a handle found again after
 * a restart names the same directory).
 */
export function deploymentHandle(handle: SandboxHandle, spec: DeploymentSpec): SandboxHandle {
  const root = spec.workspaceRoot ?? handle.workspaceRoot;
  if (!insideWorkspace(handle, root)) {
    throw new InputError(
      'INVALID_INPUT',
      `workspaceRoot ${root} is outside the ${handle.provider} sandbox workspace ${handle.workspaceRoot}`,
      {
        data: { workspaceRoot: root, providerRoot: handle.workspaceRoot },
      },
    );
  }
  const rooted = viewOf(handle, { root });
  if (spec.bundle === null || spec.bundle === undefined) return rooted;
  const env = { [BUNDLE_DIR_ENV]: bundleDirIn(spec.bundlePath ?? null, rooted) };
  return viewOf(rooted, { env: () => env });
}

/** Input of {@link prepareSandbox}. */
export interface PrepareInput {
  readonly host: RunHost;
  readonly recorder: StepRecorder;
  readonly tenantName: string;
  readonly runId: string;
  readonly workspaceName: string;
  readonly deploymentId: string;
  readonly spec: DeploymentSpec;
  /** Restored into the new sandbox; absent for a run with no checkpoint yet. */
  readonly checkpoint: Checkpoint | undefined;
  /**
   * `run`: the sandbox is to become the run's (labelled {@link RUN_LABEL}, so one left behind by a
   * crash is found and removed); `copy`: a restore handed to the caller, never touched again.
   */
  readonly purpose: 'run' | 'copy';
}

/** Label naming the run a sandbox was made for. */
export const RUN_LABEL = 'holdfast.run';
/** Label naming the run a caller-owned restored copy came from. */
export const COPY_LABEL = 'holdfast.restored-from';

/**
 * Makes a ready sandbox for a deployment: create, restore the checkpoint, run setup, validate
 * runtime and workspace, each a recorded step. On any failure the new sandbox is destroyed and
 * the error rethrown; nothing about the run changes (committing it is the caller's step).
 */
export async function prepareSandbox(input: PrepareInput): Promise<SandboxHandle> {
  const { host, recorder, spec } = input;
  const provider = host.provider(spec.provider);
  const created = await recorder.step(
    'create_sandbox',
    () =>
      provider.create({
        ...(spec.image === null ? {} : { image: spec.image }),
        ...(spec.limits ? { limits: spec.limits } : {}),
        env: { ...spec.env },
        labels: { [input.purpose === 'run' ? RUN_LABEL : COPY_LABEL]: input.runId, 'holdfast.deployment': input.deploymentId.slice(0, 16) },
      }),
    (h) => ({ sandbox: h.id, provider: h.provider, deploymentId: input.deploymentId }),
  );
  try {
    const sandbox = deploymentHandle(created, spec);
    if (sandbox.workspaceRoot !== created.workspaceRoot) {
      await runSetupCommand(created, {
        argv: ['mkdir', '-p', sandbox.workspaceRoot],
        timeoutMs: host.settings.setupTimeoutMs,
        what: 'creating the workspace root',
      });
    }
    const { checkpoint } = input;
    if (checkpoint !== undefined) {
      const receipt = await recorder.step(
        'restore',
        () =>
          host.endpoints.restore(host.snapshotsFor(input.tenantName), sandbox, {
            workspace: input.workspaceName,
            checkpoint: checkpoint.id,
            replace: true,
          }),
        (r) => ({ checkpointId: r.checkpointId, files: r.files, bytes: r.bytes }),
      );
      if (receipt.rootTree !== checkpoint.rootTree) {
        throw new IntegrityError(
          'RESTORE_INCOMPLETE',
          `restore into ${sandbox.id} produced tree ${receipt.rootTree}, expected ${checkpoint.rootTree}`,
          {
            data: { checkpointId: checkpoint.id },
          },
        );
      }
    }
    if (spec.bundle !== null && spec.bundle !== undefined) {
      // Before setup and validation, which may use it; never from a checkpoint (the bundle path is outside the workspace).
      await recorder.step(
        'bundle',
        () => installBundle(host.endpoints, host.snapshotsFor(input.tenantName), sandbox, { spec }),
        (r) => (r === null ? {} : { rootTree: r.receipt.rootTree, files: r.receipt.files, bytes: r.receipt.bytes, dir: r.dir }),
      );
    }
    await recorder.step('setup', async () => {
      for (const [i, argv] of spec.setup.entries()) {
        await runSetupCommand(sandbox, { argv, timeoutMs: host.settings.setupTimeoutMs, what: `setup command ${i + 1}` });
      }
    });
    await recorder.step('validate', async () => {
      const check = spec.validate ?? ['sh', '-c', 'test -d "$1" && test -w "$1"', 'validate', sandbox.workspaceRoot];
      await runSetupCommand(sandbox, { argv: check, timeoutMs: host.settings.setupTimeoutMs, what: 'validation' });
    });
    return sandbox;
  } catch (error) {
    await recorder.step('discard_sandbox', () => stopSandbox(host, created.provider, created.id)).catch(() => undefined);
    throw error;
  }
}

/**
 * Sandboxes made for `run` that are not its committed one were left by a process that died
 * between creating and committing them (under the run's lease, which the caller holds, nobody
 * else makes them): removes them from the providers of `deployments` before another is made, so
 * a run never accumulates sandboxes. A failure is recorded as a failed step and never thrown (a
 * stray must not stop a recovery).
 */
export async function removeStrays(host: RunHost, run: Run, deployments: readonly Deployment[], recorder: StepRecorder): Promise<void> {
  const providers = new Set(deployments.map((d) => d.spec.provider));
  for (const name of providers) {
    const strays = (await host.provider(name).list()).filter((s) => s.labels[RUN_LABEL] === run.id && s.id !== run.sandbox?.id);
    if (strays.length === 0) continue;
    await recorder
      .step(
        'remove_strays',
        async () => {
          for (const stray of strays) await stopSandbox(host, name, stray.id);
        },
        () => ({ sandboxes: strays.map((s) => s.id) }),
      )
      .catch(() => undefined);
  }
}

/**
 * Destroys a sandbox within the stop timeout. Rejects with `TIMEOUT` when the provider did not
 * answer in time, or with the provider's error: either way the stop is uncertain.
 */
export async function stopSandbox(host: RunHost, providerName: string, id: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new HoldfastError('TIMEOUT', `stopping sandbox ${id} took longer than ${host.settings.stopTimeoutMs} ms`, {
            data: { sandbox: id },
          }),
        ),
      host.settings.stopTimeoutMs,
    );
  });
  host.forgetSandbox({ provider: providerName, id });
  try {
    await Promise.race([host.provider(providerName).destroy(id), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
