import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { KeyedMutex } from '../core/keyed-mutex.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { TenantScope } from '../model/tenants.js';
import type { SnapshotDeps } from '../snapshot/snapshot-deps.js';
import { Snapshots } from '../snapshot/snapshots.js';
import type { RunExtension } from './run-extension.js';
import type { RunEvents } from './run-log-event.js';
import type { RunSettings } from './run-settings.js';
import type { SandboxLifecycle } from './sandbox/sandbox-lifecycle.js';

/** What a {@link RunHost} is built from: finished objects, built in order by the composition root. */
export interface RunHostOptions {
  readonly meta: MetadataStore;
  readonly deps: SnapshotDeps;
  /** This process's owner id in leases; default `host:pid:random`. */
  readonly owner?: string;
  /** The settings in force (`resolveRunSettings`). */
  readonly settings: RunSettings;
  readonly events: RunEvents;
  /** The sandboxes of this process's runs (built on the same `events` and `settings`). */
  readonly sandboxes: SandboxLifecycle;
  /** More steps of every run's lifecycle (work-folder sync, repository checkpoints), called in this order; see {@link RunExtension}. */
  readonly extensions?: readonly RunExtension[];
}

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
 * What every tenant's runs service in one process shares: the stores, the providers, this
 * process's lease owner id, the local turn queue, and what graceful shutdown needs to know
 * (turns in flight, sandboxes this process has used). Its state changes only through its
 * methods; the lifecycle of each run under a lease is `RunSession`'s.
 */
export class RunHost {
  readonly meta: MetadataStore;
  readonly deps: SnapshotDeps;
  readonly owner: string;
  readonly settings: RunSettings;
  readonly events: RunEvents;
  readonly sandboxes: SandboxLifecycle;
  /** The in-process queue of each run's lease (see `acquireLease`). */
  readonly mutex = new KeyedMutex();
  /** The run extensions, in the order the lifecycle calls them. */
  readonly extensions: readonly RunExtension[];
  private readonly active = new Map<string, ActiveTurn>();
  private readonly touched = new Map<string, TenantScope>();
  private draining = false;
  private readonly snapshots = new Map<string, Snapshots>();

  constructor(options: RunHostOptions) {
    this.meta = options.meta;
    this.deps = options.deps;
    this.owner = options.owner ?? `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.settings = options.settings;
    this.events = options.events;
    this.sandboxes = options.sandboxes;
    this.extensions = Object.freeze([...(options.extensions ?? [])]);
  }

  /** The snapshot service of tenant `tenantName`. */
  snapshotsFor(tenantName: string): Snapshots {
    let snapshots = this.snapshots.get(tenantName);
    if (snapshots === undefined) {
      snapshots = new Snapshots(this.deps, tenantName);
      this.snapshots.set(tenantName, snapshots);
    }
    return snapshots;
  }

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

  /** Closes what the host keeps open (the sandboxes' pooled agent connections). */
  close(): Promise<void> {
    return this.sandboxes.close();
  }
}
