import type { PackInfo } from '../../metadata/metadata-store.js';
import { TARGET_PACK_BYTES } from '../../objects/pack-writer.js';
import { MAX_CHECKPOINT_MS } from '../snapshot-deps.js';

/**
 * Packs smaller than this are *small*: GC compacts them (DESIGN section 7). Every folder write
 * and every small checkpoint seals its own pack, so a thousand 4 KiB writes leave a thousand
 * blobs; an eighth of {@link TARGET_PACK_BYTES} (2 MiB) is well below what a writer that had
 * enough to write would have sealed.
 */
export const DEFAULT_COMPACT_BELOW_BYTES = TARGET_PACK_BYTES / 8;
/**
 * A small pack is compacted only once it is at least this old. A writer whose commit was
 * under way when the pack was registered (one that found the pack's objects or its very bytes
 * already present) runs no longer than MAX_CHECKPOINT_MS, the same bound upload intents rely
 * on, so after it nothing in flight can still depend on the pack being left as it is. It also
 * lets small packs accumulate, so one run folds many of them at once instead of rewriting
 * the same few every run.
 */
export const COMPACT_MIN_AGE_MS = MAX_CHECKPOINT_MS;
/** Fewer old small packs than this (and less than one target pack of them) are not worth a rewrite. */
export const COMPACT_MIN_PACKS = 8;
/** Small packs compacted per run at most (oldest first): each costs an index query; the rest wait for the next run. */
export const COMPACT_MAX_PACKS_PER_RUN = 4096;
/** Bytes of small packs compacted per run at most (oldest first): every byte is read, verified and rewritten. */
export const COMPACT_MAX_BYTES_PER_RUN = 1024 * 1024 * 1024;

/** What {@link selectSmallPacks} needs to know. */
export interface CompactionRule {
  /** Packs below this many bytes are small; 0 disables compaction. */
  readonly belowBytes: number;
  /** Epoch ms the GC run treats as now. */
  readonly now: number;
}

/**
 * The small packs one GC run compacts, oldest first: among `candidates` (open packs with live
 * objects that are neither empty nor sparse; the caller filters), those below
 * `rule.belowBytes` and registered at least {@link COMPACT_MIN_AGE_MS} before `rule.now`,
 * capped at {@link COMPACT_MAX_PACKS_PER_RUN} packs and {@link COMPACT_MAX_BYTES_PER_RUN}
 * bytes. Empty unless there are at least {@link COMPACT_MIN_PACKS} of them or they total at
 * least one {@link TARGET_PACK_BYTES}. Pure: a dry run and the real run with the same inputs
 * select the same packs.
 */
export function selectSmallPacks(candidates: readonly PackInfo[], rule: CompactionRule): PackInfo[] {
  if (rule.belowBytes <= 0) return [];
  const oldEnough = rule.now - COMPACT_MIN_AGE_MS;
  const small = candidates
    .filter((p) => p.condemnedAt === null && p.size < rule.belowBytes && p.createdAt <= oldEnough)
    .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const chosen: PackInfo[] = [];
  let bytes = 0;
  for (const pack of small) {
    if (chosen.length >= COMPACT_MAX_PACKS_PER_RUN || bytes + pack.size > COMPACT_MAX_BYTES_PER_RUN) break;
    chosen.push(pack);
    bytes += pack.size;
  }
  return chosen.length >= COMPACT_MIN_PACKS || bytes >= TARGET_PACK_BYTES ? chosen : [];
}
