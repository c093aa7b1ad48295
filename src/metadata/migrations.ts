/**
 * The schema history, listed in one place: one file per version under `migrations/`
 * (`NNN-name.ts`), each with the raw SQL for both dialects side by side.
 *
 * Rules: versions are consecutive from 1 and never reused; a released migration is never
 * edited (add a new one instead); statements run in order inside one transaction together
 * with the version-table insert, so a migration applies completely or not at all.
 */

import { migration as v1 } from './migrations/001-initial-objects-and-snapshots.js';
import { migration as v2 } from './migrations/002-gc-queue-and-deletion-journal.js';
import { migration as v3 } from './migrations/003-runs-deployments-leases-tokens.js';
import { migration as v4 } from './migrations/004-idempotency-keys.js';
import { migration as v5 } from './migrations/005-principal-receipts-and-upload-intents.js';
import { migration as v6 } from './migrations/006-object-block-offset.js';
import { migration as v7 } from './migrations/007-objects-pack-seq.js';
import { migration as v8 } from './migrations/008-users-run-bindings-scoped-tokens.js';
import { migration as v9 } from './migrations/009-work-folders.js';
import { migration as v10 } from './migrations/010-folder-sync-states.js';
import { migration as v11 } from './migrations/011-user-owners-by-id.js';
import { migration as v12 } from './migrations/012-pack-presence.js';
import { migration as v13 } from './migrations/013-sandbox-instances-and-locks.js';
import { migration as v14 } from './migrations/014-checkpoint-labels-and-forks.js';
import { migration as v15 } from './migrations/015-checkpoint-writer-heartbeat.js';
import type { Migration } from './migrations/migration.js';

export type { Migration } from './migrations/migration.js';

/**
 * Every migration this build knows, ascending by version. The migrator refuses a database
 * whose highest applied version is above the last entry here.
 */
export const MIGRATIONS: readonly Migration[] = Object.freeze([v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15]);

/** The highest schema version this build can run against. */
export const LATEST_SCHEMA_VERSION: number = MIGRATIONS.at(-1)?.version ?? 0;
