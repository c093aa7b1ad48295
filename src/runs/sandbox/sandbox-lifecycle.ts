import { bundleDirIn } from '../../deployments/bundle-record.js';
import { BUNDLE_DIR_ENV, installBundle } from '../../deployments/deployment-bundle.js';
import type { DeploymentSpec } from '../../deployments/deployment-spec.js';
import type { Deployment } from '../../deployments/deployments.js';
import { errorToJson, HoldfastError, InputError, IntegrityError } from '../../errors.js';
import type { Checkpoint, MetadataStore, Run } from '../../metadata/metadata-store.js';
import { AgentPool } from '../../sandbox/agent/host/agent-pool.js';
import { SandboxEndpoints } from '../../sandbox/endpoints/sandbox-endpoints.js';
import { insideWorkspace, viewOf } from '../../sandbox/handle-views.js';
import { openSandboxProvider } from '../../sandbox/open-provider.js';
import type { SandboxHandle, SandboxProvider } from '../../sandbox/sandbox-provider.js';
import { runSetupCommand } from '../../sandbox/setup-command.js';
import type { Snapshots } from '../../snapshot/snapshots.js';
import type { RunEvents } from '../run-log-event.js';
import type { RunSettings } from '../run-settings.js';

/** Label naming the run a sandbox was made for. */
export const RUN_LABEL = 'holdfast.run';
/** Label naming the run a caller-owned restored copy came from. */
export const COPY_LABEL = 'holdfast.restored-from';

/** Names one sandbox of one provider. */
export interface SandboxRef {
  readonly provider: string;
  readonly id: string;
}

/** What a {@link SandboxLifecycle} is built from. */
export interface SandboxLifecycleOptions {
  /** Where each step is recorded as a run event. */
  readonly meta: MetadataStore;
  readonly events: RunEvents;
  readonly settings: Pick<RunSettings, 'setupTimeoutMs' | 'stopTimeoutMs'>;
  /** Turns a deployment's provider name into a provider; default: the shipped providers. */
  readonly providers?: (name: string) => SandboxProvider;
}

/**
 * The sandboxes of every run in this process: the one owner of making a ready sandbox for a
 * deployment (create, restore, bundle, setup, validate), stopping one within the stop timeout,
 * removing a run's strays, recording each step, and what this process keeps per sandbox (its
 * workspace endpoint, the extensions' command environment, whether it is still cold).
 * `RunSession` calls it and it never calls back: it knows no run session, lease or turn.
 */
export class SandboxLifecycle {
  /** How runs reach their sandboxes' workspaces: probed once per sandbox, agent connections kept open between a run's operations. */
  readonly endpoints: SandboxEndpoints;
  private readonly meta: MetadataStore;
  private readonly events: RunEvents;
  private readonly settings: Pick<RunSettings, 'setupTimeoutMs' | 'stopTimeoutMs'>;
  private readonly providers = new Map<string, SandboxProvider>();
  private readonly resolveProvider: (name: string) => SandboxProvider;
  /** Per sandbox (`provider\0id`) this process made or attached: extensions' environment, and whether it is still cold. */
  private readonly attachments = new Map<string, { env: Readonly<Record<string, string>>; cold: boolean }>();

  constructor(options: SandboxLifecycleOptions) {
    this.meta = options.meta;
    this.events = options.events;
    this.settings = options.settings;
    this.resolveProvider = options.providers ?? ((name) => openSandboxProvider(name));
    this.endpoints = new SandboxEndpoints((name) => this.provider(name), { agents: new AgentPool() });
  }

  /** The provider named `name` (opened once per process). `INVALID_INPUT` for an unknown name. */
  provider(name: string): SandboxProvider {
    let provider = this.providers.get(name);
    if (provider === undefined) {
      provider = this.resolveProvider(name);
      this.providers.set(name, provider);
    }
    return provider;
  }

  /** A recorder of the steps of one recovery, upgrade, creation or sweep of run `runId`. */
  recorder(runId: string, kind: string): StepRecorder {
    return new StepRecorder(this.meta, this.events, runId, kind);
  }

  /**
   * Makes a ready sandbox for a deployment: create, restore the checkpoint, run setup, validate
   * runtime and workspace, each a recorded step. On any failure the new sandbox is destroyed and
   * the error rethrown; nothing about the run changes (committing it is the caller's step).
   */
  async prepare(input: PrepareInput): Promise<SandboxHandle> {
    const { recorder, spec, snapshots } = input;
    const provider = this.provider(spec.provider);
    const created = await recorder.step(
      'create_sandbox',
      () =>
        provider.create({
          ...(spec.image === null ? {} : { image: spec.image }),
          ...(spec.limits ? { limits: spec.limits } : {}),
          env: { ...spec.env },
          labels: {
            [input.purpose === 'run' ? RUN_LABEL : COPY_LABEL]: input.runId,
            'holdfast.deployment': input.deploymentId.slice(0, 16),
          },
        }),
      (h) => ({ sandbox: h.id, provider: h.provider, deploymentId: input.deploymentId }),
    );
    try {
      const sandbox = deploymentHandle(created, spec);
      if (sandbox.workspaceRoot !== created.workspaceRoot) {
        await runSetupCommand(created, {
          argv: ['mkdir', '-p', sandbox.workspaceRoot],
          timeoutMs: this.settings.setupTimeoutMs,
          what: 'creating the workspace root',
        });
      }
      const { checkpoint } = input;
      if (checkpoint !== undefined) {
        const receipt = await recorder.step(
          'restore',
          () =>
            this.endpoints.restore(snapshots, sandbox, {
              workspace: input.workspaceName,
              checkpoint: checkpoint.id,
              replace: true,
            }),
          // The precision lost (whole-second tools) is in the run's events, not only in a log line.
          (r) => ({
            checkpointId: r.checkpointId,
            files: r.files,
            bytes: r.bytes,
            ...(r.mtimePrecisionMs === 1 ? {} : { mtimePrecisionMs: r.mtimePrecisionMs, mtimesRounded: r.mtimesRounded }),
          }),
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
          () => installBundle(this.endpoints, snapshots, sandbox, { spec }),
          (r) => (r === null ? {} : { rootTree: r.receipt.rootTree, files: r.receipt.files, bytes: r.receipt.bytes, dir: r.dir }),
        );
      }
      await recorder.step('setup', async () => {
        for (const [i, argv] of spec.setup.entries()) {
          await runSetupCommand(sandbox, { argv, timeoutMs: this.settings.setupTimeoutMs, what: `setup command ${i + 1}` });
        }
      });
      await recorder.step('validate', async () => {
        const check = spec.validate ?? ['sh', '-c', 'test -d "$1" && test -w "$1"', 'validate', sandbox.workspaceRoot];
        await runSetupCommand(sandbox, { argv: check, timeoutMs: this.settings.setupTimeoutMs, what: 'validation' });
      });
      return sandbox;
    } catch (error) {
      await recorder.step('discard_sandbox', () => this.stop(created.provider, created.id)).catch(() => undefined);
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
  async removeStrays(run: Run, deployments: readonly Deployment[], recorder: StepRecorder): Promise<void> {
    const providers = new Set(deployments.map((d) => d.spec.provider));
    for (const name of providers) {
      const strays = (await this.provider(name).list()).filter((s) => s.labels[RUN_LABEL] === run.id && s.id !== run.sandbox?.id);
      if (strays.length === 0) continue;
      await recorder
        .step(
          'remove_strays',
          async () => {
            for (const stray of strays) await this.stop(name, stray.id);
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
  async stop(providerName: string, id: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new HoldfastError('TIMEOUT', `stopping sandbox ${id} took longer than ${this.settings.stopTimeoutMs} ms`, {
              data: { sandbox: id },
            }),
          ),
        this.settings.stopTimeoutMs,
      );
    });
    this.forget({ provider: providerName, id });
    try {
      await Promise.race([this.provider(providerName).destroy(id), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records that this process created `sandbox` for a run: it is `cold` until its next complete attach. */
  created(sandbox: SandboxRef): void {
    this.attachments.set(sandboxKey(sandbox), { env: {}, cold: true });
  }

  /**
   * How the extensions' next attach of `sandbox` starts: `cold` when this process created it and
   * has not attached it since, `warm` when it was found alive (made by an earlier attach here,
   * or by another process or an earlier life of this one).
   */
  start(sandbox: SandboxRef): 'cold' | 'warm' {
    return this.attachments.get(sandboxKey(sandbox))?.cold === true ? 'cold' : 'warm';
  }

  /** Records a complete attach of `sandbox`: `env` replaces what its commands got so far, and it is warm from now on. */
  attached(sandbox: SandboxRef, env: Readonly<Record<string, string>>): void {
    this.attachments.set(sandboxKey(sandbox), { env: Object.freeze({ ...env }), cold: false });
  }

  /** The extensions' environment of `sandbox`'s commands, from its last attach here (empty before one). */
  envOf(sandbox: SandboxRef): Readonly<Record<string, string>> {
    return this.attachments.get(sandboxKey(sandbox))?.env ?? EMPTY_ENV;
  }

  /** Forgets what this process keeps about a sandbox that is being stopped (its workspace endpoint, its attach). */
  forget(sandbox: SandboxRef): void {
    this.endpoints.forget(sandbox.provider, sandbox.id);
    this.attachments.delete(sandboxKey(sandbox));
  }

  /** Closes what it keeps open (pooled agent connections). */
  close(): Promise<void> {
    return this.endpoints.close();
  }
}

const EMPTY_ENV: Readonly<Record<string, string>> = Object.freeze({});

function sandboxKey(sandbox: SandboxRef): string {
  return `${sandbox.provider}\0${sandbox.id}`;
}

/**
 * Times the steps of one recovery, upgrade or creation and records each as a run event
 * (`kind`, `step`, ok|failed, duration, error), so a run's history shows where time went and
 * where it failed.
 */
export class StepRecorder {
  constructor(
    private readonly meta: MetadataStore,
    private readonly events: RunEvents,
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
    this.events.log({
      event: 'step',
      level: status === 'ok' ? 'info' : 'warn',
      msg: `${this.kind} ${step} ${status}`,
      runId: this.runId,
      kind: this.kind,
      step,
      status,
      durationMs: Math.round(durationMs),
    });
    await this.meta.turns
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

/** Input of {@link SandboxLifecycle.prepare}. */
export interface PrepareInput {
  readonly recorder: StepRecorder;
  /** The snapshot service of the run's tenant (restores and bundle installs read through it). */
  readonly snapshots: Snapshots;
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
