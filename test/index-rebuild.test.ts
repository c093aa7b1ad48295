import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rebuildIndex } from '../src/objects/index-rebuild.js';
import { packKey } from '../src/objects/pack-format.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, makeMixedTree } from './support/trees.js';

describe.each(BACKENDS)('index rebuild on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let source: string;

  beforeAll(async () => {
    b = await backend.open();
    ({ snapshots } = b);
    source = path.join(b.dir, 'source');
    makeMixedTree(source, 6 * 1024 * 1024);
    await snapshots.checkpoint({ dir: source, workspace: 'ws' });
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  const wipe = async (): Promise<void> => {
    await b.meta.db.deleteFrom('objects').execute();
    await b.meta.db.deleteFrom('packs').execute();
  };

  it('restores a checkpoint byte-equal after the object index was wiped and rebuilt', async () => {
    const packs = await b.meta.objects.listPacks();
    const objects = await b.meta.objects.objectsInPacks(packs.map((p) => p.id));
    await wipe();
    const lost = await snapshots.restore({ dir: path.join(b.dir, 'lost'), workspace: 'ws' }).catch((e: { code: string }) => e.code);
    expect(lost).toBe('RESTORE_INCOMPLETE');

    const report = await rebuildIndex(b, { verifyPacks: true });
    expect(report).toMatchObject({
      packsScanned: packs.length,
      packsRegistered: packs.length,
      objectsRegistered: objects.length,
      damaged: [],
    });
    expect((await b.meta.objects.listPacks()).map(({ id, kind, size, objectCount }) => ({ id, kind, size, objectCount }))).toEqual(
      packs.map(({ id, kind, size, objectCount }) => ({ id, kind, size, objectCount })),
    );
    const target = path.join(b.dir, 'restored');
    await snapshots.restore({ dir: target, workspace: 'ws' });
    expect(describeTree(target)).toEqual(describeTree(source));
    expect((await verifyStore(b, { readData: false })).ok).toBe(true);

    // Idempotent: a second run over a healthy index registers nothing new.
    expect(await rebuildIndex(b)).toMatchObject({ packsScanned: packs.length, packsRegistered: 0, damaged: [] });
  }, 120_000);

  it('skips condemned packs, and reports damaged packs without registering them', async () => {
    const [condemned, damaged, ...rest] = await b.meta.objects.listPacks();
    if (condemned === undefined || damaged === undefined) throw new Error('expected at least two packs');
    await b.meta.objects.condemnPacks([condemned.id]);
    const bytes = Buffer.from(await b.blobs.get(packKey(damaged.id)));
    bytes[bytes.length - 60] = (bytes[bytes.length - 60] ?? 0) ^ 0xff;
    await b.blobs.delete(packKey(damaged.id));
    await b.blobs.put(packKey(damaged.id), bytes);
    await b.meta.db
      .deleteFrom('objects')
      .where('pack_seq', 'not in', (eb) => eb.selectFrom('packs').select('seq').where('id', '=', condemned.id))
      .execute();
    await b.meta.db.deleteFrom('packs').where('id', '!=', condemned.id).execute();

    const report = await rebuildIndex(b);
    expect(report).toMatchObject({
      packsSkippedCondemned: 1,
      packsRegistered: rest.length,
      damaged: [expect.objectContaining({ packId: damaged.id })],
    });
    const after = await b.meta.objects.listPacks();
    expect(after.find((p) => p.id === condemned.id)?.condemnedAt).not.toBeNull();
    expect(after.map((p) => p.id)).not.toContain(damaged.id);
    fs.rmSync(path.join(b.dir, 'restored'), { recursive: true, force: true });
  }, 120_000);
});
