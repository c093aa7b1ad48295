import type { Selectable } from 'kysely';
import type { DeletionJournalTable } from '../schema.js';
import type { RepoContext } from './repo-context.js';

/** Ids per statement (one bound parameter each, far below both dialects' limits). */
const BATCH_IDS = 1000;

/** A pack blob GC found without an index row, and when it first saw it so. */
export interface QueuedOrphan {
  readonly packId: string;
  readonly firstSeenAt: number;
}

/** One entry of the deletion journal. */
export interface DeletionRecord {
  readonly packId: string;
  /** Blob-store key being deleted. */
  readonly key: string;
  readonly startedAt: number;
  /** `null` while the deletion is unfinished (a crashed GC left it). */
  readonly finishedAt: number | null;
}

/**
 * GC bookkeeping (`gc_queue`, `deletion_journal`). Timestamps are passed in by GC rather than
 * taken from the store's clock, so one GC run compares everything against one `now`.
 */
export interface GcRepo {
  /** Records `packIds` as seen unindexed at `at`; packs already queued keep their first sighting. */
  queueOrphans(packIds: readonly string[], at: number): Promise<void>;
  /** Every queued orphan, ordered by pack id. */
  listQueue(): Promise<QueuedOrphan[]>;
  /** Forgets queued orphans (deleted, indexed meanwhile, or gone). Unknown ids are ignored. */
  dequeue(packIds: readonly string[]): Promise<void>;
  /**
   * Journals a deletion before the blob is touched. Idempotent: a pack journaled before (a
   * pack re-uploaded and condemned again) is reset to unfinished with the new start time.
   */
  startDeletion(entry: { packId: string; key: string }, at: number): Promise<void>;
  /** Marks a journaled deletion finished (blob and index rows gone, or the deletion was called off). */
  finishDeletion(packId: string, at: number): Promise<void>;
  /** Deletions a crashed run left unfinished, oldest first. */
  unfinishedDeletions(): Promise<DeletionRecord[]>;
  /**
   * The packs among `packIds` whose deletion is under way or finished at or after `since`:
   * a blob a checkpoint found already present may be gone or about to go.
   */
  deletionsSince(packIds: readonly string[], since: number): Promise<string[]>;
  /** Drops finished journal entries older than `before`; resolves with how many. */
  pruneFinishedDeletions(before: number): Promise<number>;
}

/** Builds the GC repository over `context.db` (a store or a transaction). */
export function createGcRepo({ db }: RepoContext): GcRepo {
  return {
    async queueOrphans(packIds, at) {
      const unique = [...new Set(packIds)];
      for (let i = 0; i < unique.length; i += BATCH_IDS) {
        const values = unique.slice(i, i + BATCH_IDS).map((pack_id) => ({ pack_id, first_seen_at: at }));
        await db
          .insertInto('gc_queue')
          .values(values)
          .onConflict((oc) => oc.column('pack_id').doNothing())
          .execute();
      }
    },
    async listQueue() {
      const rows = await db.selectFrom('gc_queue').selectAll().orderBy('pack_id').execute();
      return rows.map((r) => ({ packId: r.pack_id, firstSeenAt: r.first_seen_at }));
    },
    async dequeue(packIds) {
      const unique = [...new Set(packIds)];
      for (let i = 0; i < unique.length; i += BATCH_IDS) {
        await db
          .deleteFrom('gc_queue')
          .where('pack_id', 'in', unique.slice(i, i + BATCH_IDS))
          .execute();
      }
    },
    async startDeletion(entry, at) {
      await db
        .insertInto('deletion_journal')
        .values({ pack_id: entry.packId, key: entry.key, started_at: at, finished_at: null })
        .onConflict((oc) => oc.column('pack_id').doUpdateSet({ key: entry.key, started_at: at, finished_at: null }))
        .execute();
    },
    async finishDeletion(packId, at) {
      await db.updateTable('deletion_journal').set({ finished_at: at }).where('pack_id', '=', packId).execute();
    },
    async unfinishedDeletions() {
      const rows = await db
        .selectFrom('deletion_journal')
        .selectAll()
        .where('finished_at', 'is', null)
        .orderBy('started_at')
        .orderBy('pack_id')
        .execute();
      return rows.map(toDeletion);
    },
    async deletionsSince(packIds, since) {
      if (packIds.length === 0) return [];
      const rows = await db
        .selectFrom('deletion_journal')
        .select('pack_id')
        .where('pack_id', 'in', [...new Set(packIds)])
        .where((eb) => eb.or([eb('finished_at', 'is', null), eb('finished_at', '>=', since)]))
        .execute();
      return rows.map((r) => r.pack_id);
    },
    async pruneFinishedDeletions(before) {
      const result = await db
        .deleteFrom('deletion_journal')
        .where('finished_at', 'is not', null)
        .where('finished_at', '<', before)
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

function toDeletion(row: Selectable<DeletionJournalTable>): DeletionRecord {
  return { packId: row.pack_id, key: row.key, startedAt: row.started_at, finishedAt: row.finished_at };
}
