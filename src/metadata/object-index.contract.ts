import { describe, expect, it } from 'vitest';
import { type ContractContext, makeObjects, sha256 } from './metadata-contract-support.contract.js';
import type { MetadataStore, ObjectRecord, PackRecord } from './metadata-store.js';

const BULK_OBJECTS = 100_000;
const SAMPLE_EVERY = 997;

async function countRows(store: MetadataStore, table: 'objects' | 'packs'): Promise<number> {
  const row = await store.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  expect(typeof row.n).toBe('number');
  return row.n;
}

function sample<T>(items: readonly T[]): T[] {
  return items.filter((_, i) => i % SAMPLE_EVERY === 0 || i === items.length - 1);
}

/** Contract cases for the object index: bulk insert, idempotency, lookups, condemned packs. */
export function describeObjectIndexCases(ctx: ContractContext): void {
  describe(`object index with ${BULK_OBJECTS} objects`, () => {
    const fixture = ctx.sharedFixture(async (database) => {
      const store = await database.open();
      const bulk = makeObjects('bulk', BULK_OBJECTS);
      await store.objects.insertPacksAndObjects(bulk.packs, bulk.objects);
      return { store, bulk };
    });

    it('stores every row', async () => {
      const { store, bulk } = await fixture();
      expect(await countRows(store, 'objects')).toBe(BULK_OBJECTS);
      expect(await countRows(store, 'packs')).toBe(bulk.packs.length);
    });

    it('findMissing reports exactly the unknown ids of a mixed batch', async () => {
      const { store, bulk } = await fixture();
      const known = sample(bulk.objects).map((o) => o.id);
      const unknown = Array.from({ length: 1_500 }, (_, i) => sha256(`unknown:${i}`));
      const missing = await store.objects.findMissing([...known, ...unknown, ...known.slice(0, 10)]);
      expect([...missing].sort()).toEqual([...unknown].sort());
      expect((await store.objects.findMissing(bulk.objects.map((o) => o.id))).size).toBe(0);
      expect((await store.objects.findMissing([])).size).toBe(0);
    });

    it('locate returns each sampled location with numeric fields, and nothing for unknown ids', async () => {
      const { store, bulk } = await fixture();
      const picked = sample(bulk.objects);
      const located = await store.objects.locate([...picked.map((o) => o.id), sha256('unknown')]);
      expect(located.size).toBe(picked.length);
      for (const { id, ...location } of picked) expect(located.get(id)).toEqual(location);
      const first = located.values().next().value;
      for (const value of [first?.offset, first?.length, first?.rawLength]) expect(typeof value).toBe('number');
    });

    it('re-inserting the same packs and objects is a no-op', async () => {
      const { store, bulk } = await fixture();
      await store.objects.insertPacksAndObjects(bulk.packs, bulk.objects);
      expect(await countRows(store, 'objects')).toBe(BULK_OBJECTS);
      const moved = bulk.objects.slice(0, 5).map((o) => ({ ...o, offset: o.offset + 1 }));
      await store.objects.insertPacksAndObjects([], [...moved, ...moved]);
      const located = await store.objects.locate(moved.map((o) => o.id));
      for (const original of bulk.objects.slice(0, 5)) expect(located.get(original.id)?.offset).toBe(original.offset);
    });
  });

  describe('object index lifecycle', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open() }));

    it('objects of a condemned pack count as missing until re-registered elsewhere', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('condemned', 30, 10);
      await store.objects.insertPacksAndObjects(packs, objects);
      const doomed = packs[0] as PackRecord;
      const doomedIds = objects.filter((o) => o.packId === doomed.id).map((o) => o.id);
      expect(await store.objects.condemnPacks([doomed.id, doomed.id, sha256('no-such-pack')])).toBe(1);
      expect(await store.objects.condemnPacks([doomed.id])).toBe(0);
      expect([...(await store.objects.findMissing(objects.map((o) => o.id)))].sort()).toEqual([...doomedIds].sort());
      expect((await store.objects.locate(doomedIds)).size).toBe(0);

      const newPack: PackRecord = { id: sha256('rewritten'), kind: 'data', size: 10_064, objectCount: 10 };
      const rewritten = objects.filter((o) => o.packId === doomed.id).map((o, i) => ({ ...o, packId: newPack.id, offset: i * 7 }));
      await store.objects.insertPacksAndObjects([newPack], rewritten);
      expect((await store.objects.findMissing(doomedIds)).size).toBe(0);
      const located = await store.objects.locate(doomedIds);
      expect(located.get(doomedIds[1] as string)).toMatchObject({ packId: newPack.id, offset: 7 });
    });

    it('stores every row of an insert of several batches as given (block offsets and nulls mixed), and re-points a condemned pack past the first batch', async () => {
      const { store } = await fixture();
      // 1,234 rows: two full batches of one statement and a shorter last one.
      const { packs, objects } = makeObjects('batches', 1_234, 400);
      const given: ObjectRecord[] = objects.map((o, i) => (o.codec === 'zstd' && i % 3 !== 0 ? { ...o, blockOffset: i * 11 } : o));
      await store.objects.insertPacksAndObjects(packs, given);
      const byId = (await store.objects.locate(given.map((o) => o.id))) as Map<string, Omit<ObjectRecord, 'id'>>;
      expect(byId.size).toBe(given.length);
      for (const { id, ...location } of given) expect(byId.get(id)).toEqual({ blockOffset: undefined, ...location });
      // Rows far into the insert move when their pack is condemned; the others stay where they are.
      const doomed = packs[2] as PackRecord;
      await store.objects.condemnPacks([doomed.id]);
      const newPack: PackRecord = { id: sha256('batches-rewritten'), kind: 'data', size: 99, objectCount: given.length };
      await store.objects.insertPacksAndObjects(
        [newPack],
        given.map((o) => ({ ...o, packId: newPack.id, offset: o.offset + 5 })),
      );
      const after = await store.objects.locate(given.map((o) => o.id));
      for (const o of given)
        expect(after.get(o.id)).toMatchObject(
          o.packId === doomed.id ? { packId: newPack.id, offset: o.offset + 5 } : { packId: o.packId, offset: o.offset },
        );
    });

    it('re-registering a condemned pack revives it', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('revived', 5);
      await store.objects.insertPacksAndObjects(packs, objects);
      await store.objects.condemnPacks(packs.map((p) => p.id));
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(5);
      await store.objects.insertPacksAndObjects(packs, objects);
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(0);
    });

    it('objects of a pack known missing count as missing to dedup, stay locatable for readers, and are re-pointed when written again', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('missing', 20, 10);
      await store.objects.insertPacksAndObjects(packs, objects);
      const [lost, kept] = packs as [PackRecord, PackRecord];
      const lostIds = objects.filter((o) => o.packId === lost.id).map((o) => o.id);
      expect(await store.objects.markPacksMissing([lost.id, lost.id, sha256('no-such-pack')], 1_000)).toEqual([lost.id]);
      expect(await store.objects.markPacksMissing([lost.id], 2_000)).toEqual([]);
      expect(await store.objects.missingPackIds()).toContain(lost.id);
      expect(await store.objects.missingPackIds()).not.toContain(kept.id);
      expect((await store.objects.listPacks()).find((p) => p.id === lost.id)).toMatchObject({ missingAt: 1_000, damageCheckedAt: null });
      expect([...(await store.objects.findMissing(objects.map((o) => o.id)))].sort()).toEqual([...lostIds].sort());
      expect((await store.objects.locate(lostIds)).size).toBe(0);
      // Readers still find where the bytes were, so a read fails naming the pack (or succeeds if it came back).
      expect((await store.objects.locate(lostIds, { includeCondemned: true })).get(lostIds[0] as string)?.packId).toBe(lost.id);
      expect((await store.objects.objectsInPacks([lost.id])).length).toBe(10);
      await store.objects.markDamageChecked([lost.id], 1_500);
      expect((await store.objects.listPacks()).find((p) => p.id === lost.id)?.damageCheckedAt).toBe(1_500);
      await store.objects.markDamageChecked([lost.id], null);
      expect((await store.objects.listPacks()).find((p) => p.id === lost.id)?.damageCheckedAt).toBeNull();

      // A checkpoint writes three of them again, into a new pack: those rows move there.
      const newPack: PackRecord = { id: sha256('missing-rewritten'), kind: 'data', size: 3_064, objectCount: 3 };
      const rewritten = objects
        .filter((o) => o.packId === lost.id)
        .slice(0, 3)
        .map((o, i) => ({ ...o, packId: newPack.id, offset: i * 9 }));
      await store.objects.insertPacksAndObjects([newPack], rewritten);
      expect((await store.objects.findMissing(lostIds)).size).toBe(7);
      expect((await store.objects.objectsInPacks([lost.id])).length).toBe(7);
      expect((await store.objects.locate([rewritten[1]?.id as string])).get(rewritten[1]?.id as string)).toMatchObject({
        packId: newPack.id,
        offset: 9,
      });
    });

    it('a missing pack seen again, or registered again by a writer, counts as present', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('returned', 10, 5);
      await store.objects.insertPacksAndObjects(packs, objects);
      const [first, second] = packs as [PackRecord, PackRecord];
      expect(await store.objects.markPacksMissing([first.id, second.id])).toEqual([first.id, second.id].sort());
      expect(await store.objects.markPacksPresent([first.id, sha256('no-such-pack')])).toBe(1);
      expect(await store.objects.markPacksPresent([first.id])).toBe(0);
      await store.objects.insertPacksAndObjects(
        [second],
        objects.filter((o) => o.packId === second.id),
      );
      expect((await store.objects.findMissing(objects.map((o) => o.id))).size).toBe(0);
      const states = (await store.objects.listPacks()).filter((p) => p.id === first.id || p.id === second.id);
      expect(states.map((p) => p.missingAt)).toEqual([null, null]);
      expect(await store.objects.missingPackIds()).not.toEqual(expect.arrayContaining([first.id]));
    });

    it('a condemned pack is never marked missing (GC is deleting it)', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('condemned-missing', 3);
      await store.objects.insertPacksAndObjects(packs, objects);
      await store.objects.condemnPacks(packs.map((p) => p.id));
      expect(await store.objects.markPacksMissing(packs.map((p) => p.id))).toEqual([]);
      expect(await store.objects.missingPackIds()).not.toContain(packs[0]?.id);
    });

    it('block members keep their block offset through locate and objectsInPacks; lone objects have none', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('blocks', 4);
      const rows: ObjectRecord[] = objects.map((o, i) =>
        i < 3 ? { ...o, offset: 8, length: 300, codec: 'zstd', blockOffset: i * 1_000 } : { ...o, offset: 308 },
      );
      await store.objects.insertPacksAndObjects(packs, rows);
      const located = await store.objects.locate(rows.map((r) => r.id));
      for (const { id, ...location } of rows) expect(located.get(id)).toEqual(location);
      expect(located.get(rows[3]?.id as string)).not.toHaveProperty('blockOffset');
      const inPacks = new Map((await store.objects.objectsInPacks(packs.map((p) => p.id))).map((r) => [r.id, r]));
      for (const row of rows) expect(inPacks.get(row.id)).toEqual(row);
    });

    it('schema violations map to codes: unknown pack is CONFLICT, bad enum or id is INVALID_INPUT', async () => {
      const { store } = await fixture();
      const { packs, objects } = makeObjects('violations', 1);
      const object = objects[0] as ObjectRecord;
      const pack = packs[0] as PackRecord;
      await expect(store.objects.insertPacksAndObjects([], [object])).rejects.toMatchObject({
        code: 'CONFLICT',
        data: { reason: 'foreign_key' },
      });
      await expect(store.objects.insertPacksAndObjects([pack], [{ ...object, codec: 'lz4' as 'zstd' }])).rejects.toMatchObject({
        code: 'INVALID_INPUT',
      });
      await expect(store.objects.insertPacksAndObjects([{ ...pack, id: 'NOT-HEX' }], [])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      for (const bad of [
        { ...object, codec: 'none', blockOffset: 0 },
        { ...object, codec: 'zstd', blockOffset: -1 },
      ] as const) {
        await expect(store.objects.insertPacksAndObjects([pack], [bad])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      }
      // Each call is atomic: the valid pack of the failed calls was not kept.
      expect(await store.db.selectFrom('packs').select('id').where('id', '=', pack.id).executeTakeFirst()).toBeUndefined();
      expect(await store.objects.findMissing([object.id])).toEqual(new Set([object.id]));
    });
  });
}
