import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type FolderRef, Folders } from '../src/folders/folders.js';
import { packKey } from '../src/objects/pack-format.js';
import { TARGET_PACK_BYTES } from '../src/objects/pack-writer.js';
import { collectGarbage, type GcOptions, type GcPackEntry } from '../src/snapshot/gc/gc.js';
import { COMPACT_MIN_AGE_MS, COMPACT_MIN_PACKS, DEFAULT_COMPACT_BELOW_BYTES } from '../src/snapshot/gc/gc-compaction.js';
import { verifyStore } from '../src/snapshot/inspect/verify.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

const KEEP_ALL = { keepLast: 1000, keepDaily: 0 };
const FOLDER_WRITES = 50;
const CHECKPOINTS = 10;
const FILE_BYTES = 4096;
const OLD_MTIME = Date.UTC(2024, 0, 1);

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

const ids = (entries: readonly GcPackEntry[]): string[] => entries.map((e) => e.id).sort();

describe.each(BACKENDS)('compaction of small packs on $name', (backend) => {
  let b: OpenedBackends;
  let folders: Folders;
  let ref: FolderRef;

  beforeEach(async () => {
    b = await backend.open();
    folders = new Folders({ meta: b.meta, blobs: b.blobs, workers: b.workers });
    ref = { tenantId: (await b.snapshots.tenant(true)).id, scope: 'project', ownerId: 'compaction' };
  }, 60_000);
  afterEach(async () => {
    await b?.cleanup();
  });

  const gc = (options: GcOptions) => collectGarbage(b, { retention: KEEP_ALL, ...options });

  async function packBlobs(): Promise<Set<string>> {
    const keys = new Set<string>();
    for await (const s of b.blobs.list('packs/')) keys.add(s.key);
    return keys;
  }

  /** `count` folder files of random 4 KiB, one write (and so one pack) each; their contents by path. */
  async function writeFiles(prefix: string, count: number): Promise<Map<string, Buffer>> {
    const files = new Map<string, Buffer>();
    for (let i = 0; i < count; i += 1) {
      const bytes = randomBytes(FILE_BYTES);
      const p = `${prefix}/${i}.bin`;
      await folders.write(ref, p, once(bytes), { operationId: `${prefix}-${i}` });
      files.set(p, bytes);
    }
    return files;
  }

  async function expectFiles(files: ReadonlyMap<string, Buffer>): Promise<void> {
    for (const [p, bytes] of files) {
      const { entry, body } = await folders.open(ref, p);
      expect(entry.sha256).toBe(sha(bytes));
      expect(sha(await readAll(body))).toBe(sha(bytes));
    }
  }

  /** `CHECKPOINTS` small checkpoints of one workspace, each adding one 8 KB file; their directories by id. */
  async function smallCheckpoints(): Promise<Array<{ id: string; dir: string }>> {
    const out: Array<{ id: string; dir: string }> = [];
    for (let v = 0; v < CHECKPOINTS; v += 1) {
      const dir = path.join(b.dir, `v${v}`);
      for (let f = 0; f <= v; f += 1) writeFile(dir, `f${f}.bin`, seededBytes(8000, `file-${f}`), 0o644, OLD_MTIME);
      const { checkpoint } = await b.snapshots.checkpoint({ dir, workspace: 'ws' });
      out.push({ id: checkpoint.id, dir });
    }
    return out;
  }

  async function expectRestores(versions: ReadonlyArray<{ id: string; dir: string }>): Promise<void> {
    for (const v of versions) {
      const target = path.join(b.dir, `restore-${v.id}`);
      await b.snapshots.restore({ dir: target, workspace: 'ws', checkpoint: v.id });
      expect(describeTree(target)).toEqual(describeTree(v.dir));
      fs.rmSync(target, { recursive: true });
    }
  }

  it('many small packs become one data and one tree pack; everything reads back; a dry run lists what the run does', async () => {
    const files = await writeFiles('small', FOLDER_WRITES);
    const versions = await smallCheckpoints();
    const old = await b.meta.objects.listPacks();
    expect(old.length).toBe(FOLDER_WRITES + 2 * CHECKPOINTS);
    expect(old.every((p) => p.size < DEFAULT_COMPACT_BELOW_BYTES)).toBe(true);
    // Everything above is old enough at `now`; a pack written after `oldest` is not.
    const oldest = Date.now();
    await sleep(5);
    const young = await writeFiles('young', 1);
    const youngPack = (await b.meta.objects.listPacks()).find((p) => !old.some((o) => o.id === p.id));
    expect(youngPack).toBeDefined();
    const now = oldest + COMPACT_MIN_AGE_MS;

    const dry = await gc({ dryRun: true, graceMs: 0, now });
    expect(await packBlobs()).toEqual(new Set([...old, youngPack].map((p) => packKey(p?.id ?? ''))));
    const report = await gc({ graceMs: 0, now });

    expect(ids(report.listing.packsCompacted)).toEqual(old.map((p) => p.id).sort());
    expect(report.listing.packsCompacted.every((e) => e.reason === 'small')).toBe(true);
    expect(report).toMatchObject({ packsCompacted: old.length, packsRepacked: 0, packsCondemned: 0, packsDeleted: old.length });
    // The dry run listed exactly what the run did.
    expect(dry).toMatchObject({ packsCompacted: report.packsCompacted, packsDeleted: report.packsDeleted, bytesFreed: report.bytesFreed });
    expect(dry.listing.packsCompacted).toEqual(report.listing.packsCompacted);
    expect(ids(dry.listing.packsDeleted)).toEqual(ids(report.listing.packsDeleted));
    expect(ids(report.listing.packsDeleted)).toEqual(ids(report.listing.packsCompacted));

    // What is left: the young pack, untouched, and one new pack per kind.
    const after = (await b.meta.objects.listPacks()).filter((p) => p.condemnedAt === null);
    expect(after.map((p) => p.id)).toContain(youngPack?.id);
    const fresh = after.filter((p) => p.id !== youngPack?.id);
    expect(fresh.map((p) => p.kind).sort()).toEqual(['data', 'tree']);
    expect(await packBlobs()).toEqual(new Set(after.map((p) => packKey(p.id))));

    await expectFiles(files);
    await expectFiles(young);
    await expectRestores(versions);
    const verified = await verifyStore(b, { readData: true });
    expect(verified.problems).toEqual([]);
    expect(verified.ok).toBe(true);

    // Three small packs, two of them young: nothing more to compact.
    expect(await gc({ graceMs: 0, now })).toMatchObject({ packsCompacted: 0, packsDeleted: 0 });
  }, 180_000);

  it('leaves alone young small packs, too few old ones, and everything when disabled', async () => {
    const files = await writeFiles('few', COMPACT_MIN_PACKS - 1);
    const written = await b.meta.objects.listPacks();
    const late = Math.max(...written.map((p) => p.createdAt)) + COMPACT_MIN_AGE_MS;
    // Too few, however old.
    expect(await gc({ graceMs: 0, now: late })).toMatchObject({ packsCompacted: 0, packsDeleted: 0 });
    const more = await writeFiles('more', COMPACT_MIN_PACKS);
    // Enough of them, but none old enough.
    expect(await gc({ graceMs: 0 })).toMatchObject({ packsCompacted: 0, packsDeleted: 0 });
    const allOld = Math.max(...(await b.meta.objects.listPacks()).map((p) => p.createdAt)) + COMPACT_MIN_AGE_MS;
    // Old enough and enough of them, but compaction switched off.
    expect(await gc({ graceMs: 0, now: allOld, compactBelowBytes: 0 })).toMatchObject({ packsCompacted: 0, packsDeleted: 0 });
    expect((await packBlobs()).size).toBe(2 * COMPACT_MIN_PACKS - 1);
    // With a grace, the compacted packs are condemned and deleted only after it.
    const report = await gc({ graceMs: 60_000, now: allOld });
    expect(report).toMatchObject({ packsCompacted: 2 * COMPACT_MIN_PACKS - 1, packsDeleted: 0 });
    expect((await packBlobs()).size).toBe(2 * COMPACT_MIN_PACKS);
    const later = await gc({ graceMs: 60_000, now: allOld + 60_000 });
    expect(later).toMatchObject({ packsCompacted: 0, packsDeleted: 2 * COMPACT_MIN_PACKS - 1 });
    expect(later.listing.packsDeleted.every((e) => e.reason === 'condemned')).toBe(true);
    expect((await packBlobs()).size).toBe(1);
    await expectFiles(files);
    await expectFiles(more);
  }, 180_000);

  it('rejects a compaction threshold outside 0 … the target pack size', async () => {
    expect(await codeOf(gc({ compactBelowBytes: -1 }))).toBe('INVALID_INPUT');
    expect(await codeOf(gc({ compactBelowBytes: TARGET_PACK_BYTES + 1 }))).toBe('INVALID_INPUT');
    expect(await codeOf(gc({ compactBelowBytes: Number.NaN }))).toBe('INVALID_INPUT');
  });
});
