import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/index.js';
import type { PackInfo } from '../src/metadata/metadata-store.js';
import { packKey } from '../src/objects/pack-format.js';
import { checkPackPresence } from '../src/snapshot/gc/pack-presence.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import type { SourceScan } from '../src/snapshot/workspace-source.js';
import { LocalWorkspaceSource } from '../src/snapshot/workspace-source.js';
import { statCacheFile } from '../src/workspace-fs/stat-cache.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

/** The code (and data) a promise rejects with, or `RESOLVED`. */
async function failure(promise: Promise<unknown>): Promise<{ code: string; data?: Record<string, unknown> }> {
  return promise.then(
    () => ({ code: 'RESOLVED' }),
    (error: { code?: string; data?: Record<string, unknown> }) => ({ code: String(error.code), data: error.data ?? {} }),
  );
}

/**
 * A pack lost from the blob store after a checkpoint (an operator's mistake, a lifecycle rule,
 * a lost disk), as it happens in the field: the blob is deleted behind Holdfast's back.
 */
describe.each(BACKENDS)('a pack missing from the blob store on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let n = 0;

  beforeAll(async () => {
    b = await backend.open();
    ({ snapshots } = b);
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  /** A fresh workspace directory with a few files (small ones in solid blocks, one zstd, one raw), checkpointed once. */
  async function checkpointed(files: Record<string, Uint8Array | string>) {
    n += 1;
    const name = `lost-${n}`;
    const dir = path.join(b.dir, name);
    const old = Date.UTC(2024, 0, 1);
    for (const [rel, content] of Object.entries(files)) writeFile(dir, rel, content, 0o644, old);
    const before = new Set((await b.meta.objects.listPacks()).map((p) => p.id));
    const first = await snapshots.checkpoint({ dir, workspace: name });
    const packs = (await b.meta.objects.listPacks()).filter((p) => !before.has(p.id));
    const pack = (kind: 'data' | 'tree') => packs.find((p) => p.kind === kind) as PackInfo;
    return { name, dir, first: first.checkpoint, data: pack('data'), tree: pack('tree') };
  }

  const defaultFiles = (tag: string) => ({
    'a.bin': seededBytes(300 * 1024, `${tag}-a`),
    'b/log.txt': `a line of ${tag}'s log\n`.repeat(400),
    'b/c.bin': seededBytes(2000, `${tag}-c`),
  });

  async function packState(id: string): Promise<PackInfo | undefined> {
    return (await b.meta.objects.listPacks()).find((p) => p.id === id);
  }

  it('a restore of the damaged checkpoint fails RESTORE_INCOMPLETE naming the pack and records it missing; the next checkpoint of the same files is ready and verify --read-data is clean', async () => {
    const ws = await checkpointed(defaultFiles('restore'));
    await b.blobs.delete(packKey(ws.data.id));
    const target = path.join(b.dir, `${ws.name}-target`);
    writeFile(target, 'keep.txt', 'what the target held before');
    const before = describeTree(target);

    const lost = await failure(snapshots.restore({ dir: target, workspace: ws.name, replace: true }));
    expect(lost).toMatchObject({ code: 'RESTORE_INCOMPLETE', data: { pack: ws.data.id } });
    expect(describeTree(target)).toEqual(before);
    expect((await packState(ws.data.id))?.missingAt).not.toBeNull();
    // Dedup no longer hands out the lost objects.
    const lostIds = (await b.meta.objects.objectsInPacks([ws.data.id])).map((o) => o.id);
    expect([...(await b.meta.objects.findMissing(lostIds))].sort()).toEqual([...lostIds].sort());

    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    expect(next.stats.objectsWritten).toBeGreaterThanOrEqual(lostIds.length);
    const report = await verifyStore(b, { readData: true });
    expect(report.problems.filter((p) => p.kind !== 'unindexed-pack')).toEqual([]);
    expect(report).toMatchObject({ ok: true, damage: [] });

    // The head restores byte for byte; so does the old checkpoint, whose objects were written again.
    for (const checkpoint of [next.checkpoint.id, ws.first.id]) {
      await snapshots.restore({ dir: target, workspace: ws.name, checkpoint, replace: true });
      expect(describeTree(target)).toEqual(describeTree(ws.dir));
    }
  });

  it('cat of a file in a lost pack fails RESTORE_INCOMPLETE naming the pack, and records it missing', async () => {
    const ws = await checkpointed(defaultFiles('cat'));
    await b.blobs.delete(packKey(ws.data.id));
    const read = async () => {
      for await (const _ of snapshots.cat(ws.first.id, 'a.bin'));
    };
    expect(await failure(read())).toMatchObject({ code: 'RESTORE_INCOMPLETE', data: { pack: ws.data.id } });
    expect((await packState(ws.data.id))?.missingAt).not.toBeNull();
    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, damage: [] });
  });

  it('the presence sweep finds lost data and tree packs nobody read, records the damaged checkpoint, and the next checkpoint heals it', async () => {
    const ws = await checkpointed(defaultFiles('sweep'));
    await b.blobs.delete(packKey(ws.data.id));
    await b.blobs.delete(packKey(ws.tree.id));

    const swept = await checkPackPresence(b);
    expect(swept.found).toEqual([ws.data.id, ws.tree.id].sort());
    expect(swept.missing).toEqual(expect.arrayContaining([ws.data.id, ws.tree.id]));
    const byPack = new Map(swept.damage?.packs.map((p) => [p.pack, p]));
    // The lost tree pack holds the root: the whole checkpoint is lost under `''`.
    expect(byPack.get(ws.tree.id)?.checkpoints).toEqual([
      { checkpointId: ws.first.id, workspaceId: ws.first.workspaceId, paths: [''], pathCount: 1 },
    ]);
    expect((await snapshots.getCheckpoint(ws.first.id)).damage).toMatchObject({ packs: [ws.tree.id], paths: [''] });
    // A second sweep finds nothing new and assesses nothing again.
    expect(await checkPackPresence(b)).toMatchObject({ found: [], returned: [], damage: undefined });

    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    const report = await verifyStore(b, { readData: true });
    expect(report).toMatchObject({ ok: true, damage: [] });
    // Verify re-assessed: the old checkpoint is whole again and its mark is gone.
    expect((await snapshots.getCheckpoint(ws.first.id)).damage).toBeNull();
    const target = path.join(b.dir, `${ws.name}-target`);
    await snapshots.restore({ dir: target, workspace: ws.name, checkpoint: ws.first.id });
    expect(describeTree(target)).toEqual(describeTree(ws.dir));
  });

  it('verify lists per missing pack the checkpoints and paths that lost objects and marks them; what no later checkpoint has stays damaged', async () => {
    const ws = await checkpointed({ 'gone.txt': 'only the first checkpoint had this file\n', 'kept/x.txt': 'still here\n' });
    fs.rmSync(path.join(ws.dir, 'gone.txt'));
    await b.blobs.delete(packKey(ws.data.id));

    const damaged = await verifyStore(b, { readData: false });
    expect(damaged.ok).toBe(false);
    expect(damaged.problems).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'missing-pack', id: ws.data.id })]));
    const entry = damaged.damage.find((d) => d.pack === ws.data.id);
    expect(entry?.checkpoints).toEqual([
      { checkpointId: ws.first.id, workspaceId: ws.first.workspaceId, paths: ['gone.txt', 'kept/x.txt'], pathCount: 2 },
    ]);
    expect((await snapshots.getCheckpoint(ws.first.id)).damage).toMatchObject({
      packs: [ws.data.id],
      paths: ['gone.txt', 'kept/x.txt'],
      pathCount: 2,
    });

    // The next checkpoint (without gone.txt) writes kept/x.txt again; gone.txt is lost for good.
    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    const after = await verifyStore(b, { readData: true });
    expect(after.ok).toBe(false);
    expect(after.damage.find((d) => d.pack === ws.data.id)?.checkpoints).toEqual([
      { checkpointId: ws.first.id, workspaceId: ws.first.workspaceId, paths: ['gone.txt'], pathCount: 1 },
    ]);
    expect((await snapshots.getCheckpoint(ws.first.id)).damage).toMatchObject({ paths: ['gone.txt'], pathCount: 1 });
    expect((await snapshots.getCheckpoint(next.checkpoint.id)).damage).toBeNull();
    // The damaged checkpoint stays listed, with its damage; a restore of it says what is missing.
    const log = await snapshots.log(ws.name);
    expect(log.map((c) => [c.id, c.status, c.damage === null])).toEqual([
      [next.checkpoint.id, 'ready', true],
      [ws.first.id, 'ready', false],
    ]);
    const target = path.join(b.dir, `${ws.name}-target`);
    expect(await failure(snapshots.restore({ dir: target, workspace: ws.name, checkpoint: ws.first.id }))).toMatchObject({
      code: 'RESTORE_INCOMPLETE',
      data: { pack: ws.data.id },
    });
    expect(fs.existsSync(target)).toBe(false);
    await snapshots.restore({ dir: target, workspace: ws.name });
    expect(describeTree(target)).toEqual(describeTree(ws.dir));
    // Once the operator forgets the damaged checkpoint, nothing references the lost object: GC
    // condemns the missing pack and drops it from the index (deleting a missing blob is a no-op).
    await b.meta.checkpoints.deleteMany([ws.first.id]);
    const gc = await snapshots.gc({ graceMs: 0 });
    expect(gc.listing.packsDeleted.map((p) => p.id)).toContain(ws.data.id);
    expect(await packState(ws.data.id)).toBeUndefined();
    expect(await verifyStore(b, { readData: false })).toMatchObject({ ok: true, damage: [] });
  });

  it('a pack lost while a checkpoint runs (after dedup chose it, before the commit) is caught by the commit: the objects are written again', async () => {
    const ws = await checkpointed(defaultFiles('race'));
    // A new path with old content: not in the stat cache, so dedup asks the index, which still vouches for the pack.
    fs.copyFileSync(path.join(ws.dir, 'a.bin'), path.join(ws.dir, 'copy-of-a.bin'));
    const lose = async () => {
      await b.blobs.delete(packKey(ws.data.id));
      await checkPackPresence(b);
    };
    let lost = false;
    const next = await snapshots.checkpoint({
      workspace: ws.name,
      source: (context) =>
        new (class extends LocalWorkspaceSource {
          override async unchanged(scan: SourceScan, wasRead: (path: string) => boolean): Promise<boolean> {
            if (!lost) {
              lost = true;
              await lose();
            }
            return super.unchanged(scan, wasRead);
          }
        })(ws.dir, context.workspace.id, context.cacheDir, context.workers),
    });
    expect(lost).toBe(true);
    expect(next.checkpoint.status).toBe('ready');
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, damage: [] });
    const target = path.join(b.dir, `${ws.name}-target`);
    await snapshots.restore({ dir: target, workspace: ws.name });
    expect(describeTree(target)).toEqual(describeTree(ws.dir));
  });

  it('a checkpoint whose files the stat cache vouches for never commits objects of a pack known missing: it reads them again', async () => {
    const ws = await checkpointed(defaultFiles('cached'));
    // Known missing while its blob is still there (a reader saw NOT_FOUND moments ago): the commit must not reuse it.
    expect(await b.meta.objects.markPacksMissing([ws.data.id, ws.tree.id])).toEqual([ws.data.id, ws.tree.id].sort());
    const rows = await b.meta.objects.objectsInPacks([ws.data.id, ws.tree.id]);
    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    // Every object was written again; the same objects make the same packs (same ids), which
    // the commit registers as present again.
    expect(next.stats.objectsWritten).toBe(rows.length);
    expect(next.stats.packsWritten).toBe(2);
    expect(await b.meta.objects.missingPackIds()).toEqual([]);
    expect((await b.meta.objects.findMissing(rows.map((r) => r.id))).size).toBe(0);
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, damage: [] });
  });

  it.each([
    ['vouched for whole (every directory too: the subtree is taken over)', false],
    ['vouched for whole, one file line damaged (its ids unreadable, its stat intact)', true],
  ])('a checkpoint of a tree its stat cache has %s never commits objects of a pack known missing', async (_, damage) => {
    const ws = await checkpointed(defaultFiles(damage ? 'settled-damaged' : 'settled'));
    // Directory stats far from the racy window, then a checkpoint that records their tree ids.
    const old = Date.UTC(2024, 0, 1) / 1000;
    for (const d of ['b', '']) fs.utimesSync(path.join(ws.dir, d), old, old);
    const settled = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(settled.stats.filesHashed).toBe(0);
    const cacheFile = statCacheFile(path.join(b.dir, 'cache'), ws.first.workspaceId, ws.dir);
    if (damage) {
      const text = fs.readFileSync(cacheFile, 'utf8');
      const at = text.lastIndexOf('b/log.txt\t');
      const ids = text.indexOf('\u0002', at) + 1;
      expect(at).toBeGreaterThanOrEqual(0);
      fs.writeFileSync(cacheFile, `${text.slice(0, ids)}not-a-hash${text.slice(text.indexOf('\n', ids))}`);
    }
    // The file data the settled subtree's files name: their lines are all the checkpoint has.
    expect(await b.meta.objects.markPacksMissing([ws.data.id])).toEqual([ws.data.id]);
    const rows = await b.meta.objects.objectsInPacks([ws.data.id]);
    const next = await snapshots.checkpoint({ dir: ws.dir, workspace: ws.name });
    expect(next.checkpoint.status).toBe('ready');
    expect(next.checkpoint.rootTree).toBe(settled.checkpoint.rootTree);
    expect(next.stats.objectsWritten).toBe(rows.length);
    expect(await b.meta.objects.missingPackIds()).toEqual([]);
    expect((await b.meta.objects.findMissing(rows.map((r) => r.id))).size).toBe(0);
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, damage: [] });
  });
});

/** The service's periodic sweep (one replica at a time, by claim) checks pack presence before it collects garbage. */
describe('the service sweep finds a lost pack nobody read', () => {
  let b: OpenedBackends;
  let hf: Holdfast;
  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    hf = await openHoldfast({ blobs: b.blobs, meta: b.meta, cacheDir: path.join(b.dir, 'cache'), gcSweepIntervalMs: 0 });
  }, 120_000);
  afterAll(async () => {
    await hf?.close();
    await b?.cleanup();
  });

  it('a sweep records the pack missing and the damaged head; the next checkpoint is a whole head again', async () => {
    const dir = path.join(b.dir, 'ws');
    writeFile(dir, 'notes.txt', 'what the agent wrote this turn\n'.repeat(50));
    writeFile(dir, 'data/table.bin', seededBytes(64 * 1024, 'sweep-table'));
    const first = await hf.snapshots.checkpoint({ dir, workspace: 'swept' });
    const [data] = (await b.meta.objects.listPacks()).filter((p) => p.kind === 'data');
    await b.blobs.delete(packKey(data?.id as string));

    const outcome = await hf.sweepGarbage();
    expect(outcome.kind).toBe('swept');
    if (outcome.kind !== 'swept') return;
    expect(outcome.presence.found).toEqual([data?.id]);
    expect(outcome.presence.damage?.packs).toEqual([
      {
        pack: data?.id,
        objects: data?.objectCount,
        checkpoints: [
          {
            checkpointId: first.checkpoint.id,
            workspaceId: first.checkpoint.workspaceId,
            paths: ['data/table.bin', 'notes.txt'],
            pathCount: 2,
          },
        ],
      },
    ]);
    // GC kept what the damaged head still references in other packs, and the missing pack's rows.
    expect(outcome.report.packsCondemned).toBe(0);
    const head = (await hf.snapshots.workspaces()).find((w) => w.name === 'swept')?.head;
    expect(head?.damage).toMatchObject({ packs: [data?.id], pathCount: 2 });

    const next = await hf.snapshots.checkpoint({ dir, workspace: 'swept' });
    expect(next.checkpoint.status).toBe('ready');
    expect(next.checkpoint.damage).toBeNull();
    // The next sweep re-assesses (the checkpoint wrote the lost objects again): the old checkpoint is whole, its mark gone.
    const after = await hf.sweepGarbage();
    expect(after.kind === 'swept' ? after.presence.damage : undefined).toMatchObject({ checkpointsCleared: 1, checkpointsDamaged: 0 });
    expect((await hf.snapshots.getCheckpoint(first.checkpoint.id)).damage).toBeNull();
    expect(await verifyStore(b, { readData: true })).toMatchObject({ ok: true, damage: [] });
  });
});
