import type { TenantScope } from '../model/tenants.js';

/** A turn running in this process. */
export interface ActiveTurn {
  readonly runId: string;
  readonly abort: AbortController;
  readonly done: Promise<unknown>;
}

/** A run whose sandbox this process has used, with its tenant. */
export interface TouchedRun {
  readonly runId: string;
  readonly tenant: TenantScope;
}

/**
 * What this process has in flight: the turns running here (the shutdown drain waits for them and
 * aborts them at its deadline), the runs whose sandbox it used (the drain saves them), and
 * whether the drain has started (no new turn is accepted then).
 */
export class InFlight {
  private readonly active = new Map<string, ActiveTurn>();
  private readonly touched = new Map<string, TenantScope>();
  private draining = false;

  /**
   * Counts a turn as running in this process until `done` settles (the shutdown drain waits
   * for it, and aborts it through `abort` at the deadline). One turn per run at a time: the
   * run's lease guarantees it.
   */
  trackTurn(runId: string, abort: AbortController, done: Promise<unknown>): void {
    const turn: ActiveTurn = { runId, abort, done };
    this.active.set(runId, turn);
    const remove = () => {
      if (this.active.get(runId) === turn) this.active.delete(runId);
    };
    done.then(remove, remove);
  }

  /** The turns running in this process now. */
  activeTurns(): readonly ActiveTurn[] {
    return [...this.active.values()];
  }

  /** Remembers that this process used run `runId`'s sandbox, so the shutdown drain saves it. */
  touch(runId: string, tenant: TenantScope): void {
    this.touched.set(runId, tenant);
  }

  /** Runs whose sandbox this process has used and that run no turn here now. */
  idleRuns(): readonly TouchedRun[] {
    return [...this.touched.entries()].filter(([runId]) => !this.active.has(runId)).map(([runId, tenant]) => ({ runId, tenant }));
  }

  /** Starts the shutdown drain: from now on no new turn is accepted (idempotent). */
  startDrain(): void {
    this.draining = true;
  }

  /** Whether the shutdown drain has started. */
  get isDraining(): boolean {
    return this.draining;
  }
}
