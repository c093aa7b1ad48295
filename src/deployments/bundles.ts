import { KeyedMutex } from '../core/keyed-mutex.js';
import { InputError, isHoldfastError, NotFoundError } from '../errors.js';
import type { Checkpoint, MetadataStore } from '../metadata/metadata-store.js';
import { BUNDLE_WORKSPACE } from '../model/workspace-names.js';
import type { Exclusion } from '../rules/exclusion.js';
import { createCheckpoint } from '../snapshot/checkpoint/checkpoint.js';
import type { SnapshotDeps } from '../snapshot/snapshot-deps.js';
import { requireDirectory, type Snapshots } from '../snapshot/snapshots.js';
import { LocalWorkspaceSource } from '../snapshot/workspace-source.js';
import { type BundleRecord, checkedBundleRecord } from './bundle-record.js';
import { copyBundleDir, withStagingDir } from './bundle-staging.js';
import { type BundleTarLimits, DEFAULT_BUNDLE_TAR_LIMITS, extractBundleTar } from './bundle-tar.js';

/**
 * Everything in a bundle directory is the bundle: no cache or `.gitignore` exclusions (the
 * deployment's setup cannot be assumed to rebuild what the agent's own source brings).
 */
const BUNDLE_EXCLUDES = Object.freeze({ cacheExcludes: false, gitignore: false });
/** Exclusions that change an entry but keep it: a bundle with them is still the directory's content. */
const KEPT_CHANGED: ReadonlySet<string> = new Set(['mode-stripped', 'symlink-made-relative']);
/** Exclusions a refusal lists in its `data`. */
const REPORTED_EXCLUSIONS = 20;
/** Captures retried when another capture of the same tenant moved the bundle workspace first. */
const CAPTURE_ATTEMPTS = 5;
/** How long a capture waits for another of the same tenant in this process. */
const CAPTURE_WAIT_MS = 10 * 60 * 1000;

/**
 * The deployment bundles of one tenant: directories captured into the content-addressed store
 * as checkpoints of the tenant's {@link BUNDLE_WORKSPACE} (one per capture; the same content
 * is the same `rootTree`), which retention never forgets. A deployment names a bundle by the
 * record {@link Bundles.capture} returns (or its `rootTree`).
 */
export class Bundles {
  private readonly captures = new KeyedMutex();

  constructor(
    private readonly deps: SnapshotDeps,
    private readonly snapshots: Snapshots,
  ) {}

  /**
   * Captures host directory `dir` as a bundle, strictly. It is copied first into a private temp
   * directory with every mtime set to one fixed time (`BUNDLE_MTIME_MS`), so the same files are
   * the same `rootTree` wherever and whenever they were written. Refusals, each before the
   * bundle exists (a refused capture leaves no ready checkpoint; a failed one records why):
   *
   * - a secret path or secret content anywhere: `SECRET_EXCLUDED`, `data` with the first
   *   finding's `path`, `reason` (`secret-path` | `secret-content`), `rule`, and `excluded`;
   * - an entry a checkpoint would leave out (special files, escaping symlinks, unstorable
   *   names): `INVALID_INPUT`, or `LIMIT_EXCEEDED` past a size or entry limit, same `data`;
   * - `dir` not a directory: `INVALID_INPUT`.
   *
   * Nothing is excluded as a cache (`node_modules/` is part of a bundle that holds it).
   */
  async capture(dir: string, options: { signal?: AbortSignal } = {}): Promise<BundleRecord> {
    requireDirectory(dir);
    return withStagingDir(async (staging) => {
      const copy = `${staging}/bundle`;
      copyBundleDir(dir, copy);
      return this.captureStaged(copy, dir, options.signal);
    });
  }

  /**
   * Captures a bundle from a tar stream (an HTTP upload): extracted strictly into a fresh temp
   * directory (see {@link extractBundleTar}: absolute paths, `..`, escaping links, devices, data
   * after the end-of-archive and anything past `limits` or the inflation bounds are refused with
   * `INVALID_INPUT` / `LIMIT_EXCEEDED` and nothing is captured), then captured as
   * {@link Bundles.capture} does. An aborted `signal` (the client went away) stops the reading,
   * the extraction and the capture at once and removes the temp directory; the call rejects
   * with the signal's reason.
   */
  async captureTar(
    chunks: AsyncIterable<Uint8Array>,
    options: { limits?: BundleTarLimits; signal?: AbortSignal } = {},
  ): Promise<BundleRecord> {
    return withStagingDir(async (staging) => {
      const dir = `${staging}/bundle`;
      await extractBundleTar(chunks, dir, options.limits ?? DEFAULT_BUNDLE_TAR_LIMITS, options.signal);
      return this.captureStaged(dir, 'the uploaded bundle', options.signal);
    });
  }

  /** One checkpoint of the bundle workspace from a staged copy; refused inside the commit when anything was left out. */
  private async captureStaged(dir: string, label: string, signal: AbortSignal | undefined): Promise<BundleRecord> {
    const release = await abortableTurn(this.captures.acquire(this.snapshots.tenantName, CAPTURE_WAIT_MS), signal);
    try {
      for (let attempt = 1; ; attempt += 1) {
        const workspace = await this.snapshots.workspace(BUNDLE_WORKSPACE, true);
        try {
          const { checkpoint } = await createCheckpoint(this.deps, {
            source: new LocalWorkspaceSource(dir, workspace.id, this.deps.cacheDir, this.deps.workers),
            workspace,
            reason: 'manual',
            excludes: BUNDLE_EXCLUDES,
            ...(signal === undefined ? {} : { signal }),
            onCommit: async (_tx, ready) => refuseExclusions(ready, label),
          });
          return recordOf(checkpoint);
        } catch (error) {
          // Another process captured a bundle of this tenant meanwhile: the head moved, take it again.
          if (!isHoldfastError(error, 'CONFLICT') || attempt >= CAPTURE_ATTEMPTS) throw error;
        }
      }
    } finally {
      release();
    }
  }

  /** The captured bundle with root tree `rootTree`; `NOT_FOUND` when this tenant captured none. */
  async find(rootTree: string): Promise<BundleRecord> {
    const tenant = await this.snapshots.tenant(false);
    return findCapturedBundle(this.deps.meta, tenant?.id, rootTree);
  }
}

/**
 * The bundle `rootTree` as tenant `tenantId` captured it (files and bytes as recorded then),
 * looked up among the ready checkpoints of its bundle workspace: a tree id the tenant did not
 * capture as a bundle (another tenant's, a workspace checkpoint's) is `NOT_FOUND`, as if absent.
 */
export async function findCapturedBundle(meta: MetadataStore, tenantId: string | undefined, rootTree: string): Promise<BundleRecord> {
  const workspace = tenantId === undefined ? undefined : await meta.workspaces.findByName(tenantId, BUNDLE_WORKSPACE);
  const ready = workspace === undefined ? [] : await meta.checkpoints.listByWorkspace(workspace.id, { status: 'ready' });
  const found = ready.find((c) => c.rootTree === rootTree);
  if (found === undefined) {
    throw new NotFoundError(
      `bundle ${rootTree} not found: capture it first (holdfast deployment create --bundle DIR, or POST /v1/bundles)`,
      {
        data: { rootTree },
      },
    );
  }
  return recordOf(found);
}

/** The bundle record of a ready bundle checkpoint. */
function recordOf(checkpoint: Checkpoint): BundleRecord {
  const stats = checkpoint.stats ?? {};
  return checkedBundleRecord({ rootTree: checkpoint.rootTree, files: stats.files, bytes: stats.bytes });
}

/** Refuses, inside the commit, a capture that left anything out (the checkpoint then fails and the head stays). */
function refuseExclusions(ready: Checkpoint, dir: string): void {
  const excluded = ((ready.stats?.excluded ?? []) as unknown as Exclusion[]).filter((e) => !KEPT_CHANGED.has(e.reason));
  // The row keeps the first exclusions only; the counts cover them all.
  const counts = (ready.stats?.excludedByReason ?? {}) as Record<string, number>;
  const reasons = Object.keys(counts).filter((r) => (counts[r] ?? 0) > 0 && !KEPT_CHANGED.has(r));
  const secretReason = reasons.find(isSecretReason);
  const first: Exclusion | undefined =
    excluded.find((e) => isSecretReason(e.reason)) ??
    (secretReason === undefined ? excluded[0] : undefined) ??
    (reasons[0] === undefined ? undefined : { path: '', reason: (secretReason ?? reasons[0]) as Exclusion['reason'], rule: '' });
  if (first === undefined) return;
  const data = { path: first.path, reason: first.reason, rule: first.rule, excluded: excluded.slice(0, REPORTED_EXCLUSIONS) };
  if (isSecretReason(first.reason)) {
    throw new InputError(
      'SECRET_EXCLUDED',
      `${dir} holds a credential at ${first.path} (${first.rule}); a bundle is stored and restored as it is, so it may hold none: remove it and inject credentials at run time`,
      { data },
    );
  }
  const code = first.reason === 'too-large' || first.reason === 'entry-limit' ? 'LIMIT_EXCEEDED' : 'INVALID_INPUT';
  throw new InputError(code, `${dir} has an entry a bundle cannot keep: ${first.path} (${first.reason}: ${first.rule}); remove it`, {
    data,
  });
}

/**
 * The turn `acquiring` resolves with, or the abort reason as soon as `signal` aborts while it
 * waits (a client that went away does not queue behind another capture); a turn granted after
 * the abort is handed straight back.
 */
async function abortableTurn(acquiring: Promise<() => void>, signal: AbortSignal | undefined): Promise<() => void> {
  if (signal === undefined) return acquiring;
  if (signal.aborted) {
    acquiring.then(
      (release) => release(),
      () => undefined,
    );
    throw signal.reason;
  }
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([acquiring, aborted]);
  } catch (error) {
    acquiring.then(
      (release) => release(),
      () => undefined,
    );
    throw error;
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

function isSecretReason(reason: string): boolean {
  return reason === 'secret-path' || reason === 'secret-content';
}
