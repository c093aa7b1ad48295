/**
 * `git/`: git repository checkpoints: the host-side clone, the capture rules, the checkout
 * fix-ups, as a run extension.
 */
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_GIT_CONFIG, type GitConfig } from '../config.js';
import { parseStoredSpec } from '../deployments/deployment-spec.js';
import { HoldfastError, isHoldfastError } from '../errors.js';
import type { SyncEndpoints } from '../folders/sync/sync-engine.js';
import { keepOnlyHead } from '../folders/sync/sync-namespace.js';
import type { CheckpointReason, Run, Workspace } from '../metadata/metadata-store.js';
import { checkReposAllowed, type RepoBinding } from '../model/repo-bindings.js';
import type { RunBindings } from '../model/run-bindings.js';
import { REPOS_DIR } from '../model/sandbox-home.js';
import { REPO_TENANT } from '../model/tenants.js';
import { isFinalSave, type RunExtension, type RunSandboxContext, type SaveMoment } from '../runs/run-extension.js';
import { homeView } from '../sandbox/handle-views.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import { runSetupCommand } from '../sandbox/setup-command.js';
import type { CheckpointResult } from '../snapshot/checkpoint/checkpoint.js';
import type { SnapshotDeps } from '../snapshot/snapshot-deps.js';
import { Snapshots } from '../snapshot/snapshots.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES, type ScanLimits } from '../workspace-fs/scan-limits.js';
import { fixUpCheckout } from './checkout-fixups.js';
import { cloneOnHost } from './host-clone.js';
import { REPO_EXCLUDES, refuseUnsupportedCheckout } from './repo-rules.js';

/** Tries of a final save that finds a git lock (a command finishing), and the pause between them. */
const FINAL_LOCK_TRIES = 3;
const LOCK_RETRY_DELAY_MS = 1000;
/** The longest one setup command may run in a fresh checkout (as the lifecycle's setup). */
const SETUP_TIMEOUT_MS = 10 * 60_000;
/** Output a setup command may print before it is stopped. */
const SETUP_OUTPUT_BYTES = 1024 * 1024;

/** What {@link RepositoryCheckpoints} works on. */
export interface RepositoryCheckpointsDeps extends SnapshotDeps {
  /** The same route as the workspace's checkpoints (agent, shell transport or host path). */
  readonly endpoints: SyncEndpoints;
  /** Where host clones are made before their first checkpoint (default the system temp directory). */
  readonly tempDir?: string;
  /** What the host may clone (default {@link DEFAULT_GIT_CONFIG}: nothing). */
  readonly git?: GitConfig;
  /** The limits of a host clone's tree (checked before checkout) and of its first checkpoint; default the scan's. */
  readonly limits?: Partial<ScanLimits>;
}

/** The state of one bound repository as a run answer shows it. */
export interface RepositoryStatus {
  readonly name: string;
  readonly url: string;
  readonly branch: string | null;
  /** `none` before its first checkpoint; then that of its newest checkpoint. */
  readonly state: 'none' | 'saving' | 'saved' | 'failed';
  /** When the checkpoint the checkout would be restored from was made. */
  readonly lastCheckpointAt: number | null;
  readonly checkpointId: string | null;
  /** Why the newest save failed (the previous checkpoint stays authoritative). */
  readonly error: { readonly code: string; readonly message: string } | null;
}

/**
 * Repository checkpoints as a step of every run's lifecycle (DESIGN section 11): each
 * repository a run binds is a checkout at `$HOME/repos/<name>` in its sandbox, checkpointed
 * through the same workspace endpoint as the run's workspace into an internal workspace of its
 * own (one per run and repository, in {@link REPO_TENANT}; only its head is kept, plus the
 * newest failed save so its error shows). A cold sandbox gets each checkout restored from that
 * head, or, before the first checkpoint, cloned on the host (the sandbox may have no network)
 * only where the operator's `git` settings allow, with only their credentials (see
 * `cloneOnHost`), checked against the limits before checkout, and captured first, so fresh and restored checkouts take
 * one path: verified restore, atomic publish, a fresh `.git/config` with `origin` from the
 * binding, then the deployment's setup commands with the checkout as working directory
 * (`HOLDFAST_REPO_DIR`, `HOLDFAST_REPO_NAME` set). A checkout already in the sandbox is never
 * reset, cleaned or set up again. A binding dropped later keeps its internal workspace.
 * Every method runs under the run's lease (the lifecycle's contract).
 */
export class RepositoryCheckpoints implements RunExtension {
  readonly name = 'repos';
  private readonly snapshots: Snapshots;

  constructor(private readonly deps: RepositoryCheckpointsDeps) {
    this.snapshots = new Snapshots(deps, REPO_TENANT);
  }

  /**
   * Refuses, when a run is created, bindings the operator does not allow (see
   * `checkReposAllowed`: `INVALID_INPUT` for a protocol, `FORBIDDEN` for a host); the clone
   * checks again, with the host's addresses, before it connects.
   */
  refuseBindings(bindings: RunBindings): void {
    if (bindings.repos !== undefined) checkReposAllowed(bindings.repos, this.git);
  }

  private get git(): GitConfig {
    return this.deps.git ?? DEFAULT_GIT_CONFIG;
  }

  /** The snapshot service of the repository workspaces (for tests and maintenance; no route reaches it). */
  get repoSnapshots(): Snapshots {
    return this.snapshots;
  }

  /**
   * Materialises every bound checkout the sandbox lacks (see the class), in binding order,
   * then resolves with no variables (`HOLDFAST_REPOS_DIR` comes with the home directories).
   * Rejects with the first failure after trying the others.
   */
  async attach(context: RunSandboxContext): Promise<Readonly<Record<string, string>>> {
    const repos = bindingsOf(context.run);
    if (repos.length === 0) return {};
    const dirs = repos.map((r) => checkoutDir(context.sandbox, r));
    const present = await existing(context.sandbox, dirs);
    let failure: unknown;
    for (const [i, repo] of repos.entries()) {
      if (present.has(dirs[i] as string)) continue;
      try {
        await this.materialise(context, repo, i);
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
    return {};
  }

  /**
   * Checkpoints every bound checkout the sandbox holds (see {@link checkpointRepo}; one it does
   * not hold is skipped, found by the scan's `NOT_FOUND`). A final
   * save that meets a git lock tries again a few times a second apart. Rejects with the first
   * failure after trying every repository.
   */
  async save(context: RunSandboxContext, moment: SaveMoment): Promise<void> {
    let failure: unknown;
    for (const repo of bindingsOf(context.run)) {
      try {
        await this.saveOne(context, repo, moment);
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }

  /** Nothing waits for the boundary. */
  async boundary(): Promise<void> {}

  /**
   * One checkpoint of a checkout: scanned through the endpoint with {@link REPO_EXCLUDES},
   * refused by {@link refuseUnsupportedCheckout} (`REPOSITORY_BUSY`, `REPOSITORY_UNSUPPORTED`)
   * or by a tree that moved under the scan (`WORKSPACE_CHANGED`) with the previous head kept;
   * the head moves only in the engine's commit, after every object is durable.
   */
  async checkpointRepo(context: RunSandboxContext, repo: RepoBinding, reason: CheckpointReason): Promise<CheckpointResult> {
    const workspace = repoWorkspaceName(context.tenant.id, context.run.id, repo.name);
    try {
      const result = await this.deps.endpoints.checkpoint(this.snapshots, homeView(context.sandbox, `${REPOS_DIR}/${repo.name}`), {
        workspace,
        reason,
        excludes: REPO_EXCLUDES,
        onScan: refuseUnsupportedCheckout,
        ...(context.signal === undefined ? {} : { signal: context.signal }),
      });
      await keepOnlyHead(this.deps.meta, result.checkpoint);
      return result;
    } catch (error) {
      await this.pruneFailed(workspace);
      throw error;
    }
  }

  /** Each bound repository's state (none, saving, saved, failed) with its head checkpoint. */
  async status(run: Run): Promise<RepositoryStatus[]> {
    const out: RepositoryStatus[] = [];
    for (const repo of bindingsOf(run)) {
      const base = { name: repo.name, url: repo.url, branch: repo.branch ?? null };
      const ws = await this.findWorkspace(repoWorkspaceName(run.tenantId, run.id, repo.name));
      const newest = ws === undefined ? undefined : (await this.deps.meta.checkpoints.listByWorkspace(ws.id, { limit: 1 }))[0];
      const head = ws?.headCheckpointId == null ? undefined : await this.deps.meta.checkpoints.get(ws.headCheckpointId);
      const state = newest === undefined ? 'none' : newest.status === 'pending' ? 'saving' : newest.status === 'ready' ? 'saved' : 'failed';
      const error =
        state === 'failed' && newest?.error != null ? { code: String(newest.error.code), message: String(newest.error.message) } : null;
      out.push({ ...base, state, lastCheckpointAt: head?.finishedAt ?? null, checkpointId: head?.id ?? null, error });
    }
    return out;
  }

  private async saveOne(context: RunSandboxContext, repo: RepoBinding, moment: SaveMoment): Promise<void> {
    const reason = reasonOf(moment);
    const tries = isFinalSave(moment) ? FINAL_LOCK_TRIES : 1;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.checkpointRepo(context, repo, reason);
        return;
      } catch (error) {
        // A checkout the sandbox no longer holds (removed in a turn, or never made: its owner died
        // before the attach) has nothing to save; the next attach makes it again from its head.
        if (isHoldfastError(error, 'NOT_FOUND') && (await existing(context.sandbox, [checkoutDir(context.sandbox, repo)])).size === 0)
          return;
        if (!isHoldfastError(error, 'REPOSITORY_BUSY') || attempt >= tries) throw error;
        await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_DELAY_MS));
      }
    }
  }

  /** Restores (or first clones and captures) one checkout, fixes it up and runs setup in it. */
  private async materialise(context: RunSandboxContext, repo: RepoBinding, index: number): Promise<void> {
    const workspace = repoWorkspaceName(context.tenant.id, context.run.id, repo.name);
    const ws = await this.snapshots.workspace(workspace, true);
    let checkpointId = ws.headCheckpointId;
    if (checkpointId === null) checkpointId = await this.captureClone(workspace, repo, index, context.tenant.name, context.signal);
    const handle = homeView(context.sandbox, `${REPOS_DIR}/${repo.name}`);
    await this.deps.endpoints.restore(this.snapshots, handle, {
      workspace,
      checkpoint: checkpointId,
      replace: true,
      ...(context.signal === undefined ? {} : { signal: context.signal }),
    });
    const dir = checkoutDir(context.sandbox, repo);
    await fixUpCheckout(context.sandbox, dir, repo);
    await this.runSetup(context, repo, dir);
  }

  /** Clones on the host into a private temp directory and captures it as the workspace's first checkpoint. */
  private async captureClone(workspace: string, repo: RepoBinding, index: number, tenant: string, signal?: AbortSignal): Promise<string> {
    const parent = await fsp.mkdtemp(path.join(this.deps.tempDir ?? os.tmpdir(), 'holdfast-clone-'));
    try {
      const dir = path.join(parent, repo.name);
      const limits: ScanLimits = { maxFileBytes: DEFAULT_MAX_FILE_BYTES, maxEntries: DEFAULT_MAX_ENTRIES, ...this.deps.limits };
      await cloneOnHost({ binding: repo, index, dir, tenant, git: this.git, limits, ...(signal === undefined ? {} : { signal }) });
      const result = await this.snapshots.checkpoint({
        dir,
        workspace,
        reason: 'manual',
        limits,
        excludes: REPO_EXCLUDES,
        onScan: refuseUnsupportedCheckout,
        ...(signal === undefined ? {} : { signal }),
      });
      await keepOnlyHead(this.deps.meta, result.checkpoint);
      return result.checkpoint.id;
    } finally {
      await fsp.rm(parent, { recursive: true, force: true });
    }
  }

  /** The deployment's setup commands in the checkout; `SETUP_FAILED` with the exit status and the stderr tail, credentials withheld. */
  private async runSetup(context: RunSandboxContext, repo: RepoBinding, dir: string): Promise<void> {
    const record = await this.deps.meta.deployments.find(context.tenant.id, context.run.deploymentId);
    if (record === undefined) return;
    const spec = parseStoredSpec(record.spec);
    for (const [i, argv] of spec.setup.entries()) {
      await runSetupCommand(context.sandbox, {
        argv,
        cwd: dir,
        env: { HOLDFAST_REPO_DIR: dir, HOLDFAST_REPO_NAME: repo.name },
        timeoutMs: SETUP_TIMEOUT_MS,
        maxOutputBytes: SETUP_OUTPUT_BYTES,
        what: `setup command ${i + 1} in checkout ${repo.name}`,
        data: { repo: repo.name },
      });
    }
  }

  /** Keeps the head and the newest checkpoint (a failed save shows its error); forgets older failures. */
  private async pruneFailed(workspace: string): Promise<void> {
    const ws = await this.findWorkspace(workspace);
    if (ws === undefined) return;
    const all = await this.deps.meta.checkpoints.listByWorkspace(ws.id);
    const drop = all
      .slice(1)
      .filter((c) => c.id !== ws.headCheckpointId && c.status === 'failed')
      .map((c) => c.id);
    if (drop.length > 0) await this.deps.meta.checkpoints.deleteMany(drop).catch(() => undefined);
  }

  private async findWorkspace(name: string): Promise<Workspace | undefined> {
    return this.snapshots.workspace(name, false).catch((error: unknown) => {
      if (isHoldfastError(error, 'NOT_FOUND')) return undefined;
      throw error;
    });
  }
}

/** The internal workspace of one run's checkout of `name` (in {@link REPO_TENANT}). */
export function repoWorkspaceName(tenantId: string, runId: string, name: string): string {
  return `repo-${createHash('sha256').update(`${tenantId}\0${runId}\0${name}`).digest('hex').slice(0, 40)}`;
}

/** The sandbox path of a checkout. */
export function checkoutDir(sandbox: SandboxHandle, repo: RepoBinding): string {
  return path.posix.join(sandbox.agentHome, REPOS_DIR, repo.name);
}

function bindingsOf(run: Run): readonly RepoBinding[] {
  return run.bindings?.repos ?? [];
}

function reasonOf(moment: SaveMoment): CheckpointReason {
  if (moment === 'periodic' || moment === 'manual' || moment === 'upgrade' || moment === 'shutdown') return moment;
  return 'final';
}

/** Which of `dirs` exist in the sandbox (one exec). */
async function existing(sandbox: SandboxHandle, dirs: readonly string[]): Promise<Set<string>> {
  const found = await sandbox.run(['sh', '-c', 'for d; do [ -e "$d" ] && printf "%s\\0" "$d"; done; exit 0', 'sh', ...dirs], {
    timeoutMs: 60_000,
  });
  if (found.code !== 0) {
    throw new HoldfastError(
      'SETUP_FAILED',
      `could not list the checkouts under ${sandbox.agentHome}: ${found.stderr.toString('utf8').slice(0, 500)}`,
    );
  }
  return new Set(
    found.stdout
      .toString('utf8')
      .split('\0')
      .filter((d) => d !== ''),
  );
}
