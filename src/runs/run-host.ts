import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { KeyedMutex } from '../core/keyed-mutex.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { TenantScope } from '../model/tenants.js';
import { AgentPool } from '../sandbox/agent/host/agent-pool.js';
import { SandboxEndpoints } from '../sandbox/endpoints/sandbox-endpoints.js';
import { openSandboxProvider } from '../sandbox/open-provider.js';
import type { SandboxProvider } from '../sandbox/sandbox-provider.js';
import type { SnapshotDeps } from '../snapshot/snapshot-deps.js';
import { Snapshots } from '../snapshot/snapshots.js';
import type { RunExtension } from './run-extension.js';
import type { RunLogEvent } from './run-log-event.js';

export type { RunLogEvent } from './run-log-event.js';

/** Timings and bounds of the runs layer; each can be overridden in {@link RunHostOptions}. */
export interface RunSettings {
  /** How long a claimed lease lives without a heartbeat. */
  readonly leaseTtlMs: number;
  /** Heartbeat period; default a third of the TTL. */
  readonly heartbeatMs: number;
  /** How long a turn waits for the previous one of the same run to release. */
  readonly turnWaitMs: number;
  /** Periodic checkpoint interval while a turn runs (0 disables). */
  readonly checkpointIntervalMs: number;
  /** Bound on each setup and validation command. */
  readonly setupTimeoutMs: number;
  /** Bound on stopping (destroying) a sandbox before the stop counts as uncertain. */
  readonly stopTimeoutMs: number;
  /** Graceful shutdown deadline. */
  readonly shutdownDeadlineMs: number;
  /** Idle sandboxes checkpointed at once during shutdown. */
  readonly shutdownConcurrency: number;
  /** Interval of the service's sweep for stray sandboxes (0 disables); see {@link STRAY_SWEEP_INTERVAL_MS}. */
  readonly straySweepIntervalMs: number;
}

/**
 * Default interval of the stray sweep. Strays come only from failures (a failed
 * `destroy_old_sandbox`, a crash between create and commit), so they are rare, but each one
 * holds provider resources (a cloud sandbox is billed while it lives) until it is removed; ten
 * minutes bounds that cost while a sweep costs one `list` per provider and one lease claim per
 * run that has strays.
 */
export const STRAY_SWEEP_INTERVAL_MS = 10 * 60_000;

/** Defaults of {@link RunSettings} (DESIGN section 9). */
export const DEFAULT_RUN_SETTINGS: RunSettings = Object.freeze({
  leaseTtlMs: 30_000,
  heartbeatMs: 10_000,
  turnWaitMs: 30_000,
  checkpointIntervalMs: 180_000,
  setupTimeoutMs: 10 * 60_000,
  stopTimeoutMs: 30_000,
  shutdownDeadlineMs: 30_000,
  shutdownConcurrency: 4,
  straySweepIntervalMs: STRAY_SWEEP_INTERVAL_MS,
});

/** Options of {@link RunHost}. */
export interface RunHostOptions {
  readonly meta: MetadataStore;
  readonly deps: SnapshotDeps;
  /** Turns a deployment's provider name into a provider; default: the shipped providers. */
  readonly providers?: (name: string) => SandboxProvider;
  /** This process's owner id in leases; default `host:pid:random`. */
  readonly owner?: string;
  readonly settings?: Partial<RunSettings>;
  /** Receives every {@link RunLogEvent}. */
  readonly onEvent?: (event: RunLogEvent) => void;
  /**
   * More steps of every run's lifecycle (work-folder sync), called in this order; see
   * {@link RunExtension}. A function gets the host first (an extension that reaches
   * sandboxes through `host.endpoints`).
   */
  readonly extensions?: readonly RunExtension[] | ((host: RunHost) => readonly RunExtension[]);
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

/** Names one sandbox of one provider. */
export interface SandboxRef {
  readonly provider: string;
  readonly id: string;
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
  /** The in-process queue of each run's lease (see `acquireLease`). */
  readonly mutex = new KeyedMutex();
  /** How runs reach their sandboxes' workspaces: probed once per sandbox, agent connections kept open between a run's operations. */
  readonly endpoints = new SandboxEndpoints((name) => this.provider(name), { agents: new AgentPool() });
  /** The run extensions, in the order the lifecycle calls them. */
  readonly extensions: readonly RunExtension[];
  private readonly active = new Map<string, ActiveTurn>();
  private readonly touched = new Map<string, TenantScope>();
  private draining = false;
  /** Per sandbox (`provider\0id`) this process made or attached: extensions' environment, and whether it is still cold. */
  private readonly attachments = new Map<string, { env: Readonly<Record<string, string>>; cold: boolean }>();
  private readonly providers = new Map<string, SandboxProvider>();
  private readonly resolveProvider: (name: string) => SandboxProvider;
  private readonly snapshots = new Map<string, Snapshots>();
  private readonly listeners = new Set<(event: RunLogEvent) => void>();

  constructor(options: RunHostOptions) {
    this.meta = options.meta;
    this.deps = options.deps;
    this.owner = options.owner ?? `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    const ttl = options.settings?.leaseTtlMs ?? DEFAULT_RUN_SETTINGS.leaseTtlMs;
    this.settings = Object.freeze({
      ...DEFAULT_RUN_SETTINGS,
      heartbeatMs: Math.max(1, Math.floor(ttl / 3)),
      ...options.settings,
    });
    this.resolveProvider = options.providers ?? ((name) => openSandboxProvider(name));
    const extensions = typeof options.extensions === 'function' ? options.extensions(this) : (options.extensions ?? []);
    this.extensions = Object.freeze([...extensions]);
    if (options.onEvent !== undefined) this.listeners.add(options.onEvent);
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

  /** Records that this process created `sandbox` for a run: it is `cold` until its next complete attach. */
  sandboxCreated(sandbox: SandboxRef): void {
    this.attachments.set(sandboxKey(sandbox), { env: {}, cold: true });
  }

  /**
   * How the extensions' next attach of `sandbox` starts: `cold` when this process created it and
   * has not attached it since, `warm` when it was found alive (made by an earlier attach here,
   * or by another process or an earlier life of this one).
   */
  sandboxStart(sandbox: SandboxRef): 'cold' | 'warm' {
    return this.attachments.get(sandboxKey(sandbox))?.cold === true ? 'cold' : 'warm';
  }

  /** Records a complete attach of `sandbox`: `env` replaces what its commands got so far, and it is warm from now on. */
  sandboxAttached(sandbox: SandboxRef, env: Readonly<Record<string, string>>): void {
    this.attachments.set(sandboxKey(sandbox), { env: Object.freeze({ ...env }), cold: false });
  }

  /** The extensions' environment of `sandbox`'s commands, from its last attach here (empty before one). */
  sandboxEnv(sandbox: SandboxRef): Readonly<Record<string, string>> {
    return this.attachments.get(sandboxKey(sandbox))?.env ?? EMPTY_ENV;
  }

  /** Forgets what this process keeps about a sandbox that is being stopped (its workspace endpoint, its attach). */
  forgetSandbox(sandbox: SandboxRef): void {
    this.endpoints.forget(sandbox.provider, sandbox.id);
    this.attachments.delete(sandboxKey(sandbox));
  }

  /** Closes what the host keeps open (pooled agent connections). */
  close(): Promise<void> {
    return this.endpoints.close();
  }

  /** Adds a listener for every {@link RunLogEvent}; returns its removal. */
  subscribe(listener: (event: RunLogEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reports an event to the listeners (never throws). */
  log(event: RunLogEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A failing listener must not fail a turn.
      }
    }
  }
}

const EMPTY_ENV: Readonly<Record<string, string>> = Object.freeze({});

function sandboxKey(sandbox: SandboxRef): string {
  return `${sandbox.provider}\0${sandbox.id}`;
}
