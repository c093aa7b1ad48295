import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { BlobStore } from '../../blob-store/blob-store.js';
import type { Sha256Hex } from '../../core/hash.js';
import { type HoldfastError, IntegrityError, NotFoundError } from '../../errors.js';
import type { FolderSyncKey, FolderSyncState, MetadataStore, PendingSyncOperation } from '../../metadata/metadata-store.js';
import { SYNC_TENANT } from '../../model/tenants.js';
import { syncWorkspaceName } from '../../model/workspace-names.js';
import type { ContentWorkers } from '../../objects/content-workers.js';
import { ObjectReader } from '../../objects/object-reader.js';
import type { SandboxEndpoints } from '../../sandbox/endpoints/sandbox-endpoints.js';
import { homeView } from '../../sandbox/handle-views.js';
import type { SandboxHandle } from '../../sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../../snapshot/checkpoint/checkpoint.js';
import { Snapshots } from '../../snapshot/snapshots.js';
import { checkpointLimits, type FlatTree, flattenTree } from '../../snapshot/tree-walk.js';
import type { FolderRef, Folders, StoredEntry } from '../folders.js';
import { MAX_STORED_BATCH_OPERATIONS, type StoredOperation } from '../stored-operations.js';
import { type ListedEntry, ListedSource } from './listed-source.js';
import { applyStaged, planAroundRetained, type RetainedPlan, STAGING_DIR } from './retained-incoming.js';
import { keepOnlyHead } from './sync-namespace.js';
import { applied, diskView, type OutgoingChange, pendingTag, planOutgoing, reconcile, signature } from './sync-plan.js';
import { exactPattern, listUnreadable, MAX_UNREADABLE_ENTRIES } from './unreadable.js';

/** The slice of {@link Folders} a sync uses (a test wraps it to lose a response on purpose). */
export type SyncFolders = Pick<Folders, 'listContent' | 'applyStored' | 'limits'>;
/** The slice of {@link SandboxEndpoints} a sync uses: the same route as the workspace's checkpoints. */
export type SyncEndpoints = Pick<SandboxEndpoints, 'checkpoint' | 'restore'>;

/** What a {@link FolderSyncEngine} works on. */
export interface FolderSyncEngineDeps {
  readonly meta: MetadataStore;
  readonly blobs: BlobStore;
  readonly workers: ContentWorkers;
  /** The service's cache directory (stat caches of the sync workspaces on the local route). */
  readonly cacheDir: string;
  readonly folders: SyncFolders;
  readonly endpoints: SyncEndpoints;
}

/** One collection directory of one sandbox, with the state row the sync keeps for it. */
export interface SyncTarget {
  readonly ref: FolderRef;
  readonly runId: string;
  readonly sandbox: SandboxHandle;
  readonly signal?: AbortSignal;
}

/** What an outgoing sync did. */
export interface OutgoingReport {
  /** Files written (mode changes among them), directories made and paths removed in the store. */
  readonly written: number;
  readonly made: number;
  readonly removed: number;
  /** The sandbox's tree was the one the last save saw: nothing was compared. */
  readonly unchanged: boolean;
  /** Paths the sandbox holds that were neither sent nor deleted (secret rules, symlinks, unstorable paths, unreadable ones). */
  readonly unknown: readonly string[];
  /**
   * Files and directories the sandbox's user cannot read (or list), shortest first: each a
   * failed save of that path alone (kept only in the sandbox, its stored copy untouched).
   */
  readonly unreadable: readonly string[];
}

/** Appended to a run's sync workspace name: the workspace a download around retained entries is staged from. */
const STAGING_WORKSPACE_SUFFIX = '-staged';
/** The longest making the staging directory may take. */
const STAGING_MKDIR_TIMEOUT_MS = 60_000;

/** Checkpoints of the directory one outgoing sync makes at most, each leaving out the unreadable entries found after the last one. */
const MAX_UNREADABLE_ATTEMPTS = 3;

/** What an incoming sync did. */
export interface IncomingReport {
  readonly files: number;
  /** Paths imported (new or changed) and removed in the sandbox. */
  readonly imported: number;
  readonly removed: number;
  /** The sandbox already held the collection as listed: nothing was restored. */
  readonly unchanged: boolean;
}

/**
 * The work-folder sync of one collection directory of a sandbox (`<home>/<scope>`), through
 * the same workspace endpoint (agent or shell transport, or the host path) as the sandbox's
 * checkpoints: the directory is checkpointed into an internal sync workspace (one per run and
 * scope, in {@link SYNC_TENANT}), so the transport batches, hashes on the host and keeps its
 * stat cache; incoming content is a checkpoint built from the collection's rows without
 * reading a byte and restored (staged, verified, published atomically).
 *
 * The sync state (`meta.folderSync`) is written only by the holder of the run's lease (every
 * caller runs under it, never two syncs of one sandbox at once); the store's own writes are
 * serialised per collection by `Folders`. A sync never holds a transaction across a transfer.
 */
export class FolderSyncEngine {
  private readonly snapshots: Snapshots;
  private readonly reader: ObjectReader;

  constructor(private readonly deps: FolderSyncEngineDeps) {
    this.snapshots = new Snapshots(deps, SYNC_TENANT);
    this.reader = new ObjectReader(deps.blobs, deps.meta);
  }

  /** The snapshot service of the sync workspaces (for tests and maintenance; no route reaches it). */
  get syncSnapshots(): Snapshots {
    return this.snapshots;
  }

  /**
   * Sends the sandbox's changes to the store. First the directory is checkpointed (cache
   * excludes off, secret rules on); a tree equal to the last save's with nothing pending ends
   * it. Stored incoming intents are reconciled with the disk and cleared before anything is
   * sent. Each change's operation id is stored before it is sent (the pending one reused when
   * the signature is the same, so a lost response replays the same operation instead of
   * writing twice), then changes go in batches of {@link MAX_STORED_BATCH_OPERATIONS}, by
   * chunk ids (no byte moves again), last-write-wins with `replaceKind`; a file whose bytes
   * equal its baseline's goes as a mode change, never as its (maybe stale) bytes, and one whose
   * file a newer version removed is left removed. The baseline moves
   * per applied change. Rejects with the first refused change's error after trying them all
   * (the baseline keeps what succeeded), or with the transfer's error.
   */
  async outgoing(target: SyncTarget): Promise<OutgoingReport> {
    const key = stateKey(target);
    const { result, unreadable } = await this.checkpointReadable(target);
    await keepOnlyHead(this.deps.meta, result.checkpoint);
    let state = await this.state(key);
    const rootTree = result.checkpoint.rootTree as Sha256Hex;
    const unknownPaths = result.excluded.filter((e) => e.reason !== 'mode-stripped').map((e) => e.path);
    if (rootTree === state.lastRootTree && state.intents === null && Object.keys(state.pending).length === 0) {
      return { written: 0, made: 0, removed: 0, unchanged: true, unknown: unknownPaths, unreadable };
    }
    const flat = await flattenTree(this.reader, rootTree, undefined, checkpointLimits(result.checkpoint));
    const view = diskView(flat, result.excluded, this.deps.folders.limits.maxPathBytes);
    const baseline = state.intents === null ? { ...state.baseline } : reconcile(state.baseline, state.intents, view.entries);
    // Cleared before any outgoing write: what was not adopted is a genuine local edit now.
    if (state.intents !== null) state = await this.deps.meta.folderSync.update(key, { baseline, intents: null });
    const changes = planOutgoing(view, baseline);
    const pending: Record<string, PendingSyncOperation> = { ...state.pending };
    const counts = { written: 0, made: 0, removed: 0 };
    let failure: HoldfastError | undefined;
    for (let i = 0; i < changes.length; i += MAX_STORED_BATCH_OPERATIONS) {
      target.signal?.throwIfAborted();
      const batch = changes.slice(i, i + MAX_STORED_BATCH_OPERATIONS);
      for (const change of batch) {
        const before = pending[change.path];
        const tag = pendingTag(change);
        pending[change.path] = before?.signature === tag ? before : { operationId: randomUUID(), signature: tag };
      }
      // Stored before the batch is sent: a lost response retries these very ids.
      await this.deps.meta.folderSync.update(key, { pending });
      const outcomes = await this.deps.folders.applyStored(
        target.ref,
        batch.map((c) => operation(c, (pending[c.path] as PendingSyncOperation).operationId)),
      );
      for (const [k, outcome] of outcomes.entries()) {
        const change = batch[k] as OutgoingChange;
        // A removal found already gone, and a mode change of a file a newer version removed
        // (or turned into a directory), are done: the newer state stands, and the next
        // incoming sync brings it into the sandbox.
        const done = outcome.ok || ((change.op === 'remove' || change.op === 'mode') && outcome.error.code === 'NOT_FOUND');
        if (!done) {
          failure ??= outcome.error;
          continue;
        }
        applied(baseline, change);
        delete pending[change.path];
        if (change.op === 'write' || change.op === 'mode') counts.written += 1;
        else if (change.op === 'mkdir') counts.made += 1;
        else counts.removed += 1;
      }
      await this.deps.meta.folderSync.update(key, { baseline, pending });
    }
    // A refused change keeps the old tree as "last seen", so the next save compares again.
    await this.deps.meta.folderSync.update(key, { lastRootTree: failure === undefined ? rootTree : state.lastRootTree });
    if (failure !== undefined) throw failure;
    return { ...counts, unchanged: false, unknown: unknownPaths, unreadable };
  }

  /**
   * How many changes an outgoing sync would send now, and the entries it could not read,
   * without sending anything or moving the sync state: the directory is checkpointed (as
   * {@link outgoing} does) and compared with the baseline (stored incoming intents reconciled
   * in memory only). For a directory that will not be saved (a revoked user's) before its
   * sandbox is left: whether that would destroy the only copy of something. Rejects with the
   * checkpoint's error when the directory cannot be read.
   */
  async unsaved(target: SyncTarget): Promise<{ readonly changes: number; readonly unreadable: readonly string[] }> {
    const state = await this.state(stateKey(target));
    const { result, unreadable } = await this.checkpointReadable(target);
    await keepOnlyHead(this.deps.meta, result.checkpoint);
    const rootTree = result.checkpoint.rootTree as Sha256Hex;
    if (rootTree === state.lastRootTree && state.intents === null && Object.keys(state.pending).length === 0) {
      return { changes: 0, unreadable };
    }
    const flat = await flattenTree(this.reader, rootTree, undefined, checkpointLimits(result.checkpoint));
    const view = diskView(flat, result.excluded, this.deps.folders.limits.maxPathBytes);
    const baseline = state.intents === null ? state.baseline : reconcile(state.baseline, state.intents, view.entries);
    return { changes: planOutgoing(view, baseline).length, unreadable };
  }

  /**
   * The outgoing checkpoint of the directory. One the transport fails (a file the sandbox's
   * user cannot read, a directory it cannot list: `FORBIDDEN` from the agent) is tried again
   * with the entries the sandbox cannot read left out, as the sandbox's own user lists them
   * (up to {@link MAX_UNREADABLE_ATTEMPTS} times, as more turn up): those are never sent and
   * never deleted from the store, and the rest of the directory is saved. Rejects with the
   * checkpoint's own error when nothing unreadable explains it.
   */
  private async checkpointReadable(target: SyncTarget): Promise<{ result: CheckpointResult; unreadable: string[] }> {
    const unreadable: string[] = [];
    const patterns: string[] = [];
    for (let attempt = 1; ; attempt += 1) {
      try {
        const result = await this.deps.endpoints.checkpoint(this.snapshots, homeView(target.sandbox, target.ref.scope), {
          workspace: syncWorkspaceName(target.ref.tenantId, target.runId, target.ref.scope),
          reason: 'manual',
          excludes: { cacheExcludes: false, ...(patterns.length === 0 ? {} : { exclude: [...patterns] }) },
          ...(target.signal === undefined ? {} : { signal: target.signal }),
        });
        unreadable.sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
        return { result, unreadable };
      } catch (error) {
        if (attempt >= MAX_UNREADABLE_ATTEMPTS || target.signal?.aborted === true) throw error;
        const found = await listUnreadable(target.sandbox, target.ref.scope, target.signal).catch(() => []);
        const fresh = found.filter((p) => !unreadable.includes(p) && exactPattern(p) !== undefined);
        if (fresh.length === 0 || unreadable.length + fresh.length > MAX_UNREADABLE_ENTRIES) throw error;
        for (const p of fresh) {
          unreadable.push(p);
          patterns.push(exactPattern(p) as string);
        }
      }
    }
  }

  /**
   * Brings the collection's current content into the sandbox. Lists every live row, builds
   * the target tree as a checkpoint of the sync workspace from the listed ids (no byte read;
   * symlinks and unstorable paths the sandbox held at its last save are carried over, so a
   * refresh does not drop them), stores the intents (imports and removals) before anything
   * is written, restores that checkpoint into the directory through the endpoint (staged,
   * verified, published atomically; unchanged files reused), then makes the listing the
   * baseline and clears the intents. When the baseline already equals the listing, nothing
   * is restored. Call it only after an outgoing sync succeeded (or into a fresh sandbox): a
   * restore replaces what the directory holds. With `retained` (entries the sandbox holds and
   * the last save could not send: files its user cannot read), the download goes around them
   * instead (see {@link incomingAround}): only changes that touch none of them, and the
   * directory is not replaced.
   */
  async incoming(target: SyncTarget, retained: readonly string[] = []): Promise<IncomingReport> {
    const key = stateKey(target);
    const rows = await this.deps.folders.listContent(target.ref);
    const state = await this.state(key);
    const listed: Record<string, string> = {};
    for (const row of rows) listed[row.path] = signature(row.kind, row.sha256, row.executable);
    const imports: Record<string, string> = {};
    for (const [p, sig] of Object.entries(listed)) if (state.baseline[p] !== sig) imports[p] = sig;
    const removals = Object.keys(state.baseline).filter((p) => !(p in listed));
    if (retained.length > 0) return this.incomingAround(target, state, rows, planAroundRetained(imports, removals, retained));
    if (Object.keys(imports).length === 0 && removals.length === 0 && state.intents === null) {
      return { files: rows.filter((r) => r.kind === 'file').length, imported: 0, removed: 0, unchanged: true };
    }
    const workspace = syncWorkspaceName(target.ref.tenantId, target.runId, target.ref.scope);
    const carried = await this.localOnly(workspace, listed);
    await this.deps.meta.folderSync.update(key, { intents: { imports, removals } });
    const entries = [...rows.map(listedEntry), ...carried];
    const rootMtimeMs = rows.reduce((m, r) => Math.max(m, r.updatedAt), 0);
    const made = await this.snapshots.checkpoint({
      workspace,
      reason: 'manual',
      source: () => new ListedSource(`${target.ref.scope} folder ${target.ref.ownerId}`, entries, rootMtimeMs),
    });
    await keepOnlyHead(this.deps.meta, made.checkpoint);
    await this.deps.endpoints.restore(this.snapshots, homeView(target.sandbox, target.ref.scope), {
      workspace,
      checkpoint: made.checkpoint.id,
      replace: true,
      ...(target.signal === undefined ? {} : { signal: target.signal }),
    });
    await this.deps.meta.folderSync.update(key, { baseline: listed, intents: null });
    return { files: made.stats.files, imported: Object.keys(imports).length, removed: removals.length, unchanged: false };
  }

  /**
   * The download of {@link incoming} into a directory holding retained entries (the sandbox
   * has them, the store does not: files its user cannot read): only `plan`'s changes, none of
   * which touches them. The imported files are built from their listed ids as a checkpoint of
   * the run's staging workspace (no byte read), restored into `<home>/.holdfast-incoming/<scope>`
   * (staged, verified), and moved into place path by path; the rest of the directory stays as it
   * is. The intents are stored first; the baseline takes exactly what was written, so a
   * retained entry keeps its old baseline and the collection's version of it stays in the store.
   */
  private async incomingAround(
    target: SyncTarget,
    state: FolderSyncState,
    rows: readonly StoredEntry[],
    plan: RetainedPlan,
  ): Promise<IncomingReport> {
    const key = stateKey(target);
    const files = rows.filter((r) => r.kind === 'file').length;
    const removed = plan.removals.length;
    const imported = Object.keys(plan.imports).length;
    if (imported === 0 && removed === 0 && state.intents === null) return { files, imported: 0, removed: 0, unchanged: true };
    await this.deps.meta.folderSync.update(key, { intents: { imports: { ...plan.imports }, removals: [...plan.removals] } });
    const staged = rows.filter((r) => r.kind === 'file' && r.path in plan.imports).map(listedEntry);
    if (staged.length > 0) {
      const workspace = `${syncWorkspaceName(target.ref.tenantId, target.runId, target.ref.scope)}${STAGING_WORKSPACE_SUFFIX}`;
      const made = await this.snapshots.checkpoint({
        workspace,
        reason: 'manual',
        source: () => new ListedSource(`${target.ref.scope} folder ${target.ref.ownerId} (staged)`, staged, Date.now()),
      });
      await keepOnlyHead(this.deps.meta, made.checkpoint);
      const dir = path.posix.join(STAGING_DIR, target.ref.scope);
      const mkdir = await target.sandbox.run(['mkdir', '-p', '--', path.posix.join(target.sandbox.agentHome, dir)], {
        timeoutMs: STAGING_MKDIR_TIMEOUT_MS,
      });
      if (mkdir.code !== 0) {
        throw new IntegrityError('RESTORE_INCOMPLETE', `could not make the staging directory ${dir} in the sandbox home`, {
          data: { scope: target.ref.scope },
        });
      }
      await this.deps.endpoints.restore(this.snapshots, homeView(target.sandbox, dir), {
        workspace,
        checkpoint: made.checkpoint.id,
        replace: true,
        ...(target.signal === undefined ? {} : { signal: target.signal }),
      });
    }
    await applyStaged(target.sandbox, target.ref.scope, plan, target.signal);
    const baseline: Record<string, string> = { ...state.baseline };
    for (const p of plan.removals) {
      delete baseline[p];
      for (const k of Object.keys(baseline)) if (k.startsWith(`${p}/`)) delete baseline[k];
    }
    Object.assign(baseline, plan.imports);
    await this.deps.meta.folderSync.update(key, { baseline, intents: null });
    return { files, imported, removed, unchanged: false };
  }

  /**
   * Entries of the sync workspace's head (the sandbox as its last sync saw it) that no
   * collection can hold and no listed path replaces: symlinks and files or directories with
   * unstorable paths. Their content is in the head's own objects. (Files a secret rule kept
   * out of every checkpoint cannot be carried: a refresh that restores removes them.)
   */
  private async localOnly(workspace: string, listed: Readonly<Record<string, string>>): Promise<ListedEntry[]> {
    const ws = await this.snapshots.workspace(workspace, true);
    if (ws.headCheckpointId === null) return [];
    const head = await this.deps.meta.checkpoints.get(ws.headCheckpointId);
    if (head.rootTree === null) return [];
    const flat: FlatTree = await flattenTree(this.reader, head.rootTree, undefined, checkpointLimits(head));
    const view = diskView(flat, [], this.deps.folders.limits.maxPathBytes);
    const clash = (p: string): boolean => p in listed;
    const out: ListedEntry[] = [];
    for (const s of flat.symlinks) if (!clash(s.path)) out.push({ kind: 'symlink', path: s.path, target: s.target, mtimeMs: s.mtimeMs });
    for (const d of flat.dirs) {
      if (d.path !== '' && !view.entries.has(d.path) && !clash(d.path)) out.push({ kind: 'directory', path: d.path, mtimeMs: d.mtimeMs });
    }
    for (const f of flat.files) {
      if (view.entries.has(f.path) || clash(f.path)) continue;
      out.push({
        kind: 'file',
        path: f.path,
        size: f.size,
        sha256: f.sha256,
        chunks: f.chunks,
        executable: (f.mode & 0o100) !== 0,
        mtimeMs: f.mtimeMs,
      });
    }
    return out;
  }

  private async state(key: FolderSyncKey): Promise<FolderSyncState> {
    const state = await this.deps.meta.folderSync.find(key);
    if (state === undefined) {
      throw new NotFoundError(`no sync state of ${key.scope} in sandbox ${key.provider}/${key.sandboxId}: attach the sandbox first`, {
        data: { ...key },
      });
    }
    return state;
  }
}

/** The state row of a target. */
export function stateKey(target: SyncTarget): FolderSyncKey {
  return { provider: target.sandbox.provider, sandboxId: target.sandbox.id, scope: target.ref.scope };
}

function operation(change: OutgoingChange, operationId: string): StoredOperation {
  if (change.op === 'remove') return { op: 'remove', path: change.path, options: { operationId } };
  if (change.op === 'mkdir') return { op: 'mkdir', path: change.path, options: { operationId, replaceKind: true } };
  if (change.op === 'mode') return { op: 'mode', path: change.path, executable: change.executable, options: { operationId } };
  return {
    op: 'write',
    path: change.path,
    content: change.content,
    options: { operationId, replaceKind: true, executable: change.executable },
  };
}

function listedEntry(row: StoredEntry): ListedEntry {
  if (row.kind === 'directory') return { kind: 'directory', path: row.path, mtimeMs: row.updatedAt };
  return {
    kind: 'file',
    path: row.path,
    size: row.size,
    sha256: row.sha256 as string,
    chunks: row.chunks ?? [],
    executable: row.executable,
    mtimeMs: row.updatedAt,
  };
}
