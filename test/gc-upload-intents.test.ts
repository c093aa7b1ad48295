import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError } from '../src/errors.js';
import { packIdFromKey } from '../src/objects/pack-format.js';
import { collectGarbage } from '../src/snapshot/gc/gc.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { FaultInjectingBlobStore } from './support/fault-injecting-blob-store.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

const OLD = Date.UTC(2024, 0, 1);
/** How long the slowed pack upload hangs: long enough for many GC runs in between. */
const SLOW_PUT_MS = 1500;
const PACK_KEY = /^packs\//;

/** `gc --grace 0s` run over and over while a checkpoint is between two pack uploads. */
describe.each(BACKENDS)('upload intents keep running checkpoints safe from gc --grace 0: $name', (backend) => {
  let b: OpenedBackends;
  let faults: FaultInjectingBlobStore;
  let snapshots: Snapshots;

  beforeEach(async () => {
    b = await backend.open();
    faults = new FaultInjectingBlobStore(b.blobs);
    snapshots = new Snapshots({ blobs: faults, meta: b.meta, workers: b.workers, cacheDir: path.join(b.dir, 'cache') });
  }, 60_000);
  afterEach(async () => {
    await b?.cleanup();
  });

  /** `gc --grace 0s` that never repacks itself, so it only ever deletes what others wrote. */
  const gcNow = () =>
    collectGarbage(
      { blobs: faults, meta: b.meta, workers: b.workers },
      { graceMs: 0, repackBelowLiveRatio: 0, retention: { keepLast: 100, keepDaily: 0 } },
    );

  /** A version with files unique to it (so it writes a data pack and a tree pack) and a shared file. */
  function version(name: string): string {
    const dir = path.join(b.dir, name);
    writeFile(dir, 'shared.bin', seededBytes(300_000, 'shared'), 0o644, OLD);
    writeFile(dir, `src/${name}.bin`, seededBytes(400_000, name), 0o644, OLD);
    writeFile(dir, 'notes.txt', Buffer.from(`version ${name}\n`), 0o644, OLD);
    // An unchanged directory: its tree object is shared by every version.
    writeFile(dir, 'lib/const.txt', Buffer.from('unchanged\n'), 0o644, OLD);
    return dir;
  }

  /** Runs GC with grace 0 in a loop until `work` settles; resolves with how many runs happened. */
  async function gcWhile(work: Promise<unknown>): Promise<number> {
    let settled = false;
    void work.then(
      () => (settled = true),
      () => (settled = true),
    );
    // Start only once the first pack blob is written, so every run sees an unindexed pack.
    while (!settled && !faults.calls.some((c) => c.op === 'put' && PACK_KEY.test(c.key))) await sleep(5);
    let runs = 0;
    while (!settled) {
      await gcNow();
      runs += 1;
    }
    return runs;
  }

  async function expectAllReadyRestore(dirs: ReadonlyMap<string, string>): Promise<void> {
    const ready = await b.meta.checkpoints.listAll({ status: 'ready' });
    expect(ready.map((c) => c.id).sort()).toEqual([...dirs.keys()].sort());
    for (const [id, dir] of dirs) {
      const target = path.join(b.dir, `restore-${id}`);
      await snapshots.restore({ dir: target, workspace: 'ws', checkpoint: id });
      expect(describeTree(target)).toEqual(describeTree(dir));
      fs.rmSync(target, { recursive: true });
    }
    const report = await verifyStore({ blobs: faults, meta: b.meta }, { readData: true });
    expect(report.ok, JSON.stringify(report)).toBe(true);
  }

  it('a checkpoint slowed between its pack uploads commits packs GC left alone; it and a later checkpoint reusing its chunks restore byte-exactly', async () => {
    const dirs = new Map<string, string>();
    const v0 = version('v0');
    dirs.set((await snapshots.checkpoint({ dir: v0, workspace: 'ws' })).checkpoint.id, v0);

    faults.calls.length = 0;
    // The second pack put (the tree pack, after the data pack is durable) hangs.
    faults.inject({ ops: ['put'], key: PACK_KEY, nth: 2, fault: { kind: 'latency', ms: SLOW_PUT_MS } });
    const v1 = version('v1');
    const slow = snapshots.checkpoint({ dir: v1, workspace: 'ws' });
    const runs = await gcWhile(slow);
    dirs.set((await slow).checkpoint.id, v1);
    expect(runs).toBeGreaterThan(1);
    faults.clear();

    // v2 reuses v1's unique chunks through the index: they must still exist.
    const v2 = path.join(b.dir, 'v2');
    fs.cpSync(v1, v2, { recursive: true, preserveTimestamps: true });
    writeFile(v2, 'notes.txt', Buffer.from('version v2\n'), 0o644, OLD);
    dirs.set((await snapshots.checkpoint({ dir: v2, workspace: 'ws' })).checkpoint.id, v2);
    await gcNow();

    await expectAllReadyRestore(dirs);
    expect(await b.meta.db.selectFrom('upload_intents').selectAll().execute()).toEqual([]);
  });

  it('a checkpoint that fails after uploading releases its intents: its orphan pack is collected and the head stays restorable', async () => {
    const dirs = new Map<string, string>();
    const v0 = version('v0');
    dirs.set((await snapshots.checkpoint({ dir: v0, workspace: 'ws' })).checkpoint.id, v0);
    const before = new Set<string>();
    for await (const { key } of b.blobs.list('packs/')) before.add(key);

    faults.inject({
      ops: ['put'],
      key: PACK_KEY,
      nth: 2,
      fault: { kind: 'error', error: () => new StoreError('[faulty] permanent failure', { transient: false }) },
    });
    expect(await codeOf(snapshots.checkpoint({ dir: version('v1'), workspace: 'ws' }))).toBe('STORE_UNAVAILABLE');
    faults.clear();
    const left: string[] = [];
    for await (const { key } of b.blobs.list('packs/')) if (!before.has(key)) left.push(key);
    expect(left).toHaveLength(1); // the pack whose upload succeeded before the failure
    expect(await b.meta.db.selectFrom('upload_intents').selectAll().execute()).toEqual([]);

    const report = await gcNow();
    expect(report.orphanPacksDeleted).toBe(1);
    expect(await b.blobs.stat(left[0] as string)).toBeUndefined();
    expect((await b.meta.objects.packStates([packIdFromKey(left[0] as string) as string])).size).toBe(0);
    await expectAllReadyRestore(dirs);
  });

  it('a repack slowed between its pack uploads keeps its new packs through concurrent GC runs with grace 0', async () => {
    const dirs = new Map<string, string>();
    // The first version's packs hold the shared chunk and the shared tree: forgetting it leaves both packs sparse.
    for (const name of ['r0', 'r1', 'r2']) {
      const dir = version(name);
      dirs.set((await snapshots.checkpoint({ dir, workspace: 'ws' })).checkpoint.id, dir);
    }
    const keep = [...dirs.entries()].slice(-1);
    faults.calls.length = 0;
    faults.inject({ ops: ['put'], key: PACK_KEY, nth: 2, fault: { kind: 'latency', ms: SLOW_PUT_MS } });
    const repacking = collectGarbage(
      { blobs: faults, meta: b.meta, workers: b.workers },
      { graceMs: 0, retention: { keepLast: 1, keepDaily: 0 }, repackBelowLiveRatio: 1 },
    );
    const runs = await gcWhile(repacking);
    expect((await repacking).packsRepacked).toBeGreaterThan(0);
    expect(runs).toBeGreaterThan(1);
    faults.clear();
    await gcNow();
    await expectAllReadyRestore(new Map(keep));
  });
});
