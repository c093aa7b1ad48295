import { isStorableMode } from '../core/modes.js';
import { IntegrityError } from '../errors.js';
import { EXCLUSION_REASONS } from '../rules/exclusion.js';

/** What a checkpoint left out (or kept changed), counted by reason. */
export interface ExcludedSummary {
  readonly total: number;
  readonly byReason: Record<string, number>;
}

/** Figures of a checkpoint row this module reads (written by the host at commit: trusted, but checked for shape). */
interface RecordedStats {
  readonly excludedCount?: unknown;
  readonly excludedByReason?: unknown;
  readonly excluded?: unknown;
  readonly root?: unknown;
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const statsOf = (checkpoint: { readonly stats: unknown }): RecordedStats =>
  checkpoint.stats !== null && typeof checkpoint.stats === 'object' ? (checkpoint.stats as RecordedStats) : {};

/**
 * What checkpoint `checkpoint` left out, by reason, for a restore's receipt: the counts the
 * checkpoint recorded over all its exclusions (`stats.excludedByReason`) or, for a checkpoint
 * older than those, the stored list of the first exclusions counted, with `total` the
 * recorded `excludedCount`. Unknown reasons and malformed counts are dropped.
 */
export function excludedSummary(checkpoint: { readonly stats: unknown }): ExcludedSummary {
  const stats = statsOf(checkpoint);
  const byReason: Record<string, number> = {};
  const recorded = stats.excludedByReason;
  if (recorded !== null && typeof recorded === 'object') {
    for (const reason of EXCLUSION_REASONS) {
      const n = (recorded as Record<string, unknown>)[reason];
      if (isCount(n) && n > 0) byReason[reason] = n;
    }
  } else if (Array.isArray(stats.excluded)) {
    for (const e of stats.excluded as Array<{ reason?: unknown }>) {
      const reason = EXCLUSION_REASONS.find((r) => r === e?.reason);
      if (reason !== undefined) byReason[reason] = (byReason[reason] ?? 0) + 1;
    }
  }
  const counted = Object.values(byReason).reduce((n, c) => n + c, 0);
  return { total: isCount(stats.excludedCount) ? Math.max(stats.excludedCount, counted) : counted, byReason };
}

/**
 * The root directory's recorded permission bits and mtime (`stats.root`), or undefined for a
 * checkpoint older than that record (its restore leaves the root `0755`, mtime untouched). A
 * record that is present but malformed is `INTEGRITY`: it is not guessed around.
 */
export function recordedRoot(checkpoint: { readonly id: string; readonly stats: unknown }): { mode: number; mtimeMs: number } | undefined {
  const root = statsOf(checkpoint).root as { mode?: unknown; mtimeMs?: unknown } | null | undefined;
  if (root === undefined || root === null) return undefined;
  if (typeof root !== 'object' || !isStorableMode(root.mode) || !Number.isSafeInteger(root.mtimeMs)) {
    throw new IntegrityError('INTEGRITY', `checkpoint ${checkpoint.id} records a malformed root directory`, {
      data: { checkpointId: checkpoint.id, field: 'root' },
    });
  }
  return { mode: root.mode, mtimeMs: root.mtimeMs as number };
}
