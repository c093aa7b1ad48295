import type { Run } from '../metadata/metadata-store.js';
import type { RunBindings } from '../model/run-bindings.js';
import type { TenantScope } from '../model/tenants.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';

/**
 * Which save of a run's lifecycle is happening. `periodic` runs on the checkpoint scheduler
 * while a turn executes; `turn_end` is the final flush when a turn's execution stops (the
 * turn completes only after it); `manual` is an explicit checkpoint; `upgrade` saves the old
 * sandbox before a switch; `shutdown` is the drain of an idle sandbox; `takeover` saves the
 * sandbox a dead owner left before it is stopped.
 */
export type SaveMoment = 'periodic' | 'turn_end' | 'manual' | 'upgrade' | 'shutdown' | 'takeover';

/** Every save but a periodic one is final: the sandbox may be left (or destroyed) after it. */
export function isFinalSave(moment: SaveMoment): boolean {
  return moment !== 'periodic';
}

/** What an extension is told about the sandbox it works on, always under the run's lease. */
export interface RunSandboxContext {
  readonly tenant: TenantScope;
  /** The run as the lease holder sees it (its `bindings` among the rest). */
  readonly run: Run;
  /** The run's sandbox (rooted at the deployment's workspace root; `agentHome` is the run's home). */
  readonly sandbox: SandboxHandle;
  /** The lease epoch the caller holds: every write the extension makes is fenced by it. */
  readonly epoch: number;
  /** Fires when the work must stop (lost lease, shutdown deadline, the caller's signal). */
  readonly signal?: AbortSignal;
}

/**
 * One more step of every run's lifecycle (work-folder sync is one). The lifecycle owner calls
 * these under the run's lease, never two at once for one run, in this order: `attach` once
 * the sandbox is ready, `save` before each of its workspace checkpoints, `boundary` after a
 * completed turn. Errors are `HoldfastError`s; what a rejection does is said per method.
 */
export interface RunExtension {
  /** Names the extension in step events (`kind`) and logs. */
  readonly name: string;

  /**
   * Optional: refuses bindings the extension could not honour, when a run is created (before
   * it exists). A throw (a `HoldfastError`) fails the creation and nothing is written.
   */
  refuseBindings?(bindings: RunBindings): void;

  /**
   * The sandbox is the run's and ready (created, restored from the head, set up and
   * validated, or found alive). `start` is `cold` for a sandbox created for this run since the
   * last attach (a recovery, the first turn, an upgrade) and `warm` for one that survived.
   * Resolves with environment variables every command the run executes in this sandbox gets
   * (merged over the deployment's). A rejection fails the operation that needed the sandbox
   * (the turn fails before it starts); the sandbox stays the run's.
   */
  attach(context: RunSandboxContext, start: 'cold' | 'warm'): Promise<Readonly<Record<string, string>>>;

  /**
   * Saves what the extension keeps in the sandbox, before the lifecycle's workspace
   * checkpoint of `moment`. A rejection on `periodic` is logged and the workspace checkpoint
   * still happens; on `turn_end` the workspace checkpoint still happens (reason `final`) and
   * the turn fails with this error; on `upgrade`, `manual` and `shutdown` the operation fails
   * and the sandbox is kept as it is; on `takeover` the previous sandbox is not stopped: the
   * run is marked `release_recovery_required` with this error (its working copy is the only
   * copy of what failed to save).
   */
  save(context: RunSandboxContext, moment: SaveMoment): Promise<void>;

  /**
   * A turn completed (its final save and checkpoint committed): the run's safe boundary,
   * where queued work that rewrites the sandbox (a refresh) may happen. A rejection is
   * logged; the turn stays completed.
   */
  boundary(context: RunSandboxContext): Promise<void>;

  /**
   * Optional: the session that attached the sandbox releases the run's lease (after its last
   * save). Stops what `attach` started that must not outlive the lease (the git relay). A
   * rejection is logged; the release goes on.
   */
  detach?(context: RunSandboxContext): Promise<void>;
}
