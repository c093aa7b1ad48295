import type { Migration } from './migration.js';

/**
 * Checkpoint labels, metadata and forks (issue 27): `label` (at most 200 characters), `meta`
 * (a flat JSON object as text, at most 4096 bytes; `snapshot/checkpoint-note.ts` holds the
 * full rules and refuses credentials) and `forked_from` (the checkpoint of the same tenant a
 * fork's first checkpoint shares its tree with; not a foreign key: retention may drop it).
 * Adding nullable columns rewrites no rows on either dialect; existing checkpoints have none.
 * The CHECKs repeat the bounds so that no writer can store more than the API accepts.
 */
const labelsSqlite: readonly string[] = [
  'ALTER TABLE checkpoints ADD COLUMN label TEXT CONSTRAINT checkpoints_label_check CHECK (label IS NULL OR length(label) BETWEEN 1 AND 200)',
  'ALTER TABLE checkpoints ADD COLUMN meta TEXT CONSTRAINT checkpoints_meta_check CHECK (meta IS NULL OR length(CAST(meta AS BLOB)) <= 4096)',
  'ALTER TABLE checkpoints ADD COLUMN forked_from TEXT',
];
const labelsPostgres: readonly string[] = [
  'ALTER TABLE checkpoints ADD COLUMN label text CONSTRAINT checkpoints_label_check CHECK (label IS NULL OR char_length(label) BETWEEN 1 AND 200)',
  'ALTER TABLE checkpoints ADD COLUMN meta text CONSTRAINT checkpoints_meta_check CHECK (meta IS NULL OR octet_length(meta) <= 4096)',
  'ALTER TABLE checkpoints ADD COLUMN forked_from text',
];

/** Version 14: `checkpoint_labels_and_forks`. */
export const migration: Migration = {
  version: 14,
  name: 'checkpoint_labels_and_forks',
  sqlite: labelsSqlite,
  postgres: labelsPostgres,
};
