import type { Migration } from './migration.js';
import { BLOCK_OFFSET_CHECK } from './sql-checks.js';

/**
 * Solid blocks: small objects compressed together as one zstd frame in a pack. A member's
 * row names the block's stored range (`offset`, `length`, codec `zstd`) and its own offset
 * inside the decompressed block; `NULL` for objects stored on their own. Adding a nullable
 * column rewrites no rows on either dialect.
 */
const blockOffsetSqlite: readonly string[] = [`ALTER TABLE objects ADD COLUMN block_offset INTEGER ${BLOCK_OFFSET_CHECK}`];
const blockOffsetPostgres: readonly string[] = [`ALTER TABLE objects ADD COLUMN block_offset bigint ${BLOCK_OFFSET_CHECK}`];

/** Version 6: `object_block_offset`. */
export const migration: Migration = { version: 6, name: 'object_block_offset', sqlite: blockOffsetSqlite, postgres: blockOffsetPostgres };
