import { describe, expect, it } from 'vitest';
import { type ContractContext, sha256, uniqueName } from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';

const file = (collectionId: string, path: string, at = 1) => ({
  collectionId,
  path,
  kind: 'file' as const,
  size: 3,
  sha256: sha256(path),
  chunks: [[sha256(`chunk:${path}`), 3] as const],
  executable: true,
  contentType: 'text/plain',
  updatedAt: at,
});

async function newCollection(store: MetadataStore, owner = uniqueName('owner')) {
  const tenant = await store.tenants.create({ name: uniqueName('tenant') });
  return store.folders.ensureCollection(tenant.id, 'project', owner);
}

/** Contract cases of the work-folder tables and the service claims. */
export function describeFoldersCases(ctx: ContractContext): void {
  describe('work folders and claims', () => {
    const fixture = ctx.sharedFixture(async (database) => ({ store: await database.open(), other: await database.open() }));

    it('creates a collection once, even when two stores race to create it', async () => {
      const { store, other } = await fixture();
      const tenant = await store.tenants.create({ name: uniqueName('tenant') });
      const [x, y] = await Promise.all([
        store.folders.ensureCollection(tenant.id, 'user', 'u1'),
        other.folders.ensureCollection(tenant.id, 'user', 'u1'),
      ]);
      expect(x.id).toBe(y.id);
      expect(x).toMatchObject({ tenantId: tenant.id, scope: 'user', ownerId: 'u1', lastOperationAt: null });
      expect(await store.folders.findCollection(tenant.id, 'agent', 'u1')).toBeUndefined();
    });

    it('holds one live row per path and any number of trashed ones; round-trips every field', async () => {
      const { store } = await fixture();
      const c = await newCollection(store);
      const first = await store.folders.insertFile(c.id, file(c.id, 'a/b'));
      await expect(store.folders.insertFile(c.id, file(c.id, 'a/b'))).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      await store.folders.trashFiles([first.id], 10, 'unit-1');
      const second = await store.folders.insertFile(c.id, file(c.id, 'a/b'));
      await store.folders.trashFiles([second.id], 11, 'unit-2');
      await store.folders.insertFile(c.id, file(c.id, 'a/b'));
      expect(await store.folders.countFiles(c.id)).toBe(3);
      const got = await store.folders.getFile(c.id, first.id);
      expect(got).toEqual({ ...first, deletedAt: 10, trashUnit: 'unit-1' });
      const trash = await store.folders.listFiles(c.id, { trash: true, limit: 10 });
      expect(trash.map((r) => r.id).sort()).toEqual([first.id, second.id].sort());
    });

    it('pages by (path, id) bytewise on both engines and finds subtrees by exact prefix', async () => {
      const { store } = await fixture();
      const c = await newCollection(store);
      const paths = ['B', 'a', 'a/b', 'a/b/c', 'a%', 'a_b', 'ab', 'é', 'a b'];
      for (const p of paths) await store.folders.insertFile(c.id, file(c.id, p));
      const seen: string[] = [];
      let after: { path: string; id: string } | undefined;
      for (;;) {
        const page = await store.folders.listFiles(c.id, { trash: false, limit: 2, ...(after === undefined ? {} : { after }) });
        if (page.length === 0) break;
        seen.push(...page.map((r) => r.path));
        const last = page.at(-1) as { path: string; id: string };
        after = { path: last.path, id: last.id };
      }
      expect(seen).toEqual([...paths].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
      expect((await store.folders.liveSubtree(c.id, 'a')).map((r) => r.path)).toEqual(['a', 'a/b', 'a/b/c']);
    });

    it('keeps one receipt per collection and operation id', async () => {
      const { store } = await fixture();
      const c = await newCollection(store);
      const d = await newCollection(store);
      await store.folders.insertReceipt(c.id, 'op', 'f1', null, 5);
      await store.folders.insertReceipt(d.id, 'op', 'f2', null, 5);
      await expect(store.folders.insertReceipt(c.id, 'op', 'f3', null, 6)).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      expect(await store.folders.findReceipt(c.id, 'op')).toEqual({ fingerprint: 'f1', resultId: null, createdAt: 5 });
    });

    it('lists the chunks of live and trashed rows as GC roots, and deletes a whole collection', async () => {
      const { store } = await fixture();
      const c = await newCollection(store);
      const live = await store.folders.insertFile(c.id, file(c.id, 'root-live'));
      const gone = await store.folders.insertFile(c.id, file(c.id, 'root-trashed'));
      await store.folders.trashFiles([gone.id], 3, 'u');
      const roots = new Set<string>();
      let after: string | undefined;
      for (;;) {
        const page = await store.folders.chunkRootsPage(after, 1);
        for (const id of page.chunks) roots.add(id);
        if (page.lastId === null) break;
        after = page.lastId;
      }
      for (const row of [live, gone]) expect(roots.has(row.chunks?.[0]?.[0] as string)).toBe(true);
      expect(await store.folders.deleteCollection(c.id)).toBe(2);
      expect(await store.folders.getFile(c.id, live.id)).toBeUndefined();
    });

    it('grants a claim to one holder until it expires', async () => {
      const { store, other } = await fixture();
      const name = uniqueName('claim');
      const [x, y] = await Promise.all([store.claims.claim(name, 'x', 60_000), other.claims.claim(name, 'y', 60_000)]);
      expect([x, y].filter(Boolean)).toHaveLength(1);
      const holder = x ? 'x' : 'y';
      expect(await store.claims.claim(name, holder, 60_000)).toBe(true);
      expect(await store.claims.claim(name, holder === 'x' ? 'y' : 'x', 60_000)).toBe(false);
      await store.claims.release(name, holder);
      expect(await store.claims.claim(name, 'z', 0)).toBe(true);
      expect(await other.claims.claim(name, 'w', 60_000)).toBe(true);
      expect((await store.claims.holder(name))?.holder).toBe('w');
    });
  });
}
