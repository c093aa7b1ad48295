/**
 * SQL fragments several migrations share. A released migration is never edited, so neither is
 * a fragment it uses: a changed check is a new constant and a new migration.
 */

/**
 * Content ids are 64 hex characters. Only the length is checked: a per-row regex (or GLOB)
 * made bulk inserts of the object index 2x slower on PostgreSQL, and ids are produced by
 * Holdfast's own hashing, never typed in.
 */
export const ID64 = (column: string) => `length(${column}) = 64`;
/** An object is file data or a tree. */
export const KIND = `kind IN ('data', 'tree')`;
/** How an object is stored in its pack. */
export const CODEC = `codec IN ('none', 'zstd')`;
/** A checkpoint's states. */
export const STATUS = `status IN ('pending', 'ready', 'failed')`;
/** Why a checkpoint was taken. */
export const REASON = `reason IN ('turn', 'periodic', 'final', 'manual', 'upgrade', 'shutdown')`;
/** A checkpoint is finished exactly when it left `pending`; ready has a tree, failed has an error. */
export const CHECKPOINT_STATE_CHECKS = [
  `CONSTRAINT checkpoints_finished_check CHECK ((status = 'pending') = (finished_at IS NULL))`,
  `CONSTRAINT checkpoints_ready_tree_check CHECK (status <> 'ready' OR root_tree IS NOT NULL)`,
  `CONSTRAINT checkpoints_failed_error_check CHECK (status <> 'failed' OR error IS NOT NULL)`,
].join(',\n  ');
/** Solid-block members only (version 6, and again in the objects table version 7 rebuilds). */
export const BLOCK_OFFSET_CHECK = `CONSTRAINT objects_block_offset_check CHECK (block_offset IS NULL OR (block_offset >= 0 AND codec = 'zstd'))`;
