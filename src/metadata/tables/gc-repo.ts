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

/** A pack about to be uploaded by a writer that has not committed it yet. */
export interface UploadIntent {
  readonly packId: string;
  /** The writer: a checkpoint id, or a repack's own id. */
  readonly writerId: string;
  /** The pending checkpoint the pack is written for; `null` for a repack. */
  readonly checkpointId: string | null;
}

/**
 * GC bookkeeping (`gc_queue`, `deletion_journal`, `upload_intents`). Timestamps are passed in by GC rather than
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
  /**
   * Records, durably and before the blob is written, that a writer is about to upload a pack
   * (stamped with the store's clock). Idempotent per pack and writer.
   */
  recordIntent(intent: UploadIntent): Promise<void>;
  /** Forgets every intent of `writerId`: its packs were registered (in the same transaction) or it failed. */
  releaseIntents(writerId: string): Promise<void>;
  /**
   * The packs among `packIds` that a writer may still register, so GC must not delete them,
   * whatever its grace: they have an intent whose checkpoint is still pending, or one recorded
   * at or after `since` (a repack, or a writer that died and could still be committing).
   */
  protectedPacks(packIds: readonly string[], since: number): Promise<Set<string>>;
  /** Drops intents recorded before `before` whose checkpoint is not pending; resolves with how many. */
  pruneIntents(before: number): Promise<number>;
}

/** Builds the GC repository over `context.db` (a store or a transaction). */
export function createGcRepo({ db, now }: RepoContext): GcRepo {
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
    async recordIntent(intent) {
      await db
        .insertInto('upload_intents')
        .values({ pack_id: intent.packId, writer_id: intent.writerId, checkpoint_id: intent.checkpointId, created_at: now() })
        .onConflict((oc) => oc.columns(['pack_id', 'writer_id']).doNothing())
        .execute();
    },
    async releaseIntents(writerId) {
      await db.deleteFrom('upload_intents').where('writer_id', '=', writerId).execute();
    },
    async protectedPacks(packIds, since) {
      const found = new Set<string>();
      const unique = [...new Set(packIds)];
      for (let i = 0; i < unique.length; i += BATCH_IDS) {
        const rows = await db
          .selectFrom('upload_intents')
          .leftJoin('checkpoints', 'checkpoints.id', 'upload_intents.checkpoint_id')
          .select('upload_intents.pack_id')
          .where('upload_intents.pack_id', 'in', unique.slice(i, i + BATCH_IDS))
          .where((eb) => eb.or([eb('checkpoints.status', '=', 'pending'), eb('upload_intents.created_at', '>=', since)]))
          .execute();
        for (const row of rows) found.add(row.pack_id);
      }
      return found;
    },
    async pruneIntents(before) {
      const result = await db
        .deleteFrom('upload_intents')
        .where('created_at', '<', before)
        .where((eb) =>
          eb.or([
            eb('checkpoint_id', 'is', null),
            eb('checkpoint_id', 'not in', eb.selectFrom('checkpoints').select('id').where('status', '=', 'pending')),
          ]),
        )
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

function toDeletion(row: Selectable<DeletionJournalTable>): DeletionRecord {
  return { packId: row.pack_id, key: row.key, startedAt: row.started_at, finishedAt: row.finished_at };
}
