import { CompiledQuery, type Insertable, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, ObjectCodec, ObjectKind, ObjectsTable } from '../schema.js';
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

/** First key of the two-key PostgreSQL advisory locks on packs ('HF'). */
const PACK_LOCK_NAMESPACE = 0x4846;

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
  /**
   * Present when the object is a member of a solid block: `offset`/`length` are the block's
   * stored range (a zstd frame) and this is the object's offset inside the decompressed block.
   */
  readonly blockOffset?: number;
}

/** An object-index row: the object id (SHA-256 of its raw bytes) and its location. */
export interface ObjectRecord extends ObjectLocation {
  readonly id: string;
}

/** A pack row with its lifecycle timestamps, as GC and verify see it. */
export interface PackInfo extends PackRecord {
  readonly createdAt: number;
  /** When GC condemned it; `null` while its objects count as present. */
  readonly condemnedAt: number | null;
  /** When it was found missing from the blob store; `null` while it is not known missing. */
  readonly missingAt: number | null;
  /** When the checkpoints referencing it were last assessed for damage (only meaningful while missing). */
  readonly damageCheckedAt: number | null;
}

/**
 * The object index (`packs`, `objects`). An object is *present* when it has a row whose pack
 * is neither condemned nor known missing from the blob store; objects of condemned and of
 * missing packs count as missing everywhere (dedup included), so a checkpoint that has their
 * bytes writes them again. The rows of a missing pack are kept: they say what was lost, and
 * they count again if the pack comes back.
 */
export interface ObjectIndexRepo {
  /**
   * Registers packs and their objects, atomically (inside the caller's transaction, or a
   * new one), in batches of {@link INSERT_BATCH_ROWS}. Idempotent: a pack or object already
   * present is left as it is (the first writer's location wins). Re-registering a condemned or
   * missing pack revives it (its writer just stored it); an object whose row points into a
   * condemned or missing pack is re-pointed to the new location, so re-uploading what GC
   * condemned or what the blob store lost makes it present again. Duplicate ids in
   * the input are collapsed to their first occurrence.
   */
  insertPacksAndObjects(packs: readonly PackRecord[], objects: readonly ObjectRecord[]): Promise<void>;
  /** The subset of `ids` that is not present, in batches of {@link LOOKUP_BATCH_IDS}. */
  findMissing(ids: Iterable<string>): Promise<Set<string>>;
  /**
   * Locations of the present objects among `ids`; missing ids have no entry. With
   * `includeCondemned`, objects of condemned and of known-missing packs are located too:
   * condemned blobs stay readable through GC's grace period, so a reader need not fail while
   * GC is deciding, and a read of a missing pack fails naming the pack (or succeeds, if it came
   * back since).
   */
  locate(ids: Iterable<string>, options?: { readonly includeCondemned?: boolean }): Promise<Map<string, ObjectLocation>>;
  /**
   * Serialises work on these packs between a checkpoint's commit and GC's decision to delete
   * them. Must run inside a transaction; the locks are released when it ends. PostgreSQL takes
   * transaction-scoped advisory locks (in sorted order, so two lockers cannot deadlock);
   * SQLite needs nothing, since its write transactions already run one at a time.
   */
  lockPacks(packIds: readonly string[]): Promise<void>;
  /** Whether each known pack is `live` or `condemned`; unknown packs have no entry. */
  packStates(packIds: readonly string[]): Promise<Map<string, 'live' | 'condemned'>>;
  /**
   * Marks packs condemned (GC decided they are unreferenced): their objects count as missing
   * from now on. Already-condemned and unknown packs are ignored. Resolves with how many
   * packs this call condemned. `at` (epoch ms) stamps `condemned_at`, default the store's
   * clock; GC passes its own so its grace period is measured on one clock.
   */
  condemnPacks(packIds: readonly string[], at?: number): Promise<number>;
  /**
   * Clears `condemned_at` on the given packs (a second check found a live object in them), so
   * their objects count as present again. Unknown and uncondemned packs are ignored. Resolves
   * with how many packs this call revived.
   */
  revivePacks(packIds: readonly string[]): Promise<number>;
  /** Every pack row, condemned ones included, ordered by id. */
  listPacks(): Promise<PackInfo[]>;
  /**
   * Records packs as found missing from the blob store at `at` (epoch ms, default the store's
   * clock): their objects count as missing from now on. Condemned, already-missing and unknown
   * packs are ignored. Resolves with the ids this call marked, ascending.
   */
  markPacksMissing(packIds: readonly string[], at?: number): Promise<string[]>;
  /**
   * Clears the missing mark of packs seen present again (an operator restored the blob): their
   * objects that no writer re-pointed count as present again. Resolves with how many packs
   * this call cleared.
   */
  markPacksPresent(packIds: readonly string[]): Promise<number>;
  /** Ids of the uncondemned packs known missing, ascending; a cheap indexed lookup (usually none). */
  missingPackIds(): Promise<string[]>;
  /**
   * Stamps `damage_checked_at` (epoch ms) on the given packs: their damage was assessed at
   * `at`; `null` asks for a new assessment (a writer re-pointed some of their objects).
   */
  markDamageChecked(packIds: readonly string[], at: number | null): Promise<void>;
  /**
   * Every object row pointing into one of `packIds` (condemned packs included), whatever the
   * pack's state; used to compare the index with pack trailers and to re-check liveness.
   */
  objectsInPacks(packIds: readonly string[]): Promise<ObjectRecord[]>;
  /**
   * One page of the whole object index in ascending id order: up to `limit` rows with id
   * greater than `afterId` (from the start when `undefined`). Keyset paging keeps each page a
   * cheap index range scan however large the index grows.
   */
  scanObjects(afterId: string | undefined, limit: number): Promise<ObjectRecord[]>;
  /**
   * Removes condemned packs and every object row pointing into them, in one transaction.
   * Packs that are not condemned (revived meanwhile) or unknown are left alone, so a pack a
   * checkpoint re-registered is never dropped from the index. Resolves with the ids removed.
   */
  deleteCondemnedPacks(packIds: readonly string[]): Promise<string[]>;
}

/** Builds the object-index repository over `context.db` (a store or a transaction). */
export function createObjectIndexRepo({ db, dialect, now }: RepoContext): ObjectIndexRepo {
  const presentRows = (executor: Kysely<Database>, ids: readonly string[], includeCondemned = false) => {
    const rows = executor.selectFrom('objects').innerJoin('packs', 'packs.seq', 'objects.pack_seq').where('objects.id', 'in', ids);
    return includeCondemned ? rows : rows.where('packs.condemned_at', 'is', null).where('packs.missing_at', 'is', null);
  };
  /** The object rows' INSERT: a row already present moves to its new pack only when its old pack is condemned or missing. */
  const insertObjects = (trx: Kysely<Database>, values: ReadonlyArray<Insertable<ObjectsTable>>) =>
    trx
      .insertInto('objects')
      .values(values)
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet((eb) => ({
            pack_seq: eb.ref('excluded.pack_seq'),
            kind: eb.ref('excluded.kind'),
            offset: eb.ref('excluded.offset'),
            length: eb.ref('excluded.length'),
            raw_length: eb.ref('excluded.raw_length'),
            codec: eb.ref('excluded.codec'),
            block_offset: eb.ref('excluded.block_offset'),
          }))
          .where(({ exists, selectFrom }) =>
            exists(
              selectFrom('packs')
                .select('packs.id')
                .whereRef('packs.seq', '=', 'objects.pack_seq')
                .where((eb) => eb.or([eb('packs.condemned_at', 'is not', null), eb('packs.missing_at', 'is not', null)])),
            ),
          ),
      );
  /** Object rows joined with their pack's id, as every reader wants them. */
  const rowsWithPack = (executor: Kysely<Database>) =>
    executor.selectFrom('objects').innerJoin('packs', 'packs.seq', 'objects.pack_seq').select(OBJECT_COLUMNS);

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
      // Ascending ids append to the id b-tree instead of splitting pages at random, so a big
      // first checkpoint leaves fewer half-empty pages (about 4% of the SQLite file).
      // The ids are sorted as plain strings (the engine's own comparison, no call per pair back into JS).
      const byId = uniqueById(objects);
      const objectRows = [...byId.keys()].sort().map((id) => byId.get(id) as ObjectRecord);
      if (packRows.length === 0 && objectRows.length === 0) return;
      await withinTransaction(db, async (trx) => {
        for (const batch of batches(packRows, INSERT_BATCH_ROWS)) {
          await trx
            .insertInto('packs')
            .values(batch)
            .onConflict((oc) =>
              oc
                .column('id')
                .doUpdateSet({ condemned_at: null, missing_at: null })
                .where((eb) => eb.or([eb('packs.condemned_at', 'is not', null), eb('packs.missing_at', 'is not', null)])),
            )
            .execute();
        }
        const seqs = await packSeqs(
          trx,
          objectRows.map((o) => o.packId),
        );
        // Every full batch is the same statement: it is built and compiled once (and so is the
        // shorter last one), then run again with each batch's values, whose order the first
        // compile shows. Building it per batch cost more than running it (100k rows: ~0.3 s).
        const compiled = new Map<number, CompiledQuery>();
        for (const batch of batches(objectRows, INSERT_BATCH_ROWS)) {
          const values = batch.map((o) => ({
            id: o.id,
            // An unknown pack gets a seq no pack has, so the foreign key refuses the row (CONFLICT).
            pack_seq: seqs.get(o.packId) ?? NO_PACK_SEQ,
            kind: o.kind,
            offset: o.offset,
            length: o.length,
            raw_length: o.rawLength,
            codec: o.codec,
            block_offset: o.blockOffset ?? null,
          }));
          // The values in their columns' order as written above, the order a compile binds them in.
          const params = values.flatMap((v) => Object.values(v));
          const known = compiled.get(values.length);
          if (known !== undefined) {
            await trx.executeQuery(CompiledQuery.raw(known.sql, params));
            continue;
          }
          const query = insertObjects(trx, values).compile();
          // Reused only when the compile bound exactly those values in that order: else every batch is built.
          if (query.parameters.length === params.length && query.parameters.every((p, i) => p === params[i]))
            compiled.set(values.length, query);
          await trx.executeQuery(query);
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

    async lockPacks(packIds) {
      if (!db.isTransaction) throw new Error('lockPacks must run inside a transaction');
      if (dialect === 'sqlite') return;
      for (const id of [...new Set(packIds)].sort()) {
        await sql`select pg_advisory_xact_lock(${PACK_LOCK_NAMESPACE}, ${Number.parseInt(id.slice(0, 8), 16) | 0})`.execute(db);
      }
    },

    async packStates(packIds) {
      const states = new Map<string, 'live' | 'condemned'>();
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const rows = await db.selectFrom('packs').select(['id', 'condemned_at']).where('id', 'in', batch).execute();
        for (const r of rows) states.set(r.id, r.condemned_at === null ? 'live' : 'condemned');
      }
      return states;
    },

    async locate(ids, options = {}) {
      const found = new Map<string, ObjectLocation>();
      for (const batch of batches([...new Set(ids)], LOOKUP_BATCH_IDS)) {
        const rows = await presentRows(db, batch, options.includeCondemned === true)
          .select(OBJECT_COLUMNS)
          .execute();
        for (const r of rows) found.set(r.id, toLocation(r));
      }
      return found;
    },

    async condemnPacks(packIds, at = now()) {
      let condemned = 0;
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

    async revivePacks(packIds) {
      let revived = 0;
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const result = await db
          .updateTable('packs')
          .set({ condemned_at: null })
          .where('id', 'in', batch)
          .where('condemned_at', 'is not', null)
          .executeTakeFirst();
        revived += Number(result.numUpdatedRows);
      }
      return revived;
    },

    async listPacks() {
      const rows = await db.selectFrom('packs').selectAll().orderBy('id').execute();
      return rows.map((r) => ({
        id: r.id,
        kind: r.kind,
        size: r.size,
        objectCount: r.object_count,
        createdAt: r.created_at,
        condemnedAt: r.condemned_at,
        missingAt: r.missing_at,
        damageCheckedAt: r.damage_checked_at,
      }));
    },

    async markPacksMissing(packIds, at = now()) {
      const marked: string[] = [];
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const rows = await db
          .updateTable('packs')
          .set({ missing_at: at })
          .where('id', 'in', batch)
          .where('condemned_at', 'is', null)
          .where('missing_at', 'is', null)
          .returning('id')
          .execute();
        marked.push(...rows.map((r) => r.id));
      }
      return marked.sort();
    },

    async markPacksPresent(packIds) {
      let cleared = 0;
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const result = await db
          .updateTable('packs')
          .set({ missing_at: null, damage_checked_at: null })
          .where('id', 'in', batch)
          .where('missing_at', 'is not', null)
          .executeTakeFirst();
        cleared += Number(result.numUpdatedRows);
      }
      return cleared;
    },

    async missingPackIds() {
      const rows = await db
        .selectFrom('packs')
        .select('id')
        .where('missing_at', 'is not', null)
        .where('condemned_at', 'is', null)
        .orderBy('id')
        .execute();
      return rows.map((r) => r.id);
    },

    async markDamageChecked(packIds, at) {
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        await db.updateTable('packs').set({ damage_checked_at: at }).where('id', 'in', batch).execute();
      }
    },

    async objectsInPacks(packIds) {
      const out: ObjectRecord[] = [];
      for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
        const rows = await rowsWithPack(db).where('packs.id', 'in', batch).orderBy('packs.id').orderBy('objects.offset').execute();
        out.push(...rows.map(toObjectRecord));
      }
      return out;
    },

    async scanObjects(afterId, limit) {
      let query = rowsWithPack(db);
      if (afterId !== undefined) query = query.where('objects.id', '>', afterId);
      const rows = await query.orderBy('objects.id').limit(limit).execute();
      return rows.map(toObjectRecord);
    },

    async deleteCondemnedPacks(packIds) {
      const removed: string[] = [];
      if (packIds.length === 0) return removed;
      await withinTransaction(db, async (trx) => {
        for (const batch of batches([...new Set(packIds)], INSERT_BATCH_ROWS)) {
          // A no-op UPDATE instead of a SELECT: it row-locks the packs on PostgreSQL (a concurrent
          // revive waits for this transaction) and is portable to SQLite, which has no FOR UPDATE.
          const condemned = await trx
            .updateTable('packs')
            .set((eb) => ({ condemned_at: eb.ref('condemned_at') }))
            .where('id', 'in', batch)
            .where('condemned_at', 'is not', null)
            .returning(['id', 'seq'])
            .execute();
          const ids = condemned.map((r) => r.id);
          if (ids.length === 0) continue;
          await trx
            .deleteFrom('objects')
            .where(
              'pack_seq',
              'in',
              condemned.map((r) => r.seq),
            )
            .execute();
          await trx.deleteFrom('packs').where('id', 'in', ids).where('condemned_at', 'is not', null).execute();
          removed.push(...ids);
        }
      });
      return removed;
    },
  };
}

/** The columns every object read selects: the object row with its pack's id. */
const OBJECT_COLUMNS = [
  'objects.id',
  'packs.id as pack_id',
  'objects.kind',
  'objects.offset',
  'objects.length',
  'objects.raw_length',
  'objects.codec',
  'objects.block_offset',
] as const;

/** A `pack_seq` no pack row has (identities and rowids start at 1). */
const NO_PACK_SEQ = -1;

type ObjectRow = Omit<Selectable<ObjectsTable>, 'pack_seq'> & { pack_id: string };

/** `packs.seq` of each known pack among `packIds`. */
async function packSeqs(executor: Kysely<Database>, packIds: readonly string[]): Promise<Map<string, number>> {
  const seqs = new Map<string, number>();
  for (const batch of batches([...new Set(packIds)], LOOKUP_BATCH_IDS)) {
    const rows = await executor.selectFrom('packs').select(['id', 'seq']).where('id', 'in', batch).execute();
    for (const r of rows) seqs.set(r.id, r.seq);
  }
  return seqs;
}

function toLocation(r: Omit<ObjectRow, 'id'>): ObjectLocation {
  const location = { packId: r.pack_id, kind: r.kind, offset: r.offset, length: r.length, rawLength: r.raw_length, codec: r.codec };
  return r.block_offset === null ? location : { ...location, blockOffset: r.block_offset };
}

function toObjectRecord(r: ObjectRow): ObjectRecord {
  return { id: r.id, ...toLocation(r) };
}

/** Keeps the first record for each id. */
function unique<T extends { readonly id: string }>(records: readonly T[]): T[] {
  return [...uniqueById(records).values()];
}

/** The first record of each id, by id, in first-seen order. */
function uniqueById<T extends { readonly id: string }>(records: readonly T[]): Map<string, T> {
  const seen = new Map<string, T>();
  for (const record of records) if (!seen.has(record.id)) seen.set(record.id, record);
  return seen;
}

function* batches<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let start = 0; start < items.length; start += size) yield items.slice(start, start + size);
}
