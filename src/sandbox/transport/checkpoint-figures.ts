import { isStorableMode } from '../../core/modes.js';
import { IntegrityError } from '../../errors.js';

/** The root directory as a checkpoint recorded it (`stats.root`). */
export interface RecordedRoot {
  readonly mode: number;
  readonly mtimeMs: number;
}

/** What a checkpoint left out, as a restore receipt reports it. */
export interface RecordedExclusions {
  readonly total: number;
  readonly byReason: Record<string, number>;
}

interface StatsShape {
  readonly root?: unknown;
  readonly excludedByReason?: unknown;
  readonly excluded?: unknown;
  readonly excludedCount?: unknown;
}

const statsOf = (checkpoint: { readonly stats: unknown }): StatsShape =>
  typeof checkpoint.stats === 'object' && checkpoint.stats !== null ? (checkpoint.stats as StatsShape) : {};
const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/**
 * The root directory's mode and mtime from a checkpoint's stats, or undefined for a
 * checkpoint taken before they were recorded (its root is restored as before: 0755, mtime
 * left alone). A present but malformed record is `INTEGRITY`: it is not guessed around.
 */
export function recordedRoot(checkpoint: { readonly id: string; readonly stats: unknown }): RecordedRoot | undefined {
  const root = statsOf(checkpoint).root as { mode?: unknown; mtimeMs?: unknown } | undefined | null;
  if (root === undefined || root === null) return undefined;
  if (typeof root !== 'object' || !isStorableMode(root.mode) || !Number.isSafeInteger(root.mtimeMs)) {
    throw new IntegrityError('INTEGRITY', `checkpoint ${checkpoint.id} records a malformed root directory`, {
      data: { checkpointId: checkpoint.id, field: 'root' },
    });
  }
  return { mode: root.mode, mtimeMs: root.mtimeMs as number };
}

/**
 * What a checkpoint left out: `stats.excludedByReason` (counted over every exclusion when it
 * was taken), or for an older checkpoint its stored list counted by reason, with the total
 * it recorded (the list is cut at 100 entries; the total is not).
 */
export function recordedExclusions(checkpoint: { readonly stats: unknown }): RecordedExclusions {
  const stats = statsOf(checkpoint);
  const byReason: Record<string, number> = {};
  const given = stats.excludedByReason;
  if (typeof given === 'object' && given !== null && !Array.isArray(given)) {
    for (const [reason, n] of Object.entries(given)) if (isCount(n)) byReason[reason] = n;
  } else if (Array.isArray(stats.excluded)) {
    for (const e of stats.excluded as Array<{ reason?: unknown }>) {
      if (typeof e?.reason === 'string') byReason[e.reason] = (byReason[e.reason] ?? 0) + 1;
    }
  }
  const counted = Object.values(byReason).reduce((a, b) => a + b, 0);
  return { total: isCount(stats.excludedCount) ? Math.max(stats.excludedCount, counted) : counted, byReason };
}
