import path from 'node:path';
import { ConflictError, errorToJson, HoldfastError, isHoldfastError, NotFoundError } from '../errors.js';
import type { FolderSyncKey, FolderSyncState, StoredRunBindings, SyncErrorRecord } from '../metadata/metadata-store.js';
import { FOLDER_SCOPES, type FolderScope } from '../model/folder-scopes.js';
import { HOME_DIRS } from '../model/sandbox-home.js';
import type { TenantScope } from '../model/tenants.js';
import { isFinalSave, type RunExtension, type RunSandboxContext, type SaveMoment } from '../runs/run-extension.js';
import { issueRunToken } from '../tenants/tokens.js';
import type { FolderRef } from './folders.js';
import { FolderSyncEngine, type FolderSyncEngineDeps, type OutgoingReport, type SyncTarget } from './sync/sync-engine.js';
import { listUnreadable } from './sync/unreadable.js';

/** Environment variable naming each home directory. */
const DIR_VARIABLES: Readonly<Record<(typeof HOME_DIRS)[number], string>> = {
  task: 'HOLDFAST_TASK_DIR',
  agent: 'HOLDFAST_AGENT_DIR',
  user: 'HOLDFAST_USER_DIR',
  project: 'HOLDFAST_PROJECT_DIR',
  repos: 'HOLDFAST_REPOS_DIR',
};

/** The longest the home directories' `mkdir` may take. */
const MKDIR_TIMEOUT_MS = 60_000;

/**
 * Save targets (sandbox and scope) whose unsaved-since time this process tracks at most: one per
 * live synced sandbox and bound scope; past it new targets go untracked rather than grow memory.
 */
export const MAX_TRACKED_SAVE_TARGETS = 10_000;

/** A work-folder save that failed, for metrics: the scope and the error's closed code (never an id or path). */
export interface FolderSaveFailed {
  readonly scope: FolderScope;
  readonly code: string;
}

/** Per scope, the oldest time (epoch ms) since which a tracked sandbox's changes may be unsaved; `null` when none may be. */
export type UnsavedSince = Readonly<Record<FolderScope, number | null>>;

/** One sandbox's sync of one collection, as the status answers it. */
export interface SyncStatus {
  readonly runId: string;
  readonly sandbox: { readonly provider: string; readonly id: string };
  readonly state: FolderSyncState['state'];
  readonly lastSavedAt: number | null;
  readonly finalCheckpointAt: number | null;
  readonly error: SyncErrorRecord | null;
  readonly refresh: FolderSyncState['refresh'];
  /** The run is active and this is its current sandbox. */
  readonly active: boolean;
}

/**
 * Work-folder sync as a step of every run's lifecycle (issue 13): the sandbox home holds
 * `task/ agent/ user/ project/ repos/`; each bound collection is hydrated into its directory
 * on attach, saved back before every workspace checkpoint, and refreshed at the run's safe
 * boundary when asked. See {@link FolderSyncEngine} for one directory's outgoing and incoming
 * sync. Every method runs under the run's lease (the lifecycle's contract), which is what
 * keeps two syncs of one sandbox from interleaving; the store's writes are serialised per
 * collection by `Folders`, and the sync state is written only here.
 */
export class FolderSync implements RunExtension {
  readonly name = 'folders';
  private readonly engine: FolderSyncEngine;
  /** Run tokens minted in this process, by sandbox: one per sandbox, never stored. */
  private readonly tokens = new Map<string, string>();
  /**
   * Save targets that may hold unsaved changes, by `provider/sandbox/scope`: since when (the
   * first use, or the last successful periodic save), until a successful final save.
   */
  private readonly unsaved = new Map<string, { readonly scope: FolderScope; readonly since: number }>();
  private readonly saveFailedListeners = new Set<(event: FolderSaveFailed) => void>();

  constructor(private readonly deps: FolderSyncEngineDeps) {
    this.engine = new FolderSyncEngine(deps);
  }

  /** Adds a listener for every failed save of a bound directory (never told twice for one failure); returns its removal. */
  onSaveFailed(listener: (event: FolderSaveFailed) => void): () => void {
    this.saveFailedListeners.add(listener);
    return () => this.saveFailedListeners.delete(listener);
  }

  /**
   * Per scope, the oldest moment since which a sandbox this process syncs may hold changes no
   * save has stored: a target is tracked from its first use in this process (its attach or
   * save), moved forward by each successful periodic save, and dropped by a successful final
   * save (turn end, checkpoint, release). A failing save keeps it, so its age keeps growing.
   * An upper bound of the oldest unsaved change's age: the sync does not watch the sandbox's files.
   */
  unsavedSince(): UnsavedSince {
    const oldest: Record<FolderScope, number | null> = { task: null, agent: null, user: null, project: null };
    for (const { scope, since } of this.unsaved.values()) {
      const current = oldest[scope];
      if (current === null || since < current) oldest[scope] = since;
    }
    return oldest;
  }

  /** The engine (its sync snapshots are for tests and maintenance only). */
  get sync(): FolderSyncEngine {
    return this.engine;
  }

  /**
   * Makes the home directories, refuses a sandbox whose sync states were made for other
   * bindings (`CONFLICT`, reason `bindings_changed`), then: cold, hydrates every bound
   * collection; warm, first saves every bound directory (the sandbox's unsaved edits), then
   * downloads what changed meanwhile. A directory whose save failed is not downloaded into
   * (its edits are the only copy) and the attach rejects with that failure after the others
   * ran; one whose save left out entries the sandbox cannot read is downloaded into around
   * them (only the changes that touch none of them, moved into place path by path: they stay
   * where they are), without failing the attach; a revoked user's directory is left as it is. Resolves with the directories'
   * variables and, for a bound run, `HOLDFAST_RUN_TOKEN`.
   */
  async attach(context: RunSandboxContext, start: 'cold' | 'warm'): Promise<Readonly<Record<string, string>>> {
    const { sandbox } = context;
    const home = sandbox.agentHome;
    const dirs = HOME_DIRS.map((d) => path.posix.join(home, d));
    const made = await sandbox.run(['mkdir', '-p', '--', ...dirs], { timeoutMs: MKDIR_TIMEOUT_MS });
    if (made.code !== 0) {
      throw new HoldfastError(
        'SETUP_FAILED',
        `could not make the home directories under ${home}: ${made.stderr.toString('utf8').slice(0, 500)}`,
      );
    }
    const bound = boundScopes(context.run.bindings);
    for (const scope of FOLDER_SCOPES) await this.checkBindings(context, scope);
    let failure: unknown;
    const skip = new Set<FolderScope>();
    // What the sandbox cannot read is the only copy of it: the download goes around it.
    const retained = new Map<FolderScope, readonly string[]>();
    for (const scope of bound) {
      const target = await this.ready(context, scope);
      if (!(await this.member(context, scope, target))) {
        skip.add(scope);
        continue;
      }
      if (start === 'warm') {
        try {
          retained.set(scope, (await this.saveOne(target, false)).unreadable);
        } catch (error) {
          failure ??= error;
          skip.add(scope);
        }
      }
    }
    for (const scope of bound) {
      if (skip.has(scope)) continue;
      const target = await this.ready(context, scope);
      try {
        await this.engine.incoming(target, retained.get(scope) ?? []);
        await this.deps.meta.folderSync.update(stateKeyOf(context, scope), { refreshState: 'none', refreshError: null });
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
    const env: Record<string, string> = { HOLDFAST_HOME: home };
    for (const [i, d] of HOME_DIRS.entries()) env[DIR_VARIABLES[d]] = dirs[i] as string;
    if (bound.length > 0) env.HOLDFAST_RUN_TOKEN = await this.runToken(context);
    return env;
  }

  /**
   * Saves every bound directory: re-checks a bound user's membership first (a revoked user's
   * directory is marked failed with `FORBIDDEN` and left in the sandbox, and the others still
   * save), then `saving`, the outgoing sync, and `saved` with `lastSavedAt` (and
   * `finalCheckpointAt` on a final save) or `failed` with the error, the previous
   * `lastSavedAt` kept. Entries the sandbox's own user cannot read (a mode-000 file, a
   * directory it cannot list) are failed saves of those paths alone: the rest of the directory
   * is saved, the state is `saved` with `error` `FORBIDDEN` naming them, and the save resolves.
   * A revoked user's directory is not a failure, except before a takeover or an upgrade
   * leaves the sandbox while it holds unsaved edits: then it is one (`FORBIDDEN`, reason
   * `user_revoked`), and the lifecycle keeps the sandbox. Rejects, after trying every scope,
   * with the first failure.
   */
  async save(context: RunSandboxContext, moment: SaveMoment): Promise<void> {
    let failure: unknown;
    for (const scope of boundScopes(context.run.bindings)) {
      await this.checkBindings(context, scope);
      const target = await this.ready(context, scope);
      try {
        if (await this.member(context, scope, target)) await this.saveOne(target, isFinalSave(moment));
        else if (LEAVING_MOMENTS.has(moment)) await this.refuseLeavingUnsaved(target, moment);
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }

  /**
   * A revoked user's directory is not saved; before a moment that leaves the sandbox (see
   * {@link LEAVING_MOMENTS}) that is a failed save when the directory holds edits the store
   * does not (or entries the sandbox cannot read): `FORBIDDEN` (`data.reason`
   * `user_revoked`), so the lifecycle keeps the sandbox, the only copy of them, for the
   * operator. Resolves when there is nothing to lose.
   */
  private async refuseLeavingUnsaved(target: SyncTarget, moment: SaveMoment): Promise<void> {
    const { changes, unreadable } = await this.engine.unsaved(target);
    if (changes === 0 && unreadable.length === 0) return;
    throw new HoldfastError(
      'FORBIDDEN',
      `the user this run is bound to was revoked and its user folder holds ${changes + unreadable.length} unsaved change(s): the sandbox is kept (it holds the only copy) instead of being left for the ${moment}`,
      { data: { reason: 'user_revoked', scope: target.ref.scope, moment, changes, unreadable: unreadable.length } },
    );
  }

  /**
   * The run's safe boundary: each directory with a queued refresh whose last save succeeded
   * is downloaded into (`running`, then `none`, or `failed` with the error). A refresh queued
   * behind a failed save waits: downloading would overwrite the only copy of those edits. One
   * behind a save that left out entries the sandbox cannot read downloads around them (as
   * {@link FolderSync.attach} does): they stay where they are.
   */
  async boundary(context: RunSandboxContext): Promise<void> {
    let failure: unknown;
    for (const scope of boundScopes(context.run.bindings)) {
      const key = stateKeyOf(context, scope);
      const state = await this.deps.meta.folderSync.find(key);
      if (state?.refresh.state !== 'queued' || state.state !== 'saved') continue;
      await this.deps.meta.folderSync.update(key, { refreshState: 'running' });
      try {
        // Saved with an error: entries the sandbox cannot read, which the download goes around.
        const retained = state.error === null ? [] : await listUnreadable(context.sandbox, scope, context.signal);
        await this.engine.incoming(await this.ready(context, scope), retained);
        await this.deps.meta.folderSync.update(key, { refreshState: 'none', refreshError: null });
      } catch (error) {
        failure ??= error;
        await this.deps.meta.folderSync.update(key, { refreshState: 'failed', refreshError: errorRecord(error) });
      }
    }
    if (failure !== undefined) throw failure;
  }

  /**
   * Queues a refresh of run `runId`'s directory of collection `ref` for its next safe boundary
   * (202 semantics: resolves once queued). `NOT_FOUND` when the run is not the tenant's or does
   * not bind that collection; `CONFLICT` (reason `ended`) once the run has ended. A run whose sandbox
   * never synced that scope needs none: its next attach hydrates it (`queued: false`).
   */
  async requestRefresh(tenant: TenantScope, runId: string, ref: Omit<FolderRef, 'tenantId'>): Promise<{ queued: boolean }> {
    const { scope } = ref;
    const run = await this.deps.meta.runs.find(tenant.id, runId);
    if (run === undefined || run.bindings?.[scope] !== ref.ownerId) {
      throw new NotFoundError(`run ${runId} is not bound to a ${scope} folder`, { data: { runId, scope } });
    }
    if (run.endedAt !== null) {
      throw new ConflictError('CONFLICT', `run ${runId} has ended: there is no sandbox to refresh`, { data: { runId, reason: 'ended' } });
    }
    if (run.sandbox === null) return { queued: false };
    const key = { provider: run.sandbox.provider, sandboxId: run.sandbox.id, scope };
    if ((await this.deps.meta.folderSync.find(key)) === undefined) return { queued: false };
    await this.deps.meta.folderSync.update(key, { refreshState: 'queued', refreshError: null });
    return { queued: true };
  }

  /** Per sandbox that synced collection `ref`, its save and refresh state, oldest first. */
  async status(tenant: TenantScope, ref: Omit<FolderRef, 'tenantId'>): Promise<SyncStatus[]> {
    const collection = await this.deps.meta.folders.findCollection(tenant.id, ref.scope, ref.ownerId);
    if (collection === undefined) return [];
    const out: SyncStatus[] = [];
    for (const s of await this.deps.meta.folderSync.listByCollection(collection.id)) {
      const run = await this.deps.meta.runs.find(tenant.id, s.runId);
      const active = run !== undefined && run.endedAt === null && run.sandbox?.provider === s.provider && run.sandbox.id === s.sandboxId;
      out.push({
        runId: s.runId,
        sandbox: { provider: s.provider, id: s.sandboxId },
        state: s.state,
        lastSavedAt: s.lastSavedAt,
        finalCheckpointAt: s.finalCheckpointAt,
        error: s.error,
        refresh: s.refresh,
        active,
      });
    }
    return out;
  }

  /**
   * One directory's save, with its state moves (see {@link FolderSync.save}). Entries the
   * sandbox's user cannot read are failed saves of those paths alone: the rest is saved, the
   * state is `saved` and its `error` (`FORBIDDEN`) names them; the save resolves with the report.
   */
  private async saveOne(target: SyncTarget, final: boolean): Promise<OutgoingReport> {
    const key = { provider: target.sandbox.provider, sandboxId: target.sandbox.id, scope: target.ref.scope };
    const tracked = unsavedKey(key);
    await this.deps.meta.folderSync.update(key, { state: 'saving' });
    let report: OutgoingReport;
    try {
      report = await this.engine.outgoing(target);
    } catch (error) {
      await this.deps.meta.folderSync.update(key, { state: 'failed', error: errorRecord(error) }).catch(() => undefined);
      this.saveFailed({ scope: key.scope, code: isHoldfastError(error) ? error.code : 'INTERNAL' });
      throw error;
    }
    const at = Date.now();
    if (final) this.unsaved.delete(tracked);
    else if (this.unsaved.has(tracked)) this.unsaved.set(tracked, { scope: key.scope, since: at });
    await this.deps.meta.folderSync.update(key, {
      state: 'saved',
      lastSavedAt: at,
      error: report.unreadable.length === 0 ? null : unreadableRecord(target.ref.scope, report.unreadable),
      ...(final ? { finalCheckpointAt: at } : {}),
    });
    return report;
  }

  /** The sync target of a bound scope, its state row created on first use. */
  private async ready(context: RunSandboxContext, scope: FolderScope): Promise<SyncTarget> {
    const ownerId = context.run.bindings?.[scope] as string;
    const ref: FolderRef = { tenantId: context.tenant.id, scope, ownerId };
    const key = stateKeyOf(context, scope);
    const tracked = unsavedKey(key);
    if (!this.unsaved.has(tracked) && this.unsaved.size < MAX_TRACKED_SAVE_TARGETS) {
      this.unsaved.set(tracked, { scope, since: Date.now() });
    }
    const state = await this.deps.meta.folderSync.find(key);
    if (state === undefined) {
      const collection = await this.deps.meta.folders.ensureCollection(ref.tenantId, scope, ownerId);
      await this.deps.meta.folderSync
        .create({
          ...key,
          runId: context.run.id,
          tenantId: ref.tenantId,
          collectionId: collection.id,
          bindings: bindingsOf(context.run.bindings),
        })
        .catch((error: unknown) => {
          if (!isHoldfastError(error, 'ALREADY_EXISTS')) throw error;
        });
    } else if (state.runId !== context.run.id) {
      await this.deps.meta.folderSync.update(key, { runId: context.run.id });
    }
    return { ref, runId: context.run.id, sandbox: context.sandbox, ...(context.signal === undefined ? {} : { signal: context.signal }) };
  }

  private saveFailed(event: FolderSaveFailed): void {
    for (const listener of this.saveFailedListeners) {
      try {
        listener(event);
      } catch {
        // A listener is for metrics only: it must not change what the save reports.
      }
    }
  }

  /** `CONFLICT` (reason `bindings_changed`) when the sandbox's state of `scope` was made for other owners. */
  private async checkBindings(context: RunSandboxContext, scope: FolderScope): Promise<void> {
    const state = await this.deps.meta.folderSync.find(stateKeyOf(context, scope));
    if (state === undefined || sameBindings(state.bindings, bindingsOf(context.run.bindings))) return;
    throw new ConflictError(
      'CONFLICT',
      `sandbox ${context.sandbox.provider}/${context.sandbox.id} was synced for other folder owners: give this run a fresh sandbox`,
      { data: { reason: 'bindings_changed', sandbox: context.sandbox.id, scope } },
    );
  }

  /**
   * True unless `scope` is the user scope and its user (by row id) is revoked: then
   * the directory is marked failed (`FORBIDDEN`) and left as it is in the sandbox.
   */
  private async member(context: RunSandboxContext, scope: FolderScope, target: SyncTarget): Promise<boolean> {
    if (scope !== 'user') return true;
    // The owner is the bound user's row id: a revoked id stays revoked, whoever takes the name next.
    const user = await this.deps.meta.users.find(context.tenant.id, target.ref.ownerId);
    if (user !== undefined && user.revokedAt === null) return true;
    await this.deps.meta.folderSync.update(stateKeyOf(context, scope), {
      state: 'failed',
      error: {
        code: 'FORBIDDEN',
        message: `the user ${user?.name ?? target.ref.ownerId} this run is bound to was revoked: the user folder is not synced`,
      },
    });
    return false;
  }

  private async runToken(context: RunSandboxContext): Promise<string> {
    const key = `${context.sandbox.provider}/${context.sandbox.id}/${context.run.id}`;
    let token = this.tokens.get(key);
    if (token === undefined) {
      token = (await issueRunToken(this.deps.meta, context.tenant, context.run.id)).token;
      this.tokens.set(key, token);
    }
    return token;
  }
}

/**
 * The saves after which the lifecycle leaves the sandbox: a takeover stops the dead owner's,
 * an upgrade destroys the old one once the switch commits. A directory that cannot be saved
 * then (a revoked user's) fails the save when it holds unsaved edits, so the sandbox stays.
 */
const LEAVING_MOMENTS: ReadonlySet<SaveMoment> = new Set<SaveMoment>(['takeover', 'upgrade']);

/** The scopes a run binds, in {@link FOLDER_SCOPES} order. */
function boundScopes(bindings: StoredRunBindings | null): FolderScope[] {
  return FOLDER_SCOPES.filter((s) => typeof bindings?.[s] === 'string' && bindings[s] !== '');
}

function bindingsOf(bindings: StoredRunBindings | null): StoredRunBindings {
  const out: Record<string, string> = {};
  for (const s of boundScopes(bindings)) out[s] = bindings?.[s] as string;
  return out;
}

function sameBindings(a: StoredRunBindings, b: StoredRunBindings): boolean {
  return FOLDER_SCOPES.every((s) => (a[s] ?? null) === (b[s] ?? null));
}

function stateKeyOf(context: RunSandboxContext, scope: FolderScope): FolderSyncKey {
  return { provider: context.sandbox.provider, sandboxId: context.sandbox.id, scope };
}

/** Unreadable paths a stored error names at most (the rest are counted). */
const MAX_NAMED_UNREADABLE = 20;

/** The `FORBIDDEN` record of a save that left out the entries the sandbox cannot read, naming them. */
function unreadableRecord(scope: FolderScope, paths: readonly string[]): SyncErrorRecord {
  const named = paths.slice(0, MAX_NAMED_UNREADABLE).map((p) => JSON.stringify(`${scope}/${p}`));
  const more = paths.length > named.length ? ` and ${paths.length - named.length} more` : '';
  return {
    code: 'FORBIDDEN',
    message: `not saved, the sandbox cannot read them (the rest of the folder was saved): ${named.join(', ')}${more}`,
  };
}

function errorRecord(error: unknown): SyncErrorRecord {
  const json = errorToJson(error);
  return { code: json.code, message: json.message };
}

/** The key of a save target in `FolderSync.unsaved`. */
function unsavedKey(key: FolderSyncKey): string {
  return JSON.stringify([key.provider, key.sandboxId, key.scope]);
}
