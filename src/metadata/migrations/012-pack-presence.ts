import type { Migration } from './migration.js';

/**
 * What the engine knows of each pack's presence in the blob store, and what a lost pack
 * cost (issue 29). `packs.missing_at` is when a pack was found missing (a presence sweep's
 * listing and a confirming stat, or a read that answered `NOT_FOUND`); while it is set the
 * pack's objects count as missing, so dedup never hands one out and the next checkpoint that
 * has the bytes writes them again. `packs.damage_checked_at` is when the checkpoints that
 * reference a missing pack were last assessed. `checkpoints.damage` is the JSON of what a
 * ready checkpoint lost (missing packs, the first damaged paths and their count), `NULL` when
 * it is whole. The partial indexes keep "which packs are known missing?" (asked by every
 * checkpoint commit) and "which checkpoints are damaged?" (asked by every presence sweep)
 * lookups of a few rows.
 */
function packPresence(t: { text: string; int: string }): string[] {
  return [
    `ALTER TABLE packs ADD COLUMN missing_at ${t.int}`,
    `ALTER TABLE packs ADD COLUMN damage_checked_at ${t.int}`,
    `ALTER TABLE checkpoints ADD COLUMN damage ${t.text}`,
    'CREATE INDEX packs_missing_idx ON packs (missing_at) WHERE missing_at IS NOT NULL',
    'CREATE INDEX checkpoints_damaged_idx ON checkpoints (id) WHERE damage IS NOT NULL',
  ];
}

/** Version 12: `pack_presence`. */
export const migration: Migration = {
  version: 12,
  name: 'pack_presence',
  sqlite: packPresence({ text: 'TEXT', int: 'INTEGER' }),
  postgres: packPresence({ text: 'text', int: 'bigint' }),
};
