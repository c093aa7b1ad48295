import { InputError } from '../../errors.js';
import type { Checkpoint, MetadataStore } from '../../metadata/metadata-store.js';
import { isReservedWorkspace } from '../../model/workspace-names.js';
import { MAX_CHECKPOINT_MS } from '../snapshot-deps.js';

/** Which ready checkpoints of each workspace to keep besides its head (DESIGN section 7). */
export interface RetentionPolicy {
  /** The newest N ready checkpoints. */
  readonly keepLast: number;
  /** The newest ready checkpoint of each of the N most recent UTC calendar days that have one. */
  readonly keepDaily: number;
}

/** Default policy: the last 10, plus one a day for 7 days. */
export const DEFAULT_RETENTION: RetentionPolicy = Object.freeze({ keepLast: 10, keepDaily: 7 });
/** Failed checkpoints stay visible (with their errors) this long, then are forgotten. */
export const FAILED_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/** The fields retention looks at. */
export type RetentionCandidate = Pick<Checkpoint, 'id' | 'workspaceId' | 'status' | 'createdAt' | 'finishedAt'>;

/** Rejects a policy with a negative or fractional count (`INVALID_INPUT`). */
export function checkPolicy(policy: RetentionPolicy): RetentionPolicy {
  for (const [field, value] of Object.entries(policy)) {
    if (!Number.isSafeInteger(value) || (value as number) < 0) {
      throw new InputError('INVALID_INPUT', `retention ${field} must be a non-negative integer, got ${String(value)}`, { data: { field } });
    }
  }
  return policy;
}

/**
 * The ids of checkpoints retention forgets, decided per workspace (pure; `now` in epoch ms):
 *
 * - a workspace head (any id in `heads`) is always kept;
 * - ready: kept when among the newest `keepLast`, or the newest of one of the `keepDaily`
 *   most recent UTC calendar days that have ready checkpoints (days without any do not
 *   count, as in restic's `--keep-daily`); otherwise forgotten;
 * - pending: kept while younger than MAX_CHECKPOINT_MS (it may still finish); older ones
 *   belong to a process that died, and are forgotten;
 * - failed: kept for FAILED_RETENTION_MS after they failed, for visibility, then forgotten;
 * - in a workspace of `keepAllReady` (ids; the bundle workspaces), every ready checkpoint is kept.
 */
export function selectForgettable(
  checkpoints: readonly RetentionCandidate[],
  heads: ReadonlySet<string>,
  policy: RetentionPolicy = DEFAULT_RETENTION,
  now: number = Date.now(),
  keepAllReady: ReadonlySet<string> = new Set(),
): Set<string> {
  checkPolicy(policy);
  const byWorkspace = new Map<string, RetentionCandidate[]>();
  for (const c of checkpoints) byWorkspace.set(c.workspaceId, [...(byWorkspace.get(c.workspaceId) ?? []), c]);
  const forget = new Set<string>();
  for (const [workspaceId, list] of byWorkspace) {
    const keep = keptReady(list, policy);
    const exempt = keepAllReady.has(workspaceId);
    for (const c of list) {
      if (heads.has(c.id) || (exempt && c.status === 'ready')) continue;
      const expired =
        c.status === 'ready'
          ? !keep.has(c.id)
          : c.status === 'pending'
            ? now - c.createdAt >= MAX_CHECKPOINT_MS
            : now - (c.finishedAt ?? c.createdAt) >= FAILED_RETENTION_MS;
      if (expired) forget.add(c.id);
    }
  }
  return forget;
}

/** Ready checkpoints of one workspace that the policy keeps. */
function keptReady(list: readonly RetentionCandidate[], policy: RetentionPolicy): Set<string> {
  const ready = list
    .filter((c) => c.status === 'ready')
    .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const keep = new Set(ready.slice(0, policy.keepLast).map((c) => c.id));
  const days = new Set<number>();
  for (const c of ready) {
    if (days.size >= policy.keepDaily) break;
    const day = Math.floor(c.createdAt / DAY_MS);
    if (days.has(day)) continue;
    days.add(day);
    keep.add(c.id);
  }
  return keep;
}

/** What {@link applyRetention} decided. */
export interface RetentionResult {
  /** Ids retention forgets (deleted unless it was a dry run). */
  readonly forgotten: ReadonlySet<string>;
  /** Every checkpoint that stays, ready or not. */
  readonly retained: readonly Checkpoint[];
}

/**
 * Loads every checkpoint and workspace head, selects what the policy forgets (never a ready
 * checkpoint of a bundle workspace, `BUNDLE_WORKSPACE`) and, unless
 * `dryRun`, deletes those rows. The delete itself refuses to remove a current head, so a head
 * that moved while this ran is still safe.
 */
export async function applyRetention(meta: MetadataStore, policy: RetentionPolicy, now: number, dryRun: boolean): Promise<RetentionResult> {
  const checkpoints = await meta.checkpoints.listAll();
  const workspaces = await meta.workspaces.listAll();
  const heads = new Set(workspaces.flatMap((w) => (w.headCheckpointId === null ? [] : [w.headCheckpointId])));
  // Deployment bundles are kept whatever the policy: a deployment naming one may start a sandbox at any time.
  const bundles = new Set(workspaces.filter((w) => isReservedWorkspace(w.name)).map((w) => w.id));
  const forgotten = selectForgettable(checkpoints, heads, policy, now, bundles);
  if (!dryRun && forgotten.size > 0) await meta.checkpoints.deleteMany([...forgotten]);
  return { forgotten, retained: checkpoints.filter((c) => !forgotten.has(c.id)) };
}
