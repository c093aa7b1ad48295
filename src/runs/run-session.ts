import { type Deployment, Deployments } from '../deployments/deployments.js';
import { errorToJson, HoldfastError, isHoldfastError } from '../errors.js';
import type { Checkpoint, CheckpointReason, MetadataTransaction, Run, Turn } from '../metadata/metadata-store.js';
import type { TenantScope } from '../model/tenants.js';
import { runWorkspaceName } from '../model/workspace-names.js';
import { viewOf } from '../sandbox/handle-views.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../snapshot/checkpoint/checkpoint.js';
import type { CheckpointNote } from '../snapshot/checkpoint-note.js';
import { ExtensionSteps } from './extension-steps.js';
import { acquireLease, type HeldLease, recoveryRequired } from './lease.js';
import type { RunSandboxContext, SaveMoment } from './run-extension.js';
import type { RunHost } from './run-host.js';
import { deploymentHandle, type StepRecorder } from './sandbox/sandbox-lifecycle.js';

/** A run with a live sandbox of its deployment. */
export interface ReadySandbox {
  readonly run: Run;
  /** Rooted at the deployment's workspace root; its commands get the run extensions' environment of their last attach. */
  readonly sandbox: SandboxHandle;
  readonly deployment: Deployment;
}

/** Options of {@link RunSession.checkpoint}. */
export interface SessionCheckpointOptions {
  readonly signal?: AbortSignal;
  /** The label and metadata of the checkpoint, already checked (`checkedCheckpointNote`). */
  readonly note?: CheckpointNote | undefined;
  /** Runs in the transaction that moves the head, after the lease fence (a turn completes there). */
  readonly onCommit?: (tx: MetadataTransaction, checkpoint: Checkpoint) => Promise<void>;
}

/**
 * The lifecycle of one run under one held lease: makes sure the run has a live sandbox (after a
 * takeover the dead owner's sandbox is stopped first; a missing one is rebuilt from the head; an
 * `automatic` upgrade happens lazily), attaches the host's run extensions to it, upgrades it,
 * saves it (extensions, then the workspace checkpoint fenced by the lease), and releases the
 * lease. Every write it makes carries the lease's epoch. One session per held lease; nothing
 * else changes the run's sandbox while it lives.
 *
 * Extensions save only a sandbox they may keep something in: one this process created and has
 * not attached yet holds nothing of theirs, so its saves skip them.
 */
export class RunSession {
  private current: Run;
  private ready: ReadySandbox | undefined;
  /** Whether a takeover the claim made is still to be completed (the dead owner's sandbox stopped). */
  private takeoverPending: boolean;
  private readonly deployments: Deployments;
  private readonly extensions: ExtensionSteps;
  /** The sandbox this session attached the extensions to, detached on release. */
  private attachedTo: SandboxHandle | undefined;

  /** A session over `lease` (held by this process) of a run of `tenant`. */
  constructor(
    private readonly host: RunHost,
    readonly tenant: TenantScope,
    private readonly lease: HeldLease,
  ) {
    this.current = lease.run;
    this.takeoverPending = lease.run.lease.takenFrom !== null;
    this.deployments = new Deployments(host.meta, tenant);
    this.extensions = new ExtensionSteps(host);
  }

  /**
   * Claims run `runId`'s lease (see `acquireLease`: waits up to `waitMs`; `CONFLICT` when busy
   * or in `release_recovery_required`) and opens a session over it. Without `tenant`, the
   * run's own tenant is read.
   */
  static async claim(host: RunHost, runId: string, options: { waitMs: number; tenant?: TenantScope }): Promise<RunSession> {
    const lease = await acquireLease(host, runId, options.waitMs);
    try {
      const tenant = options.tenant ?? (await host.meta.tenants.get(lease.run.tenantId));
      return new RunSession(host, tenant, lease);
    } catch (error) {
      await lease.release();
      throw error;
    }
  }

  /** The run as this session last wrote or read it. */
  get run(): Run {
    return this.current;
  }

  /** The run as the claim returned it (its sandbox and deployment before this session changed them). */
  get claimed(): Run {
    return this.lease.run;
  }

  /** The epoch of the held lease. */
  get epoch(): number {
    return this.lease.epoch;
  }

  /** Aborted with `STALE_LEASE` when the lease is lost. */
  get lost(): AbortSignal {
    return this.lease.lost;
  }

  /** The extensions' `detach` of the sandbox this session attached (if any), then stops the heartbeat and frees the lease (never throws); the session is done. */
  async release(): Promise<void> {
    const attached = this.attachedTo;
    this.attachedTo = undefined;
    if (attached !== undefined) await this.extensions.detach(this.context(attached)).catch(() => undefined);
    return this.lease.release();
  }

  /**
   * Makes sure the run has a live sandbox: after a takeover the previous owner's sandbox is
   * stopped first (see {@link completeTakeover}); with `upgrade`, a move to the channel's active
   * deployment is attempted under the `automatic` policy (a failure keeps the old sandbox, and is
   * logged and recorded in the run's events as an `abandoned` step of kind `upgrade` naming the
   * target deployment and the error); a missing sandbox is rebuilt from the head checkpoint.
   */
  async ensureSandbox(options: { upgrade: boolean }): Promise<ReadySandbox> {
    if (this.takeoverPending) await this.completeTakeover();
    const current = await this.deployments.get(this.current.deploymentId);
    const target = options.upgrade ? await this.upgradeTarget(current) : current;
    const started = performance.now();
    const sandbox = await this.liveSandbox(current);
    if (sandbox === undefined) return this.rebuild([target, current], performance.now() - started);
    this.host.inFlight.touch(this.current.id, this.tenant);
    this.ready = { run: this.current, sandbox, deployment: current };
    if (target.id === current.id) return this.ready;
    try {
      return await this.upgrade(target);
    } catch (error) {
      if (isHoldfastError(error, 'STALE_LEASE')) throw error;
      await this.host.sandboxes.recorder(this.current.id, 'upgrade').record('abandoned', 'failed', 0, {
        from: current.id,
        to: target.id,
        error: errorToJson(error),
      });
      this.host.events.log({
        event: 'upgrade_failed',
        level: 'warn',
        msg: 'upgrade failed; the run stays on its deployment',
        runId: this.current.id,
        deploymentId: target.id,
        error,
      });
      return this.ready;
    }
  }

  /** The run's committed sandbox if it is alive, without recovering anything (the shutdown drain's view). */
  async findSandbox(): Promise<ReadySandbox | undefined> {
    const deployment = await this.deployments.get(this.current.deploymentId);
    const sandbox = await this.liveSandbox(deployment);
    this.ready = sandbox === undefined ? undefined : { run: this.current, sandbox, deployment };
    return this.ready;
  }

  /**
   * After a takeover (the claim's `run.lease.takenFrom` set; once per session): fails the dead owner's running turns,
   * stops the sandbox it left and forgets it (the next turn rebuilds from the head); an
   * uncertain stop marks the run `release_recovery_required` and rejects with its `CONFLICT`.
   */
  async completeTakeover(): Promise<Run> {
    const { host } = this;
    const run = this.current;
    if (!this.takeoverPending) return run;
    this.takeoverPending = false;
    const recorder = host.sandboxes.recorder(run.id, 'lease');
    await recorder.record('takeover', 'ok', 0, { from: run.lease.takenFrom, epoch: this.epoch });
    // The dead owner's running turns fail now (the next turn would fail them anyway, see startTurn).
    const lost = { code: 'STALE_LEASE', message: `owner ${run.lease.takenFrom} lost the run's lease before the turn completed` };
    await host.meta.turns.failBefore(run.id, this.epoch, lost).catch(() => undefined);
    if (run.sandbox !== null) {
      const { provider, id } = run.sandbox;
      await this.saveBeforeTakeover();
      try {
        await recorder.step(
          'stop_previous_sandbox',
          () => host.sandboxes.stop(provider, id),
          () => ({ sandbox: id }),
        );
      } catch (error) {
        throw await this.requireRecovery({ ...errorToJson(error), sandbox: id, provider });
      }
      this.current = await host.meta.runs.setSandbox(run.id, this.epoch, null, run.deploymentId);
    }
    return this.current;
  }

  /**
   * The extensions' `takeover` save of the dead owner's sandbox, when it is still alive. A
   * rejection leaves that sandbox running (its working copy may be the only copy of what failed
   * to save): a `lease keep_sandbox` event records why, the run is marked
   * `release_recovery_required` (reason `work_folder_save_required`) and this rejects with its
   * `CONFLICT`.
   */
  private async saveBeforeTakeover(): Promise<void> {
    const ref = this.current.sandbox;
    if (!this.extensions.any || ref === null) return;
    const sandbox = await this.liveSandbox(await this.deployments.get(this.current.deploymentId));
    if (sandbox === undefined) return;
    const failed = await this.saveExtensions('takeover', { sandbox });
    if (failed === undefined) return;
    // A sandbox gone meanwhile (destroyed behind the run's back) holds nothing to keep: the
    // takeover goes on and the next turn rebuilds from the head, as for one found gone.
    if ((await this.liveSandbox(await this.deployments.get(this.current.deploymentId))) === undefined) {
      await this.host.sandboxes.recorder(this.current.id, 'lease').record('takeover_save', 'failed', 0, {
        sandbox: ref.id,
        provider: ref.provider,
        reason: 'sandbox_gone',
        error: errorToJson(failed.error),
      });
      return;
    }
    // The run's events say why the sandbox outlives the takeover and what the operator does next.
    await this.host.sandboxes.recorder(this.current.id, 'lease').record('keep_sandbox', 'ok', 0, {
      sandbox: ref.id,
      provider: ref.provider,
      reason: 'work_folder_save_required',
      error: errorToJson(failed.error),
      resolve: `holdfast lease resolve ${this.current.id} (saves it again first; --discard-unsaved destroys it)`,
    });
    throw await this.requireRecovery({
      ...errorToJson(failed.error),
      sandbox: ref.id,
      provider: ref.provider,
      reason: 'work_folder_save_required',
    });
  }

  /**
   * Attaches the run extensions to the sandbox made sure of (see `RunExtension.attach`): `cold`
   * for one this process created since its last attach, `warm` for one found alive. Their
   * environment then reaches every command of the sandbox's handles. Rejects with the first
   * rejection (the sandbox stays the run's, and cold if it was).
   */
  async attach(signal?: AbortSignal): Promise<ReadySandbox> {
    const ready = this.requireReady();
    const start = this.host.sandboxes.start(ready.sandbox);
    this.attachedTo = ready.sandbox;
    const env = await this.extensions.attach(this.context(ready.sandbox, signal), start);
    this.host.sandboxes.attached(ready.sandbox, env);
    return ready;
  }

  /**
   * The extensions' saves of `moment` (see `RunExtension.save`), then the workspace checkpoint
   * with `reason`. A rejection on `periodic` is logged and the checkpoint still happens; on
   * `manual`, `upgrade` and `shutdown` it rejects the save before any checkpoint. `turn_end`
   * and `takeover` have rules of their own: see {@link saveExtensions}.
   */
  async save(
    moment: Exclude<SaveMoment, 'turn_end' | 'takeover'>,
    reason: CheckpointReason,
    options: { readonly signal?: AbortSignal; readonly note?: CheckpointNote | undefined } = {},
  ): Promise<CheckpointResult> {
    const failed = await this.saveExtensions(moment, options);
    if (failed !== undefined && moment !== 'periodic') throw failed.error;
    return this.checkpoint(reason, options);
  }

  /**
   * Only the extensions' saves of `moment` on `options.sandbox` (default: the one made sure of),
   * resolving with the first rejection instead of throwing it, for a caller that checkpoints
   * anyway (a turn's end) or decides otherwise (a takeover).
   */
  saveExtensions(
    moment: SaveMoment,
    options: { readonly sandbox?: SandboxHandle; readonly signal?: AbortSignal } = {},
  ): Promise<{ readonly error: unknown } | undefined> {
    const target = options.sandbox ?? this.requireReady().sandbox;
    if (!this.extensions.any || this.host.sandboxes.start(target) === 'cold') return Promise.resolve(undefined);
    return this.extensions.save(this.context(target, options.signal), moment);
  }

  /** A turn completed: the extensions' `boundary` (rejections logged, never thrown). */
  boundary(): Promise<void> {
    return this.extensions.boundary(this.context(this.requireReady().sandbox));
  }

  /**
   * Moves the run from its sandbox (made sure of by {@link ensureSandbox}) to one of `target`:
   * save from the old sandbox, create, restore that checkpoint, set up, validate, commit the
   * switch, and only then destroy the old sandbox. Until the commit the old sandbox stays the
   * run's; any failure (an extension's `upgrade` save among them) leaves it so for a retry. The
   * new sandbox is cold: the next {@link attach} attaches it.
   */
  async upgrade(target: Deployment): Promise<ReadySandbox> {
    const { host } = this;
    const old = this.requireReady();
    const recorder = host.sandboxes.recorder(this.current.id, 'upgrade');
    const saved = await recorder.step(
      'save',
      () => this.save('upgrade', 'upgrade'),
      (r) => ({ checkpointId: r.checkpoint.id, from: this.current.deploymentId, to: target.id }),
    );
    const sandbox = await this.prepareFor(recorder, target, saved.checkpoint);
    await this.commitSwitch(sandbox, target, recorder);
    await recorder
      .step(
        'destroy_old_sandbox',
        () => host.sandboxes.stop(old.sandbox.provider, old.sandbox.id),
        () => ({ sandbox: old.sandbox.id }),
      )
      .catch(() => undefined);
    return this.requireReady();
  }

  /**
   * Checkpoints the run's sandbox: the head moves only if the lease epoch is still current when
   * the checkpoint commits (`STALE_LEASE` otherwise, nothing written); `onCommit` runs in the
   * same transaction.
   */
  checkpoint(reason: CheckpointReason, options: SessionCheckpointOptions = {}): Promise<CheckpointResult> {
    const { sandbox } = this.requireReady();
    const runId = this.current.id;
    const { epoch } = this;
    return this.host.sandboxes.endpoints.checkpoint(this.host.snapshotsFor(this.tenant.name), sandbox, {
      workspace: runWorkspaceName(runId),
      reason,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(options.note?.label === undefined ? {} : { label: options.note.label }),
      ...(options.note?.meta === undefined ? {} : { meta: options.note.meta }),
      onCommit: async (tx, checkpoint) => {
        await tx.runs.fence(runId, epoch);
        await options.onCommit?.(tx, checkpoint);
      },
    });
  }

  /** Fails with `STALE_LEASE` at once when the lease is no longer current (nothing written). */
  fence(): Promise<void> {
    return this.host.meta.runs.fence(this.current.id, this.epoch);
  }

  /**
   * Counts and starts a turn of the run under this lease (`STALE_LEASE` for a lost one). First
   * fails every turn still `running` under an earlier epoch: its owner lost the lease (a
   * takeover) or released it without recording the end (the store was down when the turn
   * failed), and a run's turns are sequential, so none of them can complete any more.
   */
  async startTurn(): Promise<Turn> {
    const { host } = this;
    const runId = this.current.id;
    const error = { code: 'STALE_LEASE', message: `the turn was still running when epoch ${this.epoch} claimed the run's lease` };
    for (const orphan of await host.meta.turns.failBefore(runId, this.epoch, error)) {
      host.events.log({ event: 'turn_failed', level: 'warn', msg: 'turn left running failed', runId, turn: orphan.id, error });
    }
    const seq = await host.meta.runs.nextTurn(runId, this.epoch);
    const turn = await host.meta.turns.start({ runId, seq, epoch: this.epoch, owner: host.owner });
    host.events.log({ event: 'turn_started', level: 'info', msg: 'turn started', runId, turn: turn.id, seq, epoch: this.epoch });
    return turn;
  }

  private requireReady(): ReadySandbox {
    if (this.ready === undefined) {
      throw new HoldfastError('INTERNAL', `run ${this.current.id}: no sandbox was made sure of in this session before using it`, {
        data: { runId: this.current.id },
      });
    }
    return this.ready;
  }

  private async liveSandbox(deployment: Deployment): Promise<SandboxHandle | undefined> {
    const ref = this.current.sandbox;
    if (ref === null) return undefined;
    const handle = await this.host.sandboxes.provider(ref.provider).get(ref.id);
    return handle === undefined ? undefined : this.withEnv(deploymentHandle(handle, deployment.spec));
  }

  /** `handle` with the extensions' environment of its last attach in every command. */
  private withEnv(handle: SandboxHandle): SandboxHandle {
    return viewOf(handle, { env: () => this.host.sandboxes.envOf(handle) });
  }

  /** What an extension is told about `sandbox`; its signal fires on a lost lease or `signal`. */
  private context(sandbox: SandboxHandle, signal?: AbortSignal): RunSandboxContext {
    return {
      tenant: this.tenant,
      run: this.current,
      sandbox,
      epoch: this.epoch,
      signal: signal === undefined ? this.lost : AbortSignal.any([this.lost, signal]),
    };
  }

  private async upgradeTarget(current: Deployment): Promise<Deployment> {
    const { channel } = this.current;
    if (channel === null) return current;
    const found = await this.host.meta.deployments.findChannel(this.tenant.id, channel);
    if (found === undefined || found.deploymentId === current.id) return current;
    const next = await this.deployments.get(found.deploymentId);
    return next.spec.workspaceUpgradePolicy === 'automatic' ? next : current;
  }

  /** Marks the run `release_recovery_required` with `error` and returns the `CONFLICT` to reject with. */
  private async requireRecovery(error: Readonly<Record<string, unknown>>): Promise<Error> {
    const stuck = await this.host.meta.runs.requireRecovery(this.current.id, this.epoch, error);
    return recoveryRequired(stuck);
  }

  /** Creates a sandbox for the first of `candidates` that works, restores the head and commits it to the run. */
  private async rebuild(candidates: Deployment[], missingFor: number): Promise<ReadySandbox> {
    const { host } = this;
    const run = this.current;
    const workspace = await host.meta.workspaces.get(run.workspaceId);
    const head = workspace.headCheckpointId === null ? undefined : await host.meta.checkpoints.get(workspace.headCheckpointId);
    const recorder = host.sandboxes.recorder(run.id, run.sandbox === null && head === undefined ? 'create' : 'recovery');
    if (run.sandbox !== null) await recorder.record('detect_missing', 'ok', missingFor, { sandbox: run.sandbox.id });
    await host.sandboxes.removeStrays(run, candidates, recorder);
    const unique = candidates.filter((d, i) => candidates.findIndex((o) => o.id === d.id) === i);
    let lastError: unknown;
    for (const deployment of unique) {
      try {
        const sandbox = await this.prepareFor(recorder, deployment, head);
        await this.commitSwitch(sandbox, deployment, recorder);
        return this.requireReady();
      } catch (error) {
        if (isHoldfastError(error, 'STALE_LEASE')) throw error;
        lastError = error;
      }
    }
    throw lastError;
  }

  /** A ready sandbox of `deployment` for the run holding `checkpoint` (see {@link SandboxLifecycle.prepare}). */
  private prepareFor(recorder: StepRecorder, deployment: Deployment, checkpoint: Checkpoint | undefined): Promise<SandboxHandle> {
    const runId = this.current.id;
    return this.host.sandboxes.prepare({
      recorder,
      snapshots: this.host.snapshotsFor(this.tenant.name),
      runId,
      workspaceName: runWorkspaceName(runId),
      deploymentId: deployment.id,
      spec: deployment.spec,
      checkpoint,
      purpose: 'run',
    });
  }

  /** Points the run at its new sandbox (fenced); a failed commit discards the new sandbox. */
  private async commitSwitch(sandbox: SandboxHandle, deployment: Deployment, recorder: StepRecorder): Promise<void> {
    const { host } = this;
    try {
      this.current = await recorder.step('commit', () =>
        host.meta.runs.setSandbox(this.current.id, this.epoch, { provider: sandbox.provider, id: sandbox.id }, deployment.id),
      );
    } catch (error) {
      await host.sandboxes.stop(sandbox.provider, sandbox.id).catch(() => undefined);
      throw error;
    }
    host.sandboxes.created(sandbox);
    host.inFlight.touch(this.current.id, this.tenant);
    this.ready = { run: this.current, sandbox: this.withEnv(sandbox), deployment };
  }
}
