/**
 * The composition root: `openHoldfast` builds, in order, the stores, the engine, the sandbox
 * providers, the run host with its extensions (work-folder sync, repository checkpoints) and
 * the per-tenant services, and hands back one {@link Holdfast}. Nothing below it builds
 * another layer's objects; `index.ts` only re-exports.
 */
import { randomBytes } from 'node:crypto';
import type { BlobStore } from './blob-store/blob-store.js';
import { openBlobStore } from './blob-store/open-blob-store.js';
import {
  type GitConfig,
  type HoldfastConfig,
  loadConfig,
  parseBlobsUrl,
  parseGitConfig,
  parseHoldfastConfig,
  parseMetaUrl,
} from './config.js';
import { Bundles } from './deployments/bundles.js';
import type { Deployments } from './deployments/deployments.js';
import { IntegrityError } from './errors.js';
import { Folders, type FoldersOptions } from './folders/folders.js';
import { FolderSync } from './folders/sandbox-sync.js';
import { GitBridge, type GitRelayBounds } from './git/git-bridge.js';
import { RepositoryCheckpoints } from './git/repository-checkpoints.js';
import { type MetadataStore, openMetadataStore } from './metadata/metadata-store.js';
import type { TenantScope } from './model/tenants.js';
import { checkTenantName, DEFAULT_TENANT } from './model/tenants.js';
import { ContentWorkers } from './objects/content-workers.js';
import { Checkpoints } from './runs/checkpoints.js';
import { type ShutdownReport, shutdownRuns } from './runs/drain.js';
import type { RunExtension } from './runs/run-extension.js';
import { RunHost } from './runs/run-host.js';
import { RunEvents, type RunLogEvent } from './runs/run-log-event.js';
import { type RunSettings, resolveRunSettings } from './runs/run-settings.js';
import { Runs } from './runs/runs.js';
import { SandboxLifecycle } from './runs/sandbox/sandbox-lifecycle.js';
import { StraySweeper, type StraySweepReport } from './runs/sandbox/stray-sweep.js';
import type { SandboxEndpoints } from './sandbox/endpoints/sandbox-endpoints.js';
import type { SandboxProvider } from './sandbox/sandbox-provider.js';
import type { CheckpointResult } from './snapshot/checkpoint/checkpoint.js';
import { GcSweeper, type GcSweepOutcome } from './snapshot/gc/gc-sweeper.js';
import type { RestoreReceipt } from './snapshot/restore/restore.js';
import type { SnapshotObserver } from './snapshot/snapshot-deps.js';
import type { Snapshots } from './snapshot/snapshots.js';
import { Tokens } from './tenants/tokens.js';
import { Users } from './tenants/users.js';
import { defaultCacheDir } from './workspace-fs/stat-cache.js';

/** What {@link openHoldfast} takes. Injected instances win over the configuration. */
export interface OpenHoldfastOptions {
  /** Defaults to {@link loadConfig} over `process.env` (or over `store`). */
  readonly config?: HoldfastConfig;
  /** Like the CLI's `--store DIR`: SQLite and local-disk blobs under DIR, whatever the environment says. */
  readonly store?: string;
  /**
   * The blob store: an instance to use as it is (tests, custom drivers; left open by `close`),
   * or a URL as in `HOLDFAST_BLOBS` (`file:./.holdfast/blobs`, `s3://bucket/prefix?endpoint=…`).
   */
  readonly blobs?: BlobStore | string;
  /** The metadata store: an instance (left open by `close`), or a URL as in `HOLDFAST_META` (`sqlite:./meta.db`, `postgres://…`). */
  readonly meta?: MetadataStore | string;
  /** Where stat caches live; default `$HOLDFAST_CACHE_DIR` or `~/.cache/holdfast`. */
  readonly cacheDir?: string;
  /** Tenant the snapshot service works in; default `default`. */
  readonly tenant?: string;
  /** Sandbox providers by name for deployments; default: the shipped `bwrap` and `local`. */
  readonly providers?: (name: string) => SandboxProvider;
  /** Lease, checkpoint-interval and shutdown timings of runs. */
  readonly runSettings?: Partial<RunSettings>;
  /** This process's lease owner id (default `host:pid:random`). */
  readonly owner?: string;
  /** Receives what the runs layer does (turns, recoveries, upgrades, lease changes). */
  readonly onRunEvent?: (event: RunLogEvent) => void;
  /**
   * More steps of every run's lifecycle, called in this order after the work-folder sync (see
   * `RunExtension`).
   */
  readonly runExtensions?: readonly RunExtension[];
  /** Limits of work folders (defaults: the issue's). */
  readonly folders?: FoldersOptions;
  /**
   * What the host may clone for repository bindings, over the configuration's `git`
   * (`HOLDFAST_GIT_*`); default: no host allowed. `allowPrivateAddresses` lets clones reach
   * loopback and private addresses (an internal git server; tests).
   */
  readonly git?: Partial<GitConfig>;
  /**
   * Bounds of the git relay of each run's sandbox (docs/repositories.md, "git from the
   * sandbox"): how long a request's headers may take, how long a connection may idle, one
   * request's whole deadline. Defaults are the product's; tests set small ones.
   */
  readonly gitRelay?: GitRelayBounds;
  /** Interval of the periodic GC sweep `startGcSweeps` starts (default 3 min; 0: never). */
  readonly gcSweepIntervalMs?: number;
  /** Receives the failure of a timer-driven GC sweep (the next tick tries again). */
  readonly onGcSweepError?: (error: unknown) => void;
}

/** The services of one tenant. */
export interface TenantServices {
  readonly tenant: TenantScope;
  readonly snapshots: Snapshots;
  readonly deployments: Deployments;
  /** Deployment bundles of the tenant: capture a directory, find a captured one. */
  readonly bundles: Bundles;
  readonly runs: Runs;
  readonly checkpoints: Checkpoints;
}

/** Result of {@link Holdfast.selfCheck}. */
export interface SelfCheck {
  readonly schemaVersion: number;
  readonly probeBytes: number;
  readonly durationMs: number;
}

/** An open Holdfast: the two storage ports, and the services later built on them. */
export interface Holdfast {
  readonly config: HoldfastConfig;
  readonly blobs: BlobStore;
  readonly meta: MetadataStore;
  /** Checkpoints, restores and browsing by workspace name. */
  readonly snapshots: Snapshots;
  /** The tenant this instance was opened for. */
  readonly tenant: TenantScope;
  /** Deployments and channels of the tenant. */
  readonly deployments: Deployments;
  /**
   * Deployment bundles of the tenant: `capture(dir)` stores a directory (strictly: any
   * credential refuses it) and returns the record `deployments.create({ bundle })` takes.
   */
  readonly bundles: Bundles;
  /** Durable runs and their turns. */
  readonly runs: Runs;
  /** Checkpoints by run, and browsing inside them. */
  readonly checkpoints: Checkpoints;
  /**
   * Checkpoints and restores of a sandbox's workspace by sandbox id, reaching the sandbox
   * through this instance's providers (the injected `providers` included), as runs do.
   */
  readonly sandboxes: {
    checkpoint(options: Parameters<SandboxEndpoints['checkpointSandbox']>[1]): Promise<CheckpointResult>;
    restore(options: Parameters<SandboxEndpoints['restoreSandbox']>[1]): Promise<RestoreReceipt>;
  };
  /** The sandbox provider named `name`: an injected one, or a shipped one. `INVALID_INPUT` for an unknown name. */
  provider(name: string): SandboxProvider;
  /** Work folders of every tenant (the caller passes the tenant id and does the authorization). */
  readonly folders: Folders;
  /**
   * The sync of runs' sandboxes with their bound collections (a step of every run's
   * lifecycle): per-sandbox save state and queued refreshes.
   */
  readonly folderSync: FolderSync;
  /** Repository checkpoints of runs' bound checkouts (a step of every run's lifecycle, after the folder sync): their state per run. */
  readonly repositories: RepositoryCheckpoints;
  /** API tokens of every tenant (created hashed; the CLI and the HTTP API both use this). */
  readonly tokens: Tokens;
  /** Users of every tenant (member or viewer, revocable), whom user tokens act for. */
  readonly users: Users;
  /** The services of another tenant (created on first use), sharing this instance's stores and leases. */
  forTenant(name: string): Promise<TenantServices>;
  /**
   * Graceful shutdown of runs: no new turns; idle sandboxes this process used are checkpointed
   * with bounded concurrency inside the deadline (default 30 s); what did not finish is reported.
   */
  shutdown(options?: { deadlineMs?: number; concurrency?: number }): Promise<ShutdownReport>;
  /**
   * One sweep for stray sandboxes now (after the one in flight, if any): sandboxes labelled for a
   * run that are not its committed sandbox are destroyed under the run's lease; runs another
   * owner holds, other installations' sandboxes and restored copies are left (see `sweepStrays`
   * in `runs/stray-sweep.ts`). Rejects only when the metadata store fails.
   */
  sweepStrays(): Promise<StraySweepReport>;
  /**
   * Starts the periodic stray sweep every `runSettings.straySweepIntervalMs` (default 10 min;
   * 0: never). Idempotent. `shutdown` and `close` stop it; `holdfast serve` starts it.
   */
  startStraySweeps(): void;
  /**
   * One GC sweep attempt now: runs GC over the whole store if this instance gets the sweep
   * claim in the metadata store (one replica at a time), else reports the holder.
   */
  sweepGarbage(): Promise<GcSweepOutcome>;
  /**
   * Starts the periodic GC sweep every `gcSweepIntervalMs` (default 3 min; 0: never), on one
   * replica at a time. Idempotent. `shutdown` and `close` stop it; `holdfast serve` starts it.
   */
  startGcSweeps(): void;
  /** Subscribes to what the runs layer does; returns the unsubscribe function. */
  onRunEvent(listener: (event: RunLogEvent) => void): () => void;
  /** Turns running in this process now. */
  activeTurns(): number;
  /** Writes, reads back and deletes a probe blob and reads the schema version. */
  selfCheck(): Promise<SelfCheck>;
  /** Closes what this instance opened (injected instances are left open). */
  close(): Promise<void>;
}

const PROBE_BYTES = 4096;

/** The engine's finished checkpoints and restores, as run events (what the service's metrics and logs read). */
function snapshotObserver(events: RunEvents): SnapshotObserver {
  return {
    checkpointFinished(event) {
      const ready = event.outcome === 'ready';
      const scan = ready ? event.scan : undefined;
      const missed = scan?.missed ?? 0;
      events.log({
        event: 'checkpoint_finished',
        level: ready && missed === 0 ? 'info' : 'warn',
        msg:
          missed > 0
            ? `checkpoint ${event.outcome}; its verifying scan found ${missed} directories the sandbox's watches missed`
            : `checkpoint ${event.outcome}`,
        reason: event.reason,
        outcome: event.outcome,
        durationMs: event.durationMs,
        files: ready ? event.files : 0,
        bytesNew: ready ? event.bytesNew : 0,
        code: ready ? null : event.code,
        scanMode: scan?.mode ?? null,
        watchMissed: missed,
      });
    },
    restoreFinished(event) {
      const ok = event.outcome === 'ok';
      events.log({
        event: 'restore_finished',
        level: ok ? 'info' : 'warn',
        msg: `restore ${event.outcome}`,
        outcome: event.outcome,
        durationMs: event.durationMs,
        bytesFetched: ok ? event.bytesFetched : 0,
        code: ok ? null : event.code,
      });
    },
  };
}

/**
 * The composition root: resolves the configuration, opens (and migrates) the metadata store
 * and opens the blob store. Drivers load lazily, so an embedded setup never loads the AWS SDK.
 */
export async function openHoldfast(options: OpenHoldfastOptions = {}): Promise<Holdfast> {
  const config = resolveConfig(options);
  const ownsMeta = typeof options.meta !== 'object';
  const ownsBlobs = typeof options.blobs !== 'object';
  const meta = ownsMeta ? await openMetadataStore(config.meta) : (options.meta as MetadataStore);
  let blobs: BlobStore;
  try {
    blobs = ownsBlobs ? await openBlobStore(config.blobs) : (options.blobs as BlobStore);
  } catch (error) {
    if (ownsMeta) await meta.close();
    throw error;
  }
  const workers = new ContentWorkers();
  const events = new RunEvents();
  if (options.onRunEvent !== undefined) events.subscribe(options.onRunEvent);
  const deps = { blobs, meta, workers, cacheDir: options.cacheDir ?? defaultCacheDir(), observer: snapshotObserver(events) };
  const folders = new Folders({ meta, blobs, workers }, options.folders);
  const settings = resolveRunSettings(options.runSettings);
  const sandboxes = new SandboxLifecycle({
    meta,
    events,
    settings,
    ...(options.providers === undefined ? {} : { providers: options.providers }),
  });
  const folderSync = new FolderSync({ ...deps, folders, endpoints: sandboxes.endpoints });
  folderSync.onSaveFailed(({ scope, code }) =>
    events.log({ event: 'work_folder_save_failed', level: 'warn', msg: 'work-folder save failed', scope, code }),
  );
  const repositories = new RepositoryCheckpoints({
    ...deps,
    endpoints: sandboxes.endpoints,
    ...(config.git === undefined ? {} : { git: config.git }),
  });
  const gitBridge = new GitBridge({
    meta,
    sandboxes,
    events,
    ...(config.git === undefined ? {} : { git: config.git }),
    ...(options.gitRelay === undefined ? {} : { relay: options.gitRelay }),
  });
  const host = new RunHost({
    meta,
    deps,
    settings,
    events,
    sandboxes,
    // Repositories after the folder sync, which makes the home directories (`repos/` among them).
    // The git bridge last: its PATH and git settings go over every other extension's.
    extensions: [folderSync, repositories, ...(options.runExtensions ?? []), gitBridge],
    ...(options.owner === undefined ? {} : { owner: options.owner }),
  });
  const strays = new StraySweeper(host);
  const garbage = new GcSweeper(deps, {
    ...(options.gcSweepIntervalMs === undefined ? {} : { intervalMs: options.gcSweepIntervalMs }),
    ...(options.owner === undefined ? {} : { holder: `gc:${options.owner}` }),
    ...(options.onGcSweepError === undefined ? {} : { onError: options.onGcSweepError }),
    onSweep: ({ outcome, durationMs, ...rest }) =>
      events.log({
        event: 'gc_sweep_finished',
        level: outcome === 'swept' ? 'info' : 'warn',
        msg: `gc sweep ${outcome}`,
        outcome,
        durationMs,
        bytesFreed: 'bytesFreed' in rest ? rest.bytesFreed : 0,
      }),
  });
  const tenants = new Map<string, Promise<TenantServices>>();
  const forTenant = (name: string): Promise<TenantServices> => {
    let services = tenants.get(name);
    if (services === undefined) {
      services = openTenant(host, name);
      services.catch(() => tenants.delete(name));
      tenants.set(name, services);
    }
    return services;
  };
  let own: TenantServices;
  try {
    own = await forTenant(options.tenant ?? DEFAULT_TENANT);
  } catch (error) {
    await workers.close();
    if (ownsBlobs) await blobs.close();
    if (ownsMeta) await meta.close();
    throw error;
  }
  return {
    config,
    blobs,
    meta,
    snapshots: own.snapshots,
    tenant: own.tenant,
    deployments: own.deployments,
    bundles: own.bundles,
    runs: own.runs,
    checkpoints: own.checkpoints,
    sandboxes: {
      checkpoint: (input) => sandboxes.endpoints.checkpointSandbox(own.snapshots, input),
      restore: (input) => sandboxes.endpoints.restoreSandbox(own.snapshots, input),
    },
    provider: (name) => sandboxes.provider(name),
    folders,
    folderSync,
    repositories,
    tokens: new Tokens(meta, async (name) => (await forTenant(name)).tenant),
    users: new Users(meta, async (name) => (await forTenant(name)).tenant),
    forTenant,
    async shutdown(shutdownOptions) {
      // The sweep in flight stops at its next run once shutdownRuns marks the host draining.
      const [report] = await Promise.all([shutdownRuns(host, shutdownOptions), strays.stop(), garbage.stop()]);
      return report;
    },
    sweepStrays: () => strays.runOnce(),
    startStraySweeps: () => strays.start(),
    sweepGarbage: () => garbage.runOnce(),
    startGcSweeps: () => garbage.start(),
    onRunEvent: (listener) => events.subscribe(listener),
    activeTurns: () => host.inFlight.activeTurns().length,
    async selfCheck() {
      const started = performance.now();
      const probe = randomBytes(PROBE_BYTES);
      const key = `probe/${probe.subarray(0, 16).toString('hex')}`;
      await blobs.put(key, probe, { expectedSize: PROBE_BYTES });
      try {
        const back = await blobs.get(key);
        if (!Buffer.from(back).equals(probe)) {
          throw new IntegrityError('INTEGRITY', `[${blobs.name}] the probe blob ${key} came back different from what was written`, {
            data: { key },
          });
        }
      } finally {
        await blobs.delete(key);
      }
      const schemaVersion = await meta.schemaVersion();
      return { schemaVersion, probeBytes: PROBE_BYTES, durationMs: Math.round(performance.now() - started) };
    },
    async close() {
      await strays.stop();
      await garbage.stop();
      await gitBridge.close();
      await host.close();
      await workers.close();
      if (ownsBlobs) await blobs.close();
      if (ownsMeta) await meta.close();
    },
  };
}

/** Finds (or creates) tenant `name` and builds its services. */
/**
 * The configuration `openHoldfast` starts from: `config` as given, else the environment (or
 * `store`), with store URLs given as strings taking the place of what they name. Bad URLs
 * throw `INVALID_INPUT` as the environment variables do.
 */
function resolveConfig(options: OpenHoldfastOptions): HoldfastConfig {
  const base =
    options.config === undefined
      ? loadConfig(options.store === undefined ? {} : { store: options.store })
      : parseHoldfastConfig(options.config);
  const meta = typeof options.meta === 'string' ? parseMetaUrl(options.meta, process.cwd(), 'meta') : base.meta;
  const blobs = typeof options.blobs === 'string' ? parseBlobsUrl(options.blobs, process.cwd(), process.env, 'blobs') : base.blobs;
  const git = options.git === undefined ? base.git : parseGitConfig({ ...base.git, ...options.git });
  return Object.freeze({ meta, blobs, ...(git === undefined ? {} : { git }) });
}

async function openTenant(host: RunHost, name: string): Promise<TenantServices> {
  checkTenantName(name);
  const snapshots = host.snapshotsFor(name);
  const tenant = await snapshots.tenant(true);
  const runs = new Runs(host, tenant);
  return {
    tenant,
    snapshots,
    deployments: runs.deployments,
    bundles: new Bundles(host.deps, snapshots),
    runs,
    checkpoints: new Checkpoints(runs, snapshots),
  };
}
