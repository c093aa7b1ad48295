/**
 * `runs/`: durable runs: turns, leases and fencing, the `RunSession` lifecycle, the
 * `RunExtension` port, periodic checkpoints, the drain; `runs/sandbox/` holds the sandbox
 * steps of a run and the stray sweep.
 */
import { resolveIdOrPrefix } from '../core/id-prefix.js';
import { checkedArgv } from '../deployments/deployment-spec.js';
import { type Deployment, Deployments } from '../deployments/deployments.js';
import { ConflictError, errorToJson, HoldfastError, InputError, NotFoundError } from '../errors.js';
import type { Checkpoint, CheckpointReason, Run, RunEvent, Turn } from '../metadata/metadata-store.js';
import { parseRunBindings, type RunBindings, type RunBindingsInput } from '../model/run-bindings.js';
import type { TenantScope } from '../model/tenants.js';
import { runWorkspaceName } from '../model/workspace-names.js';
import type { RunResult, SandboxHandle } from '../sandbox/sandbox-provider.js';
import { type CheckpointMeta, type CheckpointNote, checkedCheckpointNote } from '../snapshot/checkpoint-note.js';
import type { RestoreReceipt } from '../snapshot/restore/restore.js';
import type { Principal } from '../tenants/folder-access.js';
import { type CreatedToken, issueRunToken } from '../tenants/tokens.js';
import { ExtensionSteps } from './extension-steps.js';
import type { RunHost } from './run-host.js';
import { RunSession } from './run-session.js';
import { deploymentHandle, type StepRecorder } from './sandbox/sandbox-lifecycle.js';
import { executeTurn, type TurnBody, type TurnOptions, type TurnOutcome } from './turn.js';

export type { TurnBody, TurnContext, TurnOptions, TurnOutcome } from './turn.js';

/** A command run as one turn by {@link Runs.command}. */
export interface TurnCommand {
  readonly argv: readonly string[];
  /** Written to the command's stdin, then closed. */
  readonly stdin?: string | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly timeoutMs?: number | undefined;
  /** How long to wait for the previous turn; default 30 s. */
  readonly waitMs?: number | undefined;
  /** The label and metadata of the turn's checkpoint (see `checkedCheckpointNote`). */
  readonly checkpoint?: CheckpointNote | undefined;
}

/** Options of {@link Runs.end}. */
export interface EndRunOptions {
  /** Leave the run's sandbox running (nothing is saved); default false: save, then destroy it. */
  readonly keepSandbox?: boolean | undefined;
  /** How long to wait for a running turn before saving; default the run settings' turn wait. */
  readonly waitMs?: number | undefined;
}

/** Output each stream of a turn's command may produce; more stops the command (`LIMIT_EXCEEDED`). */
export const MAX_TURN_OUTPUT_BYTES = 4 * 1024 * 1024;
/** Default bound on a turn's command. */
const DEFAULT_COMMAND_TIMEOUT_MS = 10 * 60_000;

/**
 * Input of {@link Runs.create}: follow a channel (upgrades) or pin one deployment, and
 * optionally the owners of the collections the run is bound to (see `parseRunBindings`; a
 * `user` binding names a live user of the tenant by name, and is stored as that user's
 * immutable row id).
 */
export type CreateRunInput = (
  | { readonly channel: string; readonly deploymentId?: never }
  | { readonly deploymentId: string; readonly channel?: never }
) & { readonly bindings?: RunBindingsInput | undefined };

/**
 * Input of {@link Runs.fork}: the checkpoint to start from and, optionally, what the new run
 * follows (default: the source run's channel or deployment), its bindings, and the label and
 * metadata of its first checkpoint.
 */
export interface ForkRunInput {
  readonly fromCheckpoint: string;
  readonly channel?: string | undefined;
  readonly deploymentId?: string | undefined;
  readonly bindings?: RunBindingsInput | undefined;
  readonly label?: string | undefined;
  readonly meta?: CheckpointMeta | undefined;
}

/**
 * Who asks {@link Runs.create} for a run. `caller` is the principal of the request (the HTTP
 * API passes it); absent, the caller is the operator in this process (the library, the CLI),
 * whom Holdfast trusts as it trusts its metadata store (DESIGN section 14): the operator holds
 * the store every collection is in, so it gives a user's consent by running the command.
 */
export interface CreateRunOptions {
  readonly caller?: Principal | undefined;
}

/**
 * A run just created. `runToken` is the secret of its run token when it has bindings, shown
 * here once (only its hash is stored); `null` for a run bound to nothing. Whoever needs
 * another (a sandbox's environment) mints one with {@link Runs.issueRunToken}.
 */
export type CreatedRun = Run & { readonly runToken: string | null };

/**
 * Durable runs of one tenant (DESIGN section 9): a run's turns execute in its sandbox and
 * complete only once their checkpoint is the ready, fenced head; a missing sandbox is rebuilt
 * from that head; channel upgrades move the run between deployments. Another tenant's ids
 * answer `NOT_FOUND`.
 */
export class Runs {
  readonly deployments: Deployments;

  constructor(
    private readonly host: RunHost,
    readonly tenant: TenantScope,
  ) {
    this.deployments = new Deployments(host.meta, tenant, (name) => host.sandboxes.provider(name));
  }

  /**
   * Creates a run and its workspace on a channel's active deployment or on a pinned one; a
   * run with bindings gets a run token in the same transaction as its row.
   *
   * A run bound to a user reads and writes that user's private collection, so binding one
   * needs the user's consent (DESIGN section 14): the operator (no `options.caller`) gives it,
   * or the request is made with a token of that very user. Any other caller binding a user is
   * `FORBIDDEN` (`data.field` `bindings.user`) before the user is even looked up, so the answer
   * says nothing about who exists: another user's token, and every service token, admin tokens
   * included (an admin manages tokens and tenants, never a user's files). A user token binding
   * shared collections must be a member's: a viewer's run token would write what the viewer
   * may only read (`FORBIDDEN`, `data.field` `bindings.<scope>`). The operator naming no live
   * user: `NOT_FOUND`. Nothing is created and no token minted on any refusal.
   */
  async create(input: CreateRunInput, options: CreateRunOptions = {}): Promise<CreatedRun> {
    if (typeof input !== 'object' || input === null || (input.channel === undefined) === (input.deploymentId === undefined)) {
      throw new InputError('INVALID_INPUT', 'a run needs exactly one of channel and deploymentId');
    }
    const parsed = parseRunBindings(input.bindings);
    if (parsed !== undefined) for (const extension of this.host.extensions) extension.refuseBindings?.(parsed);
    const bindings = parsed?.user === undefined ? parsed : { ...parsed, user: await this.consentingUser(parsed, options.caller) };
    const deploymentId =
      input.channel === undefined
        ? (await this.deployments.get(input.deploymentId)).id
        : (await this.deployments.channel(input.channel)).deploymentId;
    const id = crypto.randomUUID();
    const workspace = await this.host.snapshotsFor(this.tenant.name).workspace(runWorkspaceName(id), true);
    return this.host.meta.transaction(async (tx) => {
      const run = await tx.runs.create({
        id,
        tenantId: this.tenant.id,
        workspaceId: workspace.id,
        channel: input.channel ?? null,
        deploymentId,
        bindings: bindings ?? null,
      });
      const runToken = bindings === undefined ? null : (await issueRunToken(tx, this.tenant, run.id)).token;
      return { ...run, runToken };
    });
  }

  /**
   * A new run whose workspace starts from checkpoint `input.fromCheckpoint` (an id, unique
   * prefix or `latest` of this tenant, in any workspace; another tenant's answer `NOT_FOUND`,
   * as if absent), with no byte copied: the run's first checkpoint shares the source's tree
   * (see `Snapshots.forkInto`), and its first turn restores it into a new sandbox. The run
   * follows `channel` or pins `deploymentId` when given; else, forking a run's checkpoint, it
   * takes that run's channel (or pinned deployment); a checkpoint of no run needs one of them
   * (`INVALID_INPUT`). Bindings follow the rules of {@link create} (they are never copied from
   * the source run). `label` and `meta` go on the fork's first checkpoint. Bad input, an
   * unready checkpoint or a refused binding create nothing; a source that retention forgets
   * while the fork is made fails it with `NOT_FOUND` and leaves the new run ended.
   */
  async fork(input: ForkRunInput, options: CreateRunOptions = {}): Promise<CreatedRun & { readonly checkpoint: Checkpoint }> {
    if (typeof input !== 'object' || input === null || typeof input.fromCheckpoint !== 'string') {
      throw new InputError('INVALID_INPUT', 'a fork needs fromCheckpoint: the checkpoint to start from', {
        data: { field: 'fromCheckpoint' },
      });
    }
    if (input.channel !== undefined && input.deploymentId !== undefined) {
      throw new InputError('INVALID_INPUT', 'a fork takes at most one of channel and deploymentId');
    }
    const note = checkedCheckpointNote({ label: input.label, meta: input.meta });
    const snapshots = this.host.snapshotsFor(this.tenant.name);
    const source = await snapshots.forkSource(input.fromCheckpoint);
    const follow = input.channel !== undefined || input.deploymentId !== undefined ? input : await this.followOf(source);
    const bindings = input.bindings === undefined ? {} : { bindings: input.bindings };
    const run = await this.create(
      follow.channel !== undefined
        ? { channel: follow.channel, ...bindings }
        : { deploymentId: follow.deploymentId as string, ...bindings },
      options,
    );
    const workspace = await this.host.meta.workspaces.get(run.workspaceId);
    try {
      return { ...run, checkpoint: await snapshots.forkInto(workspace, source, note) };
    } catch (error) {
      // The source went away between the checks and the fork (retention): the new run, still empty, takes no turns.
      await this.host.meta.runs.end(run.id).catch(() => undefined);
      throw error;
    }
  }

  /** What a fork of `source` follows by default: the channel (or pinned deployment) of the run whose checkpoint it is. */
  private async followOf(source: Checkpoint): Promise<{ channel?: string; deploymentId?: string }> {
    const run = await this.runOf(source, 'name the channel or deploymentId the fork runs on');
    return run.channel === null ? { deploymentId: run.deploymentId } : { channel: run.channel };
  }

  /** The run of this tenant whose workspace holds `checkpoint`; `INVALID_INPUT` (saying `what` to do) for a workspace of no run. */
  private async runOf(checkpoint: Checkpoint, what: string): Promise<Run> {
    const workspace = await this.host.meta.workspaces.get(checkpoint.workspaceId);
    const runId = workspace.name.startsWith(RUN_WORKSPACE_PREFIX) ? workspace.name.slice(RUN_WORKSPACE_PREFIX.length) : undefined;
    const run = runId === undefined ? undefined : await this.host.meta.runs.find(this.tenant.id, runId);
    if (run === undefined || run.workspaceId !== workspace.id) {
      throw new InputError('INVALID_INPUT', `checkpoint ${checkpoint.id} is of workspace ${workspace.name}, not of a run: ${what}`, {
        data: { field: 'checkpoint', checkpoint: checkpoint.id },
      });
    }
    return run;
  }

  /**
   * {@link Runs.restore} by checkpoint alone: `checkpointId` (an id, unique prefix or `latest`
   * of this tenant; another tenant's answer `NOT_FOUND`) names its run, whose deployment the
   * new sandbox gets. A checkpoint of a workspace that is no run's is `INVALID_INPUT` (restore
   * it into a directory with `Snapshots.restore` instead).
   */
  async restoreCheckpoint(checkpointId: string): ReturnType<Runs['restore']> {
    const checkpoint = await this.host.snapshotsFor(this.tenant.name).forkSource(checkpointId);
    const run = await this.runOf(checkpoint, 'restore it into a directory (holdfast restore) instead');
    return this.restore(run.id, { checkpointId: checkpoint.id });
  }

  /**
   * The row id of the user `bindings.user` names, once its binding is consented to (see
   * {@link create}): a live user of this tenant, and `caller` the operator or that user.
   */
  private async consentingUser(bindings: RunBindings, caller: Principal | undefined): Promise<string> {
    const name = bindings.user as string;
    if (caller !== undefined && caller.kind !== 'user') throw noConsent('bindings.user', name);
    if (caller?.kind === 'user' && caller.role !== 'member') {
      const shared = SHARED_SCOPES.find((scope) => bindings[scope] !== undefined);
      if (shared !== undefined) throw viewerBinding(shared);
    }
    const user = await this.host.meta.users.findActive(this.tenant.id, name);
    if (caller !== undefined && (user === undefined || user.id !== caller.userId || caller.tenantId !== this.tenant.id)) {
      throw noConsent('bindings.user', name);
    }
    if (user === undefined) {
      throw new NotFoundError(`bindings.user: no live user ${name} in this tenant (holdfast user add)`, {
        data: { field: 'bindings.user', user: name },
      });
    }
    return user.id;
  }

  /**
   * `run` as people see it: its `bindings.user` (stored as the user's row id) replaced by that
   * user's name, live or revoked (the HTTP answers and the CLI show names; a user row that no
   * longer exists leaves the id).
   */
  async named<R extends Run>(run: R): Promise<R> {
    const userId = run.bindings?.user;
    if (userId === undefined || run.bindings === null) return run;
    const user = await this.host.meta.users.find(this.tenant.id, userId);
    return user === undefined ? run : { ...run, bindings: { ...run.bindings, user: user.name } };
  }

  /**
   * Ends a run (idempotent: an ended run keeps its first end): it takes no more turns,
   * upgrades or checkpoints (`CONFLICT`), and its run tokens reach nothing from now on (404
   * everywhere). Its rows and checkpoints stay.
   *
   * A run with a sandbox is ended under its lease (waiting up to `waitMs`, default the turn
   * wait, for a running turn to finish): the extensions' final saves and a `final` checkpoint
   * of the live sandbox come first, then the sandbox is destroyed and forgotten (steps of kind
   * `end` in the run's events), then the run is ended. A failed save rejects with its error and
   * leaves the run active with its sandbox, for a retry. `keepSandbox` ends the run at once and
   * leaves the sandbox as it is (for someone who still needs it; `holdfast sandbox destroy`
   * removes it later).
   */
  async end(id: string, options: EndRunOptions = {}): Promise<Run> {
    const run = await this.get(id);
    if (run.endedAt !== null || run.sandbox === null || options.keepSandbox === true) return this.host.meta.runs.end(run.id);
    const session = await RunSession.claim(this.host, run.id, {
      waitMs: options.waitMs ?? this.host.settings.turnWaitMs,
      tenant: this.tenant,
    });
    try {
      const recorder = this.host.sandboxes.recorder(run.id, 'end');
      const ready = await session.findSandbox();
      if (ready !== undefined) await recorder.step('save', () => session.save('shutdown', 'final'));
      const sandbox = session.run.sandbox;
      if (sandbox !== null) {
        await recorder.step(
          'destroy_sandbox',
          () => this.host.sandboxes.stop(sandbox.provider, sandbox.id),
          () => ({ sandbox: sandbox.id }),
        );
        await this.host.meta.runs.setSandbox(run.id, session.epoch, null, session.run.deploymentId);
      }
      return await this.host.meta.runs.end(run.id);
    } finally {
      await session.release();
    }
  }

  /**
   * Mints another run token for a bound, active run (for a sandbox's environment; every
   * token is stored hashed, so none can be read back). A run bound to nothing:
   * `INVALID_INPUT`; an ended run: `CONFLICT`.
   */
  async issueRunToken(id: string): Promise<CreatedToken> {
    const run = await this.get(id);
    if (run.bindings === null) {
      throw new InputError('INVALID_INPUT', `run ${run.id} is bound to no collection, so it has no run token`, { data: { runId: run.id } });
    }
    if (run.endedAt !== null) throw ended(run.id);
    return issueRunToken(this.host.meta, this.tenant, run.id);
  }

  /**
   * A run of this tenant by exact id, by a unique prefix of at least 8 characters, or `latest`
   * (the tenant's most recently created run). Every method taking a run id resolves it here.
   * Another tenant's runs answer `NOT_FOUND` and are never listed among the candidates of an
   * ambiguous prefix (`CONFLICT`); a shorter prefix is `INVALID_INPUT`.
   */
  get(id: string): Promise<Run> {
    const { runs } = this.host.meta;
    return resolveIdOrPrefix(id, {
      kind: 'run',
      idOf: (r) => r.id,
      exact: (exact) => runs.find(this.tenant.id, exact),
      byPrefix: (prefix, limit) => runs.findByPrefix(this.tenant.id, prefix, limit),
      latest: () => runs.latest(this.tenant.id),
    });
  }

  /** The tenant's runs, newest first. */
  list(limit?: number): Promise<Run[]> {
    return this.host.meta.runs.list(this.tenant.id, limit);
  }

  /** A run's turns, newest first. */
  async turns(id: string, limit?: number): Promise<Turn[]> {
    return this.host.meta.turns.list((await this.get(id)).id, limit);
  }

  /** A run's recorded steps (recoveries, upgrades, lease changes) with timings, oldest first. */
  async events(id: string, limit?: number): Promise<RunEvent[]> {
    return this.host.meta.turns.listEvents((await this.get(id)).id, limit);
  }

  /** A run's checkpoints, newest first (failed ones included, with their errors). */
  async checkpoints(id: string, limit?: number): Promise<Checkpoint[]> {
    const run = await this.get(id);
    return this.host.meta.checkpoints.listByWorkspace(run.workspaceId, limit === undefined ? {} : { limit });
  }

  /**
   * Runs one turn: claims the run's lease (waiting up to 30 s for the previous turn), makes sure
   * its sandbox exists (recovering or upgrading it first), runs `body`, and completes only when
   * the turn's checkpoint is the ready head under this lease. A failed checkpoint fails the turn
   * with its error and leaves the head where it was.
   */
  async turn<T>(id: string, body: TurnBody<T>, options: TurnOptions<T> = {}): Promise<TurnOutcome<T>> {
    if (options.checkpoint !== undefined) checkedCheckpointNote(options.checkpoint);
    const run = await this.get(id);
    return this.withSession(run, options.waitMs, (session) => executeTurn(this.host, session, body, options));
  }

  /**
   * Runs one command as a turn (what the HTTP API's turns are): `argv` in the workspace root
   * (in the sandbox home for a deployment with `cwd: 'home'`), bounded by `timeoutMs` (default 10 min) and {@link MAX_TURN_OUTPUT_BYTES} of output per
   * stream. A non-zero exit still completes the turn; the exit code is stored with it. The
   * command gets the run extensions' environment under `env` (which wins on a shared name).
   */
  command(id: string, input: TurnCommand): Promise<TurnOutcome<RunResult>> {
    const argv = checkedArgv(input.argv, 'argv');
    return this.turn(
      id,
      ({ sandbox, deployment, signal }) =>
        sandbox.run(argv, {
          cwd: deployment.spec.cwd === 'home' ? sandbox.agentHome : sandbox.workspaceRoot,
          ...(input.stdin === undefined ? {} : { stdin: input.stdin }),
          ...(input.env === undefined ? {} : { env: { ...input.env } }),
          timeoutMs: input.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
          maxOutputBytes: MAX_TURN_OUTPUT_BYTES,
          signal,
        }),
      {
        ...(input.waitMs === undefined ? {} : { waitMs: input.waitMs }),
        ...(input.checkpoint === undefined ? {} : { checkpoint: checkedCheckpointNote(input.checkpoint) }),
        summarize: (r) => ({
          exitCode: r.code,
          signal: r.signal,
          timedOut: r.timedOut,
          stdoutBytes: r.stdout.length,
          stderrBytes: r.stderr.length,
        }),
      },
    );
  }

  /**
   * Moves a run to a deployment now (default: its channel's active one), whatever the policy:
   * save, create, restore, validate, commit; the old sandbox stays authoritative until the commit.
   */
  async upgrade(id: string, options: { deploymentId?: string; waitMs?: number } = {}): Promise<Run> {
    const run = await this.get(id);
    const target = options.deploymentId ?? (run.channel === null ? undefined : (await this.deployments.channel(run.channel)).deploymentId);
    if (target === undefined)
      throw new InputError('INVALID_INPUT', `run ${id} follows no channel: name the deploymentId to move it to`, { data: { runId: id } });
    const deployment = await this.deployments.get(target);
    return this.withSession(run, options.waitMs, async (session) => {
      const current = await session.ensureSandbox({ upgrade: false });
      if (session.claimed.deploymentId === deployment.id && current.run.deploymentId === deployment.id) return current.run;
      await session.upgrade(deployment);
      return (await session.attach()).run;
    });
  }

  /**
   * Checkpoints a run's sandbox now (reason `manual`), under its lease, with an optional
   * `label` and `meta` (checked before anything else: see `checkedCheckpointNote`).
   */
  async checkpoint(
    id: string,
    options: { reason?: CheckpointReason; waitMs?: number; label?: string | undefined; meta?: CheckpointMeta | undefined } = {},
  ): Promise<Checkpoint> {
    const note = checkedCheckpointNote({ label: options.label, meta: options.meta });
    const run = await this.get(id);
    return this.withSession(run, options.waitMs, async (session) => {
      await session.ensureSandbox({ upgrade: false });
      await session.attach();
      return (await session.save('manual', options.reason ?? 'manual', { note })).checkpoint;
    });
  }

  /**
   * Clears `release_recovery_required` after checking the provider: a sandbox that still exists
   * is destroyed first (an error there leaves the state as it was). Then the lease is free at a
   * new epoch and the next turn rebuilds the sandbox from the head.
   *
   * A run stuck because its extensions could not save the sandbox a dead owner left (reason
   * `work_folder_save_required`: that working copy may be the only copy of edits) is saved
   * again first; while that save fails the state stays and this rejects with `CONFLICT`
   * (reason `work_folder_save_required`, the save's error in `data.error`), unless
   * `discardUnsaved` says to destroy the sandbox anyway.
   */
  async resolveLease(id: string, options: { discardUnsaved?: boolean } = {}): Promise<Run> {
    const run = await this.get(id);
    if (run.lease.state !== 'release_recovery_required') return this.host.meta.runs.resolveRecovery(run.id);
    const recorder = this.host.sandboxes.recorder(run.id, 'lease');
    if (run.sandbox !== null) {
      const { provider, id: sandboxId } = run.sandbox;
      const handle = await recorder.step('check_provider', () => this.host.sandboxes.provider(provider).get(sandboxId));
      if (handle !== undefined && run.lease.error?.reason === 'work_folder_save_required' && options.discardUnsaved !== true) {
        await this.saveUnsaved(run, handle, recorder);
      }
      if (handle !== undefined) await recorder.step('destroy_sandbox', () => this.host.sandboxes.stop(provider, sandboxId));
    }
    return recorder.step('resolve', () => this.host.meta.runs.resolveRecovery(run.id));
  }

  /** The extensions' `takeover` save of a stuck run's surviving sandbox (see {@link resolveLease}). */
  private async saveUnsaved(run: Run, handle: SandboxHandle, recorder: StepRecorder): Promise<void> {
    const deployment = await this.deployments.get(run.deploymentId);
    const sandbox = deploymentHandle(handle, deployment.spec);
    const failed = await new ExtensionSteps(this.host).save({ tenant: this.tenant, run, sandbox, epoch: run.lease.epoch }, 'takeover');
    if (failed === undefined) return;
    await recorder.record('save_unsaved', 'failed', 0, { error: errorToJson(failed.error) });
    throw new ConflictError(
      'CONFLICT',
      `run ${run.id}: its sandbox ${handle.id} still holds work that could not be saved (${errorToJson(failed.error).code}); fix that and resolve again, or resolve with --discard-unsaved to destroy it anyway`,
      { data: { runId: run.id, reason: 'work_folder_save_required', sandbox: handle.id, error: errorToJson(failed.error) } },
    );
  }

  /**
   * Restores a checkpoint of the run (default: its head) into a new sandbox of the run's
   * deployment, with setup and validation, for inspection or forking. The run is not changed;
   * the caller owns (and destroys) the new sandbox.
   */
  async restore(
    id: string,
    options: { checkpointId?: string } = {},
  ): Promise<{ sandbox: SandboxHandle; deployment: Deployment; receipt: Pick<RestoreReceipt, 'checkpointId'> }> {
    const run = await this.get(id);
    const snapshots = this.host.snapshotsFor(this.tenant.name);
    const { checkpoint } = await snapshots.restorePoint(runWorkspaceName(run.id), options.checkpointId);
    const deployment = await this.deployments.get(run.deploymentId);
    const sandbox = await this.host.sandboxes.prepare({
      recorder: this.host.sandboxes.recorder(run.id, 'restore'),
      snapshots: this.host.snapshotsFor(this.tenant.name),
      runId: run.id,
      workspaceName: runWorkspaceName(run.id),
      deploymentId: deployment.id,
      spec: deployment.spec,
      checkpoint,
      purpose: 'copy',
    });
    return { sandbox, deployment, receipt: { checkpointId: checkpoint.id } };
  }

  /** Runs `fn` in a session over the run's lease (waiting up to `waitMs` for it), released after. */
  private async withSession<T>(run: Run, waitMs: number | undefined, fn: (session: RunSession) => Promise<T>): Promise<T> {
    const runId = run.id;
    if (run.endedAt !== null) throw ended(runId);
    if (this.host.inFlight.isDraining) {
      throw new HoldfastError('CANCELLED', 'this server is shutting down and takes no new turns; retry on another one', {
        data: { runId },
      });
    }
    const session = await RunSession.claim(this.host, runId, { waitMs: waitMs ?? this.host.settings.turnWaitMs, tenant: this.tenant });
    try {
      return await fn(session);
    } finally {
      await session.release();
    }
  }
}

/** How {@link runWorkspaceName} starts a run's workspace name. */
const RUN_WORKSPACE_PREFIX = runWorkspaceName('');

/** The collections every member of the tenant shares (a viewer only reads them). */
const SHARED_SCOPES = ['task', 'agent', 'project'] as const;

/** A user binding the caller may not make: `FORBIDDEN`, naming the field. */
function noConsent(field: string, user: string): HoldfastError {
  return new HoldfastError(
    'FORBIDDEN',
    `${field}: binding a run to user ${user} needs that user's consent: create the run with a token of that user (holdfast token create --user ${user})`,
    { data: { field } },
  );
}

/** A viewer's token binding a shared collection its run token would write: `FORBIDDEN`. */
function viewerBinding(scope: (typeof SHARED_SCOPES)[number]): HoldfastError {
  return new HoldfastError(
    'FORBIDDEN',
    `bindings.${scope}: a viewer's run may bind only the viewer's own user folder (its run token would write the ${scope} folder)`,
    { data: { field: `bindings.${scope}` } },
  );
}

function ended(runId: string): HoldfastError {
  return new ConflictError('CONFLICT', `run ${runId} has ended: create a new run`, { data: { runId, reason: 'ended' } });
}
