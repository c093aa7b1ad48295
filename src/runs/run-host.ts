import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { KeyedMutex } from '../core/keyed-mutex.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { SnapshotDeps } from '../snapshot/snapshot-deps.js';
import { Snapshots } from '../snapshot/snapshots.js';
import { InFlight } from './in-flight.js';
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

/**
 * What every tenant's runs service in one process shares, each role with its own owner: the
 * stores, the settings, this process's lease owner id and lease queue (`mutex`), the event bus
 * (`events`), the sandboxes (`sandboxes`, a {@link SandboxLifecycle}), what is in flight for the
 * shutdown drain (`inFlight`), the run extensions, and one snapshot service per tenant. It holds
 * no state of its own beyond that cache; the lifecycle of each run under a lease is
 * `RunSession`'s.
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
  /** The turns running and the sandboxes used in this process, and whether it drains. */
  readonly inFlight = new InFlight();
  /** The run extensions, in the order the lifecycle calls them. */
  readonly extensions: readonly RunExtension[];
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

  /** Closes what the host keeps open (the sandboxes' pooled agent connections). */
  close(): Promise<void> {
    return this.sandboxes.close();
  }
}
