/**
 * `snapshot/`: the engine, under this `Snapshots` facade: `checkpoint/`, `restore/`, `gc/`
 * and `inspect/` (browse, diff, verify), with what they share at the top: the workspace
 * endpoint ports (`WorkspaceSource`, `WorkspaceTarget`), `SnapshotDeps`, the checkpoint
 * record, reachability and tree walks.
 */
import fs from 'node:fs';
import { MIN_ID_PREFIX_LENGTH, resolveIdOrPrefix } from '../core/id-prefix.js';
import type { TreeEntry } from '../core/tree.js';
import { ConflictError, InputError, isHoldfastError, NotFoundError } from '../errors.js';
import type { Checkpoint, CheckpointReason, Tenant, Workspace } from '../metadata/metadata-store.js';
import { CHECKPOINT_REASONS } from '../metadata/schema.js';
import { DEFAULT_TENANT } from '../model/tenants.js';
import { isReservedWorkspace } from '../model/workspace-names.js';
import { type RebuildOptions, type RebuildReport, rebuildIndex as rebuildObjectIndex } from '../objects/index-rebuild.js';
import { ObjectReader } from '../objects/object-reader.js';
import type { ExcludeOptions } from '../rules/excludes.js';
import type { ScanLimits } from '../workspace-fs/scan.js';
import { BaseFiles } from './checkpoint/base-files.js';
import { type CheckpointOptions, type CheckpointProgress, type CheckpointResult, createCheckpoint } from './checkpoint/checkpoint.js';
import { type CheckpointMeta, type CheckpointNote, checkedCheckpointNote } from './checkpoint-note.js';
import { collectGarbage, type GcOptions, type GcReport } from './gc/gc.js';
import { type Lookup, lookupPath, readFileFromTree } from './inspect/browse.js';
import { type DiffEntry, diffTrees } from './inspect/diff.js';
import { type VerifyOptions, type VerifyReport, verifyStore } from './inspect/verify.js';
import { LocalWorkspaceTarget } from './restore/local-target.js';
import { type RestoreProgress, type RestoreReceipt, restoreCheckpoint } from './restore/restore.js';
import type { SnapshotDeps } from './snapshot-deps.js';
import { type EndpointContext, LocalWorkspaceSource, type WorkspaceSource } from './workspace-source.js';
import type { WorkspaceTarget } from './workspace-target.js';

/** The closed code an observer is told of a failure by: a HoldfastError's own, else `INTERNAL`. */
function codeOf(error: unknown): string {
  return isHoldfastError(error) ? error.code : 'INTERNAL';
}

/** Calls an observer; its failure must never fail or mask the checkpoint or restore it watches. */
function tell(call: () => void): void {
  try {
    call();
  } catch {
    // An observer is for metrics only.
  }
}

/** A workspace with its head checkpoint (if any). */
export interface WorkspaceSummary extends Workspace {
  readonly head: Checkpoint | undefined;
}

/**
 * The snapshot service: checkpoints, restores and browsing, by workspace name within one
 * tenant. This is what the CLI, the HTTP API and the runs layer call.
 */
export class Snapshots {
  private readonly reader: ObjectReader;
  /** What this host recorded for the files of recent checkpoints: the ids an untrusted source may reuse. */
  private readonly baseFiles: BaseFiles;

  constructor(
    private readonly deps: SnapshotDeps,
    readonly tenantName = DEFAULT_TENANT,
  ) {
    this.reader = new ObjectReader(deps.blobs, deps.meta);
    this.baseFiles = new BaseFiles(this.reader, deps.meta);
  }

  /**
   * Captures a new checkpoint of workspace `workspace` (created on first use) from a host
   * directory (`dir`) or from any other source (`source`, e.g. a sandbox through its agent),
   * with an optional `label` and `meta` recorded on it. A bad label or meta is refused
   * (`INVALID_INPUT`, `LIMIT_EXCEEDED`, `SECRET_EXCLUDED`) before anything is recorded.
   */
  async checkpoint(options: {
    dir?: string;
    source?: (context: EndpointContext) => WorkspaceSource;
    workspace: string;
    reason?: CheckpointReason;
    /** A label of 1-200 characters (see `checkedCheckpointNote`). */
    label?: string | undefined;
    /** A flat JSON object of at most 4 KiB (see `checkedCheckpointNote`). */
    meta?: CheckpointMeta | undefined;
    excludes?: ExcludeOptions;
    limits?: Partial<ScanLimits>;
    /** See `CheckpointOptions.onUnreadable`: `fail` (default) or `skip` files the source cannot read. */
    onUnreadable?: NonNullable<CheckpointOptions['onUnreadable']>;
    signal?: AbortSignal;
    onProgress?: (progress: CheckpointProgress) => void;
    onCommit?: NonNullable<CheckpointOptions['onCommit']>;
    onScan?: NonNullable<CheckpointOptions['onScan']>;
  }): Promise<CheckpointResult> {
    const { dir, source, label, meta, ...rest } = options;
    if ((dir === undefined) === (source === undefined))
      throw new InputError('INVALID_INPUT', 'checkpoint needs exactly one of dir and source');
    const note = checkedCheckpointNote({ label, meta });
    // Bad input is refused before anything is recorded: no workspace created, no failed checkpoint.
    if (options.reason !== undefined && !CHECKPOINT_REASONS.includes(options.reason)) {
      throw new InputError(
        'INVALID_INPUT',
        `unknown checkpoint reason ${JSON.stringify(options.reason)}: use one of ${CHECKPOINT_REASONS.join(', ')}`,
        {
          data: { reason: options.reason, choices: CHECKPOINT_REASONS },
        },
      );
    }
    if (options.onUnreadable !== undefined && options.onUnreadable !== 'fail' && options.onUnreadable !== 'skip') {
      throw new InputError('INVALID_INPUT', `onUnreadable must be 'fail' or 'skip', not ${JSON.stringify(options.onUnreadable)}`, {
        data: { field: 'onUnreadable' },
      });
    }
    if (isReservedWorkspace(options.workspace)) {
      throw new InputError(
        'INVALID_INPUT',
        `workspace ${options.workspace} is reserved for deployment bundles: capture a bundle with Bundles.capture, or checkpoint into another workspace`,
        { data: { workspace: options.workspace } },
      );
    }
    if (dir !== undefined) requireDirectory(dir);
    const workspace = await this.workspace(options.workspace, true);
    const from =
      source?.(this.endpointContext(workspace)) ??
      new LocalWorkspaceSource(dir as string, workspace.id, this.deps.cacheDir, this.deps.workers);
    const started = performance.now();
    const reason = options.reason ?? 'manual';
    const observer = this.deps.observer;
    try {
      const result = await createCheckpoint(this.deps, { ...rest, note, source: from, workspace });
      const { files, rawBytesWritten, scan } = result.stats;
      tell(() =>
        observer?.checkpointFinished({
          outcome: 'ready',
          reason,
          durationMs: performance.now() - started,
          files,
          bytesNew: rawBytesWritten,
          ...(scan === undefined ? {} : { scan }),
        }),
      );
      return result;
    } catch (error) {
      tell(() => observer?.checkpointFinished({ outcome: 'failed', reason, durationMs: performance.now() - started, code: codeOf(error) }));
      throw error;
    }
  }

  /**
   * The workspace and the ready checkpoint a restore would use. With a workspace: the
   * checkpoint named (default: its head), which must be of that workspace. Without one
   * (`undefined`): the checkpoint alone names it, by id, unique prefix or `latest` (the
   * tenant's newest ready one) within this tenant, and its own workspace comes with it.
   * Neither given: `INVALID_INPUT`.
   */
  async restorePoint(workspace: string | undefined, checkpoint?: string): Promise<{ workspace: Workspace; checkpoint: Checkpoint }> {
    if (workspace === undefined) {
      if (checkpoint === undefined) throw new InputError('INVALID_INPUT', 'name a checkpoint, a workspace, or both');
      const found = await this.readyCheckpoint(checkpoint);
      return { workspace: await this.deps.meta.workspaces.get(found.workspaceId), checkpoint: found };
    }
    const ws = await this.workspace(workspace, false);
    return { workspace: ws, checkpoint: await this.resolveCheckpoint(ws, checkpoint) };
  }

  /**
   * Forks checkpoint `checkpoint` (an id, unique prefix or `latest` of this tenant; another
   * tenant's answer `NOT_FOUND`) into a new workspace `workspace` (`ALREADY_EXISTS` when the
   * name is taken): its first checkpoint, ready at once, shares the source's root tree and so
   * every object under it. No byte is read or copied; the objects stay reachable for GC from
   * either checkpoint. The new checkpoint records `forkedFrom` and `parentId` as the source and
   * takes `label`/`meta` as {@link Snapshots.checkpoint} does. Refused input records nothing.
   */
  async fork(options: { checkpoint: string; workspace: string; label?: string; meta?: CheckpointMeta }): Promise<Checkpoint> {
    const note = checkedCheckpointNote({ label: options.label, meta: options.meta });
    this.checkedName(options.workspace);
    if (isReservedWorkspace(options.workspace)) {
      throw new InputError('INVALID_INPUT', `workspace ${options.workspace} is reserved for deployment bundles: fork into another name`, {
        data: { workspace: options.workspace },
      });
    }
    const source = await this.readyCheckpoint(options.checkpoint);
    const tenant = await this.tenant(true);
    if ((await this.deps.meta.workspaces.findByName(tenant.id, options.workspace)) !== undefined) {
      throw new ConflictError('ALREADY_EXISTS', `workspace ${options.workspace} already exists: fork into a new name`, {
        data: { workspace: options.workspace },
      });
    }
    const created = await this.deps.meta.workspaces.create({ tenantId: tenant.id, name: options.workspace });
    return this.forkInto(created, source, note);
  }

  /**
   * Makes `source` (a ready checkpoint of this tenant, as {@link Snapshots.forkSource} returns)
   * the first checkpoint of the empty workspace `workspace`, sharing its tree (see
   * {@link Snapshots.fork}), in one transaction that re-reads the source (a source retention
   * forgot meanwhile is `NOT_FOUND`, nothing written) and moves the head by compare-and-swap
   * (a workspace that got a head meanwhile is `CONFLICT`).
   */
  async forkInto(workspace: Workspace, source: Checkpoint, note: CheckpointNote = {}): Promise<Checkpoint> {
    if (workspace.headCheckpointId !== null) {
      throw new ConflictError('CONFLICT', `workspace ${workspace.name} already has checkpoints: fork into a new workspace`, {
        data: { workspace: workspace.name },
      });
    }
    return this.deps.meta.transaction(async (tx) => {
      const still = await tx.checkpoints.find(source.id);
      if (still?.status !== 'ready' || still.rootTree === null || still.workspaceId !== source.workspaceId) {
        throw new NotFoundError(`checkpoint ${source.id} is gone`, { data: { checkpoint: source.id } });
      }
      const pending = await tx.checkpoints.createPending({
        workspaceId: workspace.id,
        parentId: still.id,
        forkedFrom: still.id,
        reason: 'manual',
        ...(note.label === undefined ? {} : { label: note.label }),
        ...(note.meta === undefined ? {} : { meta: note.meta }),
      });
      const ready = await tx.checkpoints.markReady(pending.id, { rootTree: still.rootTree, stats: still.stats });
      await tx.workspaces.casHead(workspace.id, workspace.headVersion, ready.id);
      return ready;
    });
  }

  /** The ready checkpoint of this tenant `id` names (an id, unique prefix or `latest`), for {@link Snapshots.forkInto}. */
  forkSource(id: string): Promise<Checkpoint> {
    return this.readyCheckpoint(id);
  }

  /**
   * Restores a checkpoint (default: the head) of `workspace`, or the checkpoint `checkpoint`
   * names on its own when no workspace is given, into a host directory (`dir`) or any other
   * target (`target`, e.g. a sandbox); see {@link restoreCheckpoint} for what a stored tree and
   * a target must satisfy.
   */
  async restore(options: {
    dir?: string;
    target?: (context: EndpointContext) => WorkspaceTarget;
    /** Absent: `checkpoint` alone names what to restore, within this tenant (see {@link Snapshots.restorePoint}). */
    workspace?: string | undefined;
    checkpoint?: string;
    replace?: boolean;
    limits?: Partial<ScanLimits>;
    signal?: AbortSignal;
    onProgress?: (progress: RestoreProgress) => void;
  }): Promise<RestoreReceipt> {
    const { dir, target, ...rest } = options;
    if ((dir === undefined) === (target === undefined))
      throw new InputError('INVALID_INPUT', 'restore needs exactly one of dir and target');
    const started = performance.now();
    const observer = this.deps.observer;
    try {
      const { workspace, checkpoint } = await this.restorePoint(options.workspace, options.checkpoint);
      const to = target?.(this.endpointContext(workspace)) ?? new LocalWorkspaceTarget(dir as string, this.deps);
      const receipt = await restoreCheckpoint(this.reader, { ...rest, target: to, workspace, checkpoint });
      tell(() => observer?.restoreFinished({ outcome: 'ok', durationMs: performance.now() - started, bytesFetched: receipt.bytesFetched }));
      return receipt;
    } catch (error) {
      tell(() => observer?.restoreFinished({ outcome: 'failed', durationMs: performance.now() - started, code: codeOf(error) }));
      throw error;
    }
  }

  /** What a source or target made for `workspace` may use of this service. */
  private endpointContext(workspace: Workspace): EndpointContext {
    return { workspace, workers: this.deps.workers, baseFiles: this.baseFiles, cacheDir: this.deps.cacheDir };
  }

  /** Checkpoints of a workspace, newest first (failed ones included, with their errors). */
  async log(workspace: string, limit?: number): Promise<Checkpoint[]> {
    const ws = await this.workspace(workspace, false);
    return this.deps.meta.checkpoints.listByWorkspace(ws.id, limit === undefined ? {} : { limit });
  }

  /** Every workspace of the tenant with its head. */
  async workspaces(): Promise<WorkspaceSummary[]> {
    const tenant = await this.deps.meta.tenants.findByName(this.tenantName);
    if (tenant === undefined) return [];
    const list = await this.deps.meta.workspaces.listByTenant(tenant.id);
    return Promise.all(
      list.map(async (w) => ({
        ...w,
        head: w.headCheckpointId === null ? undefined : await this.deps.meta.checkpoints.get(w.headCheckpointId),
      })),
    );
  }

  /** What `relPath` names inside a checkpoint (a directory listing or one entry). */
  async ls(checkpointId: string, relPath = ''): Promise<Lookup> {
    return lookupPath(this.reader, (await this.readyCheckpoint(checkpointId)).rootTree as string, relPath);
  }

  /** A file's bytes from a checkpoint, verified chunk by chunk. */
  async *cat(checkpointId: string, relPath: string): AsyncGenerator<Uint8Array> {
    yield* readFileFromTree(this.reader, (await this.readyCheckpoint(checkpointId)).rootTree as string, relPath);
  }

  /** What changed from checkpoint `a` to checkpoint `b`. */
  async diff(a: string, b: string): Promise<DiffEntry[]> {
    const [ca, cb] = [await this.readyCheckpoint(a), await this.readyCheckpoint(b)];
    return diffTrees(this.reader, ca.rootTree as string, cb.rootTree as string);
  }

  /** Finds (or, with `create`, creates) a workspace of this tenant by name. */
  async workspace(name: string, create: boolean): Promise<Workspace> {
    this.checkedName(name);
    const { meta } = this.deps;
    const tenant = await this.tenant(create);
    if (tenant === undefined) throw new NotFoundError(`no workspace ${name}`, { data: { workspace: name } });
    const found = await meta.workspaces.findByName(tenant.id, name);
    if (found !== undefined) return found;
    if (!create) throw new NotFoundError(`no workspace ${name}`, { data: { workspace: name } });
    const tenantId = tenant.id;
    return meta.workspaces.create({ tenantId, name }).catch(async (error: unknown) => {
      const raced = isHoldfastError(error, 'ALREADY_EXISTS') ? await meta.workspaces.findByName(tenantId, name) : undefined;
      if (raced === undefined) throw error;
      return raced;
    });
  }

  /** `name` when it is a valid workspace name; `INVALID_INPUT` otherwise. */
  private checkedName(name: string): string {
    if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/.test(name)) {
      throw new InputError(
        'INVALID_INPUT',
        `invalid workspace name ${JSON.stringify(name)}: 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit`,
        { data: { workspace: name } },
      );
    }
    return name;
  }

  /** This service's tenant row; with `create`, created on first use (safe against racing creators). */
  async tenant(create: true): Promise<Tenant>;
  async tenant(create: boolean): Promise<Tenant | undefined>;
  async tenant(create: boolean): Promise<Tenant | undefined> {
    const { meta } = this.deps;
    const tenant = await meta.tenants.findByName(this.tenantName);
    if (tenant !== undefined || !create) return tenant;
    return meta.tenants.create({ name: this.tenantName }).catch(async (error: unknown) => {
      const raced = isHoldfastError(error, 'ALREADY_EXISTS') ? await meta.tenants.findByName(this.tenantName) : undefined;
      if (raced === undefined) throw error;
      return raced;
    });
  }

  /**
   * A ready checkpoint of `workspace`: the head when `id` is absent or `latest`, else an id or
   * unique prefix resolved as {@link Snapshots.getCheckpoint} does.
   */
  private async resolveCheckpoint(workspace: Workspace, id: string | undefined): Promise<Checkpoint> {
    const head = async (): Promise<Checkpoint> => {
      if (workspace.headCheckpointId === null)
        throw new NotFoundError(`workspace ${workspace.name} has no ready checkpoint yet`, { data: { workspace: workspace.name } });
      return this.deps.meta.checkpoints.get(workspace.headCheckpointId);
    };
    if (id === undefined) return head();
    const checkpoint = await this.readyCheckpoint(id, head);
    if (checkpoint.workspaceId !== workspace.id)
      throw new NotFoundError(`checkpoint ${id} is not in workspace ${workspace.name}`, { data: { checkpoint: id } });
    return checkpoint;
  }

  /**
   * A checkpoint of this tenant in any status, by exact id, by a unique prefix of at least
   * {@link MIN_ID_PREFIX_LENGTH} characters, or `latest` (the tenant's newest ready checkpoint,
   * in any workspace). Another tenant's checkpoints are never matched, nor listed among the
   * candidates of an ambiguous prefix (`CONFLICT`); they answer `NOT_FOUND`, as if absent. A
   * shorter prefix is `INVALID_INPUT`.
   */
  getCheckpoint(id: string): Promise<Checkpoint> {
    return this.findCheckpoint(id);
  }

  /** {@link Snapshots.getCheckpoint}, with `latest` meaning what `latest` returns (a workspace's head). */
  private async findCheckpoint(id: string, latest?: () => Promise<Checkpoint | undefined>): Promise<Checkpoint> {
    const { meta } = this.deps;
    const tenant = await this.tenant(false);
    return resolveIdOrPrefix(id, {
      kind: 'checkpoint',
      idOf: (c) => c.id,
      exact: async (exact) => {
        const checkpoint = tenant === undefined ? undefined : await meta.checkpoints.find(exact);
        const workspace = checkpoint === undefined ? undefined : await meta.workspaces.find(checkpoint.workspaceId);
        return workspace?.tenantId === tenant?.id ? checkpoint : undefined;
      },
      byPrefix: async (prefix, limit) => (tenant === undefined ? [] : meta.checkpoints.findByPrefix(tenant.id, prefix, limit)),
      latest: latest ?? (async () => (tenant === undefined ? undefined : meta.checkpoints.latestReady(tenant.id))),
    });
  }

  /** A ready checkpoint of this tenant; another tenant's ids answer `NOT_FOUND`, as if absent. */
  private async readyCheckpoint(id: string, latest?: () => Promise<Checkpoint | undefined>): Promise<Checkpoint> {
    const checkpoint = await this.findCheckpoint(id, latest);
    if (checkpoint.status !== 'ready' || checkpoint.rootTree === null) {
      throw new InputError('INVALID_INPUT', `checkpoint ${id} is ${checkpoint.status}, not ready`, {
        data: { checkpoint: id, status: checkpoint.status },
      });
    }
    return checkpoint;
  }

  /** Checks the whole store (every tenant's checkpoints, not only this one's); see {@link verifyStore}. */
  verify(options: VerifyOptions): Promise<VerifyReport> {
    return verifyStore(this.deps, options);
  }

  /** One garbage-collection run over the whole store (all tenants); see {@link collectGarbage}. */
  gc(options: GcOptions = {}): Promise<GcReport> {
    return collectGarbage(this.deps, options);
  }

  /** Re-registers every pack in the blob store in the object index; see {@link rebuildObjectIndex}. */
  rebuildIndex(options: RebuildOptions = {}): Promise<RebuildReport> {
    return rebuildObjectIndex(this.deps, options);
  }
}

export type { CheckpointResult, DiffEntry, EndpointContext, RestoreReceipt, TreeEntry };

/** Throws `INVALID_INPUT` unless `dir` is an existing directory (followed if it is a symlink, as a scan's root is). */
/** Throws `INVALID_INPUT` unless `dir` is an existing directory. */
export function requireDirectory(dir: string): void {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  if (st === undefined)
    throw new InputError('INVALID_INPUT', `${dir} does not exist: give the directory to checkpoint`, { data: { path: dir } });
  if (!st.isDirectory()) throw new InputError('INVALID_INPUT', `${dir} is not a directory`, { data: { path: dir } });
}
