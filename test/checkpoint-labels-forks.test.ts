import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CHECKPOINT_LABEL_CHARS, MAX_CHECKPOINT_META_BYTES } from '../src/index.js';
import { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { describeTree, seededBytes, writeFile } from './support/trees.js';

/** A GitHub token shape the built-in secret rules recognise (never a real token). */
const GITHUB_TOKEN = `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`;
/** An hour, and a far later "now" that puts every grace behind a GC run. */
const HOUR_MS = 60 * 60 * 1000;

async function blobKeys(b: OpenedBackends): Promise<string[]> {
  const keys: string[] = [];
  for await (const stat of b.blobs.list('')) keys.push(stat.key);
  return keys.sort();
}

describe.each(BACKENDS)('checkpoint labels, metadata and forks on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let source: string;

  beforeAll(async () => {
    b = await backend.open();
    ({ snapshots } = b);
    source = path.join(b.dir, 'source');
    writeFile(source, 'a.txt', 'alpha\n');
    writeFile(source, 'dir/big.bin', seededBytes(300_000, 'fork-big'));
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('a checkpoint keeps its label and flat metadata; log and getCheckpoint return them', async () => {
    const meta = { thread: 'thread-1', run: 'run/2', step: 3, final: false, none: null };
    const made = await snapshots.checkpoint({ dir: source, workspace: 'labels', label: 'after tool call', meta });
    expect(made.checkpoint).toMatchObject({ label: 'after tool call', meta, forkedFrom: null });
    expect(await snapshots.getCheckpoint(made.checkpoint.id)).toMatchObject({ label: 'after tool call', meta });
    const [logged] = await snapshots.log('labels');
    expect(logged).toMatchObject({ id: made.checkpoint.id, label: 'after tool call', meta });
    const plain = await snapshots.checkpoint({ dir: source, workspace: 'labels' });
    expect(plain.checkpoint).toMatchObject({ label: null, meta: null });
  }, 120_000);

  it('attack: oversized, nested, control-character and credential labels and metadata are refused before anything is recorded', async () => {
    const attempts: Array<[string, { label?: unknown; meta?: unknown }]> = [
      ['INVALID_INPUT', { label: 'x'.repeat(MAX_CHECKPOINT_LABEL_CHARS + 1) }],
      ['INVALID_INPUT', { label: '' }],
      ['INVALID_INPUT', { label: 'ok\u001b[2Jwiped' }],
      ['INVALID_INPUT', { label: 'evil\u202etxt.exe' }],
      ['INVALID_INPUT', { meta: { nested: { deep: 1 } } }],
      ['INVALID_INPUT', { meta: { list: [1, 2] } }],
      ['INVALID_INPUT', { meta: ['not', 'an', 'object'] }],
      ['INVALID_INPUT', { meta: { 'bad key': 'v' } }],
      ['INVALID_INPUT', { meta: { n: Number.POSITIVE_INFINITY } }],
      ['LIMIT_EXCEEDED', { meta: { big: 'v'.repeat(MAX_CHECKPOINT_META_BYTES) } }],
      ['SECRET_EXCLUDED', { label: `token ${GITHUB_TOKEN}` }],
      ['SECRET_EXCLUDED', { meta: { auth: GITHUB_TOKEN } }],
    ];
    for (const [code, note] of attempts) {
      const input = { dir: source, workspace: 'refused', ...note } as Parameters<Snapshots['checkpoint']>[0];
      expect(await codeOf(snapshots.checkpoint(input)), JSON.stringify(note).slice(0, 80)).toBe(code);
    }
    // Nothing was recorded: no workspace, so no checkpoint either.
    expect((await snapshots.workspaces()).map((w) => w.name)).not.toContain('refused');
  }, 120_000);

  it('restore by checkpoint id alone: exact, prefix and latest find the workspace; another tenant finds nothing', async () => {
    const made = await snapshots.checkpoint({ dir: source, workspace: 'by-id' });
    const byId = path.join(b.dir, 'by-id');
    const receipt = await snapshots.restore({ dir: byId, checkpoint: made.checkpoint.id });
    expect(receipt.checkpointId).toBe(made.checkpoint.id);
    expect(describeTree(byId)).toEqual(describeTree(source));
    const byPrefix = path.join(b.dir, 'by-prefix');
    expect((await snapshots.restore({ dir: byPrefix, checkpoint: made.checkpoint.id.slice(0, 12) })).checkpointId).toBe(made.checkpoint.id);
    expect((await snapshots.restore({ dir: path.join(b.dir, 'by-latest'), checkpoint: 'latest' })).checkpointId).toBe(made.checkpoint.id);
    expect(await codeOf(snapshots.restore({ dir: path.join(b.dir, 'by-none') }))).toBe('INVALID_INPUT');
    const other = new Snapshots({ blobs: b.blobs, meta: b.meta, workers: b.workers, cacheDir: path.join(b.dir, 'cache') }, 'other-tenant');
    await other.checkpoint({ dir: source, workspace: 'theirs' });
    const stolen = path.join(b.dir, 'stolen');
    expect(await codeOf(other.restore({ dir: stolen, checkpoint: made.checkpoint.id }))).toBe('NOT_FOUND');
    expect(await codeOf(other.restore({ dir: stolen, checkpoint: made.checkpoint.id.slice(0, 12) }))).toBe('NOT_FOUND');
    expect(fs.existsSync(stolen)).toBe(false);
  }, 120_000);

  it('a fork copies no byte: its first checkpoint shares the tree, and its objects outlive the source under GC', async () => {
    const old = await snapshots.checkpoint({ dir: source, workspace: 'fork-src', label: 'source' });
    const changed = path.join(b.dir, 'changed');
    writeFile(changed, 'other.txt', 'something else entirely\n');
    await snapshots.checkpoint({ dir: changed, workspace: 'fork-src' });
    const keysBefore = await blobKeys(b);
    const packsBefore = (await b.meta.objects.listPacks()).length;

    const fork = await snapshots.fork({ checkpoint: old.checkpoint.id, workspace: 'fork-dst', label: 'forked', meta: { from: 'test' } });
    expect(fork).toMatchObject({
      status: 'ready',
      rootTree: old.checkpoint.rootTree,
      parentId: old.checkpoint.id,
      forkedFrom: old.checkpoint.id,
      label: 'forked',
      meta: { from: 'test' },
    });
    expect(await blobKeys(b)).toEqual(keysBefore);
    expect((await b.meta.objects.listPacks()).length).toBe(packsBefore);
    expect((await snapshots.workspace('fork-dst', false)).headCheckpointId).toBe(fork.id);

    // The source checkpoint is forgotten (not its workspace's head); only the fork holds its objects now.
    const now = Date.now() + 48 * HOUR_MS;
    const first = await snapshots.gc({ retention: { keepLast: 1, keepDaily: 0 }, graceMs: 0, now });
    expect(first.forgotten).toBeGreaterThanOrEqual(1);
    await snapshots.gc({ retention: { keepLast: 1, keepDaily: 0 }, graceMs: 0, now: now + HOUR_MS });
    expect(await codeOf(snapshots.getCheckpoint(old.checkpoint.id))).toBe('NOT_FOUND');
    const restored = path.join(b.dir, 'fork-restored');
    await snapshots.restore({ dir: restored, workspace: 'fork-dst' });
    expect(describeTree(restored)).toEqual(describeTree(source));
    expect((await snapshots.verify({ readData: true })).ok).toBe(true);
  }, 180_000);

  it('attack: a fork of another tenant’s checkpoint is NOT_FOUND; a taken name is ALREADY_EXISTS; nothing is created', async () => {
    const mine = await snapshots.checkpoint({ dir: source, workspace: 'fork-guarded' });
    const other = new Snapshots({ blobs: b.blobs, meta: b.meta, workers: b.workers, cacheDir: path.join(b.dir, 'cache') }, 'thief');
    await other.checkpoint({ dir: changedDir(b), workspace: 'thief-own' });
    expect(await codeOf(other.fork({ checkpoint: mine.checkpoint.id, workspace: 'loot' }))).toBe('NOT_FOUND');
    expect(await codeOf(other.fork({ checkpoint: mine.checkpoint.id.slice(0, 10), workspace: 'loot' }))).toBe('NOT_FOUND');
    expect((await other.workspaces()).map((w) => w.name)).toEqual(['thief-own']);
    expect(await codeOf(snapshots.fork({ checkpoint: mine.checkpoint.id, workspace: 'fork-guarded' }))).toBe('ALREADY_EXISTS');
    expect(await codeOf(snapshots.fork({ checkpoint: mine.checkpoint.id, workspace: 'holdfast.bundles' }))).toBe('INVALID_INPUT');
    expect(await codeOf(snapshots.fork({ checkpoint: mine.checkpoint.id, workspace: 'bad/name' }))).toBe('INVALID_INPUT');
    expect(await codeOf(snapshots.fork({ checkpoint: mine.checkpoint.id, workspace: 'x', label: GITHUB_TOKEN }))).toBe('SECRET_EXCLUDED');
    expect((await snapshots.workspaces()).map((w) => w.name)).not.toContain('x');
  }, 120_000);
});

function changedDir(b: OpenedBackends): string {
  const dir = path.join(b.dir, 'thief-src');
  writeFile(dir, 'mine.txt', 'thief data\n');
  return dir;
}
