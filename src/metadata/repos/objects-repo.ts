import type { Kysely } from 'kysely';
import type { Database, ObjectCodec, ObjectKind } from '../schema.js';
import { type RepoContext, withinTransaction } from './repo-context.js';

/**
 * Rows per INSERT statement. 500 rows x 7 columns = 3,500 bound parameters, far below
 * SQLite's 32,766 and PostgreSQL's 65,535; 2,000-row batches measured only ~10% faster.
 */
export const INSERT_BATCH_ROWS = 500;
/**
 * Ids per `IN (…)` lookup in {@link ObjectIndexRepo.findMissing} and {@link ObjectIndexRepo.locate}
 * (one bound parameter each, under both dialects' limits). Large batches matter on
 * PostgreSQL: while the index is small the planner answers each batch with one sequential
 * scan, so 100k ids took 1.7 s in batches of 1,000 and 0.4 s in batches of 10,000.
 */
export const LOOKUP_BATCH_IDS = 10_000;

/** A pack as registered in the index; `id` is the SHA-256 of the pack blob. */
export interface PackRecord {
  readonly id: string;
  readonly kind: ObjectKind;
  /** Bytes of the whole pack blob. */
  readonly size: number;
  readonly objectCount: number;
}

/** Where an object's bytes live: pack, byte range, and how to decode them. */
export interface ObjectLocation {
  readonly packId: string;
  readonly kind: ObjectKind;
  /** Offset of the stored bytes inside the pack. */
  readonly offset: number;
  /** Stored (possibly compressed) length. */
  readonly length: number;
  /** Length after decoding; the object id is the SHA-256 of those bytes. */
  readonly rawLength: number;
  readonly codec: ObjectCodec;
}

/** An object-index row: the object id (SHA-256 of its raw bytes) and its location. */
export interface ObjectRecord extends ObjectLocation {
  readonly id: string;
}

/**
 * The object index (`packs`, `objects`). An object is *present* when it has a row whose pack
 * is not condemned; objects of condemned packs count as missing everywhere.
 */
export interface ObjectIndexRepo {
  /**
   * Registers packs and their objects, atomically (inside the caller's transaction, or a
   * new one), in batches of {@link INSERT_BATCH_ROWS}. Idempotent: a pack or object already
   * present is left as it is (the first writer's location wins). Re-registering a condemned
   * pack revives it; an object whose row points into a condemned pack is re-pointed to the
   * new location, so re-uploading what GC condemned makes it present again. Duplicate ids in
   * the input are collapsed to their first occurrence.
   */
  insertPacksAndObjects(packs: readonly PackRecord[], objects: readonly ObjectRecord[]): Promise<void>;
  /** The subset of `ids` that is not present, in batches of {@link LOOKUP_BATCH_IDS}. */
  findMissing(ids: Iterable<string>): Promise<Set<string>>;
  /** Locations of the present objects among `ids`; missing ids have no entry. */
  locate(ids: Iterable<string>): Promise<Map<string, ObjectLocation>>;
  /**
   * Marks packs condemned (GC decided they are unreferenced): their objects count as missing
   * from now on. Already-condemned and unknown packs are ignored. Resolves with how many
   * packs this call condemned.
   */
  condemnPacks(packIds: readonly string[]): Promise<number>;
}

/** Builds the object-index repository over `context.db` (a store or a transaction). */
export function createObjectIndexRepo({ db, now }: RepoContext): ObjectIndexRepo {
  const presentRows = (executor: Kysely<Database>, ids: readonly string[]) =>
    executor
      .selectFrom('objects')
      .innerJoin('packs', 'packs.id', 'objects.pack_id')
      .where('objects.id', 'in', ids)
      .where('packs.condemned_at', 'is', null);

  return {
    async insertPacksAndObjects(packs, objects) {
      const at = now();
      const packRows = unique(packs).map((p) => ({
        id: p.id,
        kind: p.kind,
        size: p.size,
        object_count: p.objectCount,
        created_at: at,
        condemned_at: null,
      }));
      const objectRows = unique(objects).map((o) => ({
        id: o.id,
        pack_id: o.packId,
        kind: o.kind,
        offset: o.offset,
        length: o.length,
        raw_length: o.rawLength,
        codec: o.codec,
      }));
      if (packRows.length === 0 && objectRows.length === 0) return;
      await withinTransaction(db, async (trx) => {
        for (const batch of batches(packRows, INSERT_BATCH_ROWS)) {
          await trx
            .insertInto('packs')
            .values(batch)
            .onConflict((oc) => oc.column('id').doUpdateSet({ condemned_at: null }).where('packs.condemned_at', 'is not', null))
            .execute();
        }
        for (const batch of batches(objectRows, INSERT_BATCH_ROWS)) {
          await trx
            .insertInto('objects')
            .values(batch)
            .onConflict((oc) =>
              oc
                .column('id')
                .doUpdateSet((eb) => ({
                  pack_id: eb.ref('excluded.pack_id'),
                  kind: eb.ref('excluded.kind'),
                  offset: eb.ref('excluded.offset'),
                  length: eb.ref('excluded.length'),
                  raw_length: eb.ref('excluded.raw_length'),
                  codec: eb.ref('excluded.codec'),
                }))
                .where(({ exists, selectFrom }) =>
                  exists(
                    selectFrom('packs')
                      .select('packs.id')
                      .whereRef('packs.id', '=', 'objects.pack_id')
                      .where('packs.condemned_at', 'is not', null),
                  ),
                ),
            )
            .execute();
        }
      });
    },

    async findMissing(ids) {
      const missing = new Set(ids);
      for (const batch of batches([...missing], LOOKUP_BATCH_IDS)) {
        const rows = await presentRows(db, batch).select('objects.id').execute();
        for (const row of rows) missing.delete(row.id);
      }
      return missing;
    },

    async locate(ids) {
      const found = new Map<string, ObjectLocation>();
      for (const batch of batches([...new Set(ids)], LOOKUP_BATCH_IDS)) {
        const rows = await presentRows(db, batch)
          .select([
            'objects.id',
            'objects.pack_id',
            'objects.kind',
            'objects.offset',
            'objects.length',
            'objects.raw_length',
            'objects.codec',
          ])
          .execute();
        for (const r of rows) {
          found.set(r.id, { packId: r.pack_id, kind: r.kind, offset: r.offset, length: r.length, rawLength: r.raw_length, codec: r.codec });
        }
      }
      return found;
    },

    async condemnPacks(packIds) {
      let condemned = 0;
      const at = now();
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const result = await db
          .updateTable('packs')
          .set({ condemned_at: at })
          .where('id', 'in', batch)
          .where('condemned_at', 'is', null)
          .executeTakeFirst();
        condemned += Number(result.numUpdatedRows);
      }
      return condemned;
    },
  };
}

/** Keeps the first record for each id. */
function unique<T extends { readonly id: string }>(records: readonly T[]): T[] {
  const seen = new Map<string, T>();
  for (const record of records) if (!seen.has(record.id)) seen.set(record.id, record);
  return [...seen.values()];
}

function* batches<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let start = 0; start < items.length; start += size) yield items.slice(start, start + size);
}
