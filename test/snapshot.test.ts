import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decompress } from '../src/objects/content-workers.js';
import { decodeFooter, decodeTrailer, PACK_FOOTER_BYTES, packIdFromKey } from '../src/objects/pack-format.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { describeTree, makeMixedTree, seededBytes, settleDirMtimes, writeFile } from './support/trees.js';

describe.each(BACKENDS)('snapshot engine on $name', (backend) => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let source: string;

  beforeAll(async () => {
    b = await backend.open();
    ({ snapshots } = b);
    source = path.join(b.dir, 'source');
    fs.mkdirSync(source);
    makeMixedTree(source);
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('round-trips every kind of entry byte for byte, with modes and mtimes', async () => {
    const first = await snapshots.checkpoint({ dir: source, workspace: 'mixed' });
    expect(first.checkpoint.status).toBe('ready');
    expect(first.excluded).toEqual([]);
    expect(first.stats.files).toBe(14);
    expect(first.stats.symlinks).toBe(3);
    // 1 KiB-ish files are one chunk; 1 MiB + 1 and 50 MiB are split; the duplicate is stored once.
    expect(first.stats.filesHashed).toBe(14);
    const target = path.join(b.dir, 'restored');
    const receipt = await snapshots.restore({ dir: target, workspace: 'mixed' });
    expect(receipt).toMatchObject({ checkpointId: first.checkpoint.id, files: 14, symlinks: 3, verified: true, filesReused: 0 });
    expect(describeTree(target)).toEqual(describeTree(source));
  }, 120_000);

  it('an incremental checkpoint writes only the changed chunks and the trees above them', async () => {
    const old = Date.UTC(2024, 5, 1);
    writeFile(source, 'a/b/c/deep.txt', 'changed deep content\n', 0o640, old);
    const big = fs.readFileSync(path.join(source, 'sizes/big.bin'));
    big.write('an edit in the middle of a big file', 25 * 1024 * 1024);
    writeFile(source, 'sizes/big.bin', big, 0o644, old);
    const second = await snapshots.checkpoint({ dir: source, workspace: 'mixed' });
    expect(second.stats.filesHashed).toBe(2);
    const trees = 5; // root, a, a/b, a/b/c, sizes
    // deep.txt is one chunk; the edit in big.bin re-cuts one or two content-defined chunks.
    expect(second.stats.objectsWritten).toBeGreaterThanOrEqual(1 + 1 + trees);
    expect(second.stats.objectsWritten).toBeLessThanOrEqual(1 + 2 + trees);
    expect(second.stats.packsWritten).toBe(2);
    expect(second.stats.blobWrites).toBe(2);

    const third = await snapshots.checkpoint({ dir: source, workspace: 'mixed' });
    expect(third.stats).toMatchObject({ filesHashed: 0, objectsWritten: 0, packsWritten: 0, blobWrites: 0 });
    expect(third.checkpoint.rootTree).toBe(second.checkpoint.rootTree);
    const changes = await snapshots.diff((await snapshots.log('mixed'))[2]?.id ?? '', second.checkpoint.id);
    expect(changes.map((c) => `${c.change} ${c.path}`).sort()).toEqual(['modified a/b/c/deep.txt', 'modified sizes/big.bin']);
  }, 120_000);

  it('restore after a restore is a no-change checkpoint (the stat cache is written)', async () => {
    const target = path.join(b.dir, 'restored-2');
    await snapshots.restore({ dir: target, workspace: 'mixed' });
    const again = await snapshots.checkpoint({ dir: target, workspace: 'mixed' });
    expect(again.stats).toMatchObject({ filesHashed: 0, objectsWritten: 0, blobWrites: 0 });
  }, 120_000);

  it('refuses a non-empty target without --replace; a warm restore reuses unchanged files and removes extras', async () => {
    const target = path.join(b.dir, 'restored-2');
    writeFile(target, 'extra-file', 'not in the checkpoint');
    writeFile(target, 'plain.txt', 'locally modified', 0o644, Date.UTC(2020, 0, 1));
    const before = describeTree(target);
    expect(await codeOf(snapshots.restore({ dir: target, workspace: 'mixed' }))).toBe('CONFLICT');
    expect(describeTree(target)).toEqual(before);
    const receipt = await snapshots.restore({ dir: target, workspace: 'mixed', replace: true });
    expect(receipt.filesReused).toBe(receipt.files - 1);
    expect(describeTree(target)).toEqual(describeTree(source));
    expect(fs.readdirSync(b.dir).filter((n) => n.includes('holdfast-'))).toEqual([]);
  }, 120_000);

  it('ls and cat read verified content out of a checkpoint', async () => {
    const [head] = await snapshots.log('mixed', 1);
    const root = await snapshots.ls(head?.id ?? '');
    expect(root.kind === 'dir' && root.entries.map((e) => e.name)).toContain('sizes');
    const parts: Buffer[] = [];
    for await (const piece of snapshots.cat(head?.id ?? '', 'sizes/mib-plus-1')) parts.push(Buffer.from(piece));
    expect(Buffer.concat(parts).equals(fs.readFileSync(path.join(source, 'sizes/mib-plus-1')))).toBe(true);
    expect(await codeOf(snapshots.ls(head?.id ?? '', 'no/such/path'))).toBe('NOT_FOUND');
  });

  it('never stores planted secrets, and reports each exclusion with its reason', async () => {
    const dir = path.join(b.dir, 'secrets');
    const pem = `-----BEGIN RSA PRIVATE KEY-----\n${seededBytes(600, 'pem').toString('base64')}\n-----END RSA PRIVATE KEY-----\n`;
    // Built at run time so this file itself carries no token-shaped literal.
    const github = ['ghp', 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'].join('_');
    const aws = ['AKIA', 'Z7XQ4PL2MNB3KCVD'].join('');
    writeFile(dir, 'src/app.ts', 'export const x = 1;\n');
    writeFile(dir, '.env', 'DATABASE_URL=postgres://secret-env-value\n');
    writeFile(dir, 'deploy/.env.production', 'TOKEN=secret-env-prod\n');
    writeFile(dir, '.env.example', 'TOKEN=\n');
    writeFile(dir, '.ssh/id_rsa', pem);
    writeFile(dir, 'keys/server.key', pem);
    writeFile(dir, 'config/settings.py', `GITHUB_TOKEN = "${github}"\n`);
    writeFile(dir, 'notes.txt', `aws key ${aws} in a note\n`);
    const result = await snapshots.checkpoint({ dir, workspace: 'secrets' });
    const reasons = Object.fromEntries(result.excluded.map((e) => [e.path, e.reason]));
    expect(reasons).toMatchObject({
      '.env': 'secret-path',
      'deploy/.env.production': 'secret-path',
      '.ssh': 'secret-path',
      'keys/server.key': 'secret-content',
      'config/settings.py': 'secret-content',
      'notes.txt': 'secret-content',
    });
    const kept = await snapshots.ls(result.checkpoint.id);
    expect(kept.kind === 'dir' && kept.entries.map((e) => e.name).sort()).toEqual(['.env.example', 'config', 'deploy', 'keys', 'src']);
    // Decompress every object of every pack in the store and search for the secrets.
    const needles = ['PRIVATE KEY', github, aws, 'secret-env-value', 'secret-env-prod'];
    let objects = 0;
    for await (const { key, size } of b.blobs.list('packs/')) {
      const packId = packIdFromKey(key) ?? '';
      const footer = await b.blobs.get(key, { offset: size - PACK_FOOTER_BYTES, length: PACK_FOOTER_BYTES });
      const trailerLength = decodeFooter(packId, footer, size);
      const trailer = decodeTrailer(
        packId,
        await b.blobs.get(key, { offset: size - PACK_FOOTER_BYTES - trailerLength, length: trailerLength }),
        footer,
      );
      const bytes = Buffer.from(await b.blobs.get(key));
      for (const o of trailer.objects) {
        const raw = Buffer.from(decompress(bytes.subarray(o.offset, o.offset + o.length), o.codec)).toString('latin1');
        for (const needle of needles) expect(raw.includes(needle), `${needle} in object ${o.id}`).toBe(false);
        objects += 1;
      }
    }
    expect(objects).toBeGreaterThan(10);
  }, 120_000);

  it('a secret path is captured only when allowed by its exact path, and the allowance is reported', async () => {
    const dir = path.join(b.dir, 'allowed');
    writeFile(dir, '.env', 'LOCAL_ONLY=1\n');
    writeFile(dir, 'sub/.env', 'OTHER=1\n');
    const result = await snapshots.checkpoint({ dir, workspace: 'allowed', excludes: { allowSecretPaths: ['.env'] } });
    expect(result.allowed.map((a) => [a.path, a.reason])).toEqual([['.env', 'secret-path']]);
    expect(result.excluded.map((e) => [e.path, e.reason])).toEqual([['sub/.env', 'secret-path']]);
    const root = await snapshots.ls(result.checkpoint.id);
    expect(root.kind === 'dir' && root.entries.map((e) => e.name)).toEqual(['.env', 'sub']);
  });

  it('two concurrent checkpoints of one workspace: one wins, the other fails with CONFLICT', async () => {
    const dir = path.join(b.dir, 'race');
    writeFile(dir, 'f.txt', 'race');
    await snapshots.checkpoint({ dir, workspace: 'race' });
    writeFile(dir, 'g.txt', 'more');
    const outcomes = await Promise.all(
      [0, 1].map(() =>
        snapshots.checkpoint({ dir, workspace: 'race' }).then(
          (r) => r.checkpoint.id,
          (e: { code: string }) => e.code,
        ),
      ),
    );
    expect(outcomes.filter((o) => o === 'CONFLICT')).toHaveLength(1);
    const winner = outcomes.find((o) => o !== 'CONFLICT');
    const [ws] = (await snapshots.workspaces()).filter((w) => w.name === 'race');
    expect(ws?.headCheckpointId).toBe(winner);
    const log = await snapshots.log('race');
    expect(log.filter((c) => c.status === 'failed').map((c) => (c.error as { code?: string }).code)).toEqual(['CONFLICT']);
  }, 60_000);

  it('a file changed during the checkpoint is noticed by the second look and captured on the next scan', async () => {
    const dir = path.join(b.dir, 'moving');
    writeFile(dir, 'a.txt', 'first');
    let edits = 0;
    const result = await snapshots.checkpoint({
      dir,
      workspace: 'moving',
      onProgress: (p) => {
        if (p.phase === 'upload' && edits === 0) {
          edits += 1;
          writeFile(dir, 'a.txt', 'second, longer');
        }
      },
    });
    expect(result.stats.attempts).toBe(2);
    const parts: Buffer[] = [];
    for await (const piece of snapshots.cat(result.checkpoint.id, 'a.txt')) parts.push(Buffer.from(piece));
    expect(Buffer.concat(parts).toString()).toBe('second, longer');
  });

  it('a workspace that never settles fails with WORKSPACE_CHANGED and the head stays put', async () => {
    const dir = path.join(b.dir, 'restless');
    writeFile(dir, 'a.txt', 'v0');
    const first = await snapshots.checkpoint({ dir, workspace: 'restless' });
    let n = 0;
    const attempt = snapshots.checkpoint({
      dir,
      workspace: 'restless',
      onProgress: (p) => {
        if (p.phase === 'upload') writeFile(dir, `new-${n++}.txt`, 'more');
      },
    });
    expect(await codeOf(attempt)).toBe('WORKSPACE_CHANGED');
    const [ws] = (await snapshots.workspaces()).filter((w) => w.name === 'restless');
    expect(ws?.headCheckpointId).toBe(first.checkpoint.id);
    const [latest] = await snapshots.log('restless', 1);
    expect(latest).toMatchObject({ status: 'failed', error: { code: 'WORKSPACE_CHANGED' } });
  });

  it('a checkpoint never relies on a pack blob that GC is deleting', async () => {
    const dir = path.join(b.dir, 'gc-race');
    writeFile(dir, 'data.bin', seededBytes(300_000, 'gc-race'));
    // The first attempt uploads its packs and then dies before committing: they are orphans.
    const abandoned = snapshots.checkpoint({
      dir,
      workspace: 'gc-race',
      onProgress: (p) => {
        if (p.phase === 'commit') throw new Error('process died before commit');
      },
    });
    expect(await codeOf(abandoned)).not.toBe('RESOLVED');
    const orphans: string[] = [];
    for await (const { key } of b.blobs.list('packs/')) {
      const id = packIdFromKey(key) ?? '';
      if ((await b.meta.objects.packStates([id])).size === 0) orphans.push(id);
    }
    expect(orphans).toHaveLength(2);
    // GC decides to delete them and has started (journal written, blob not yet deleted).
    for (const id of orphans) await b.meta.gc.startDeletion({ packId: id, key: `packs/${id.slice(0, 2)}/${id}` }, Date.now());
    // The same content again produces byte-identical packs that "already exist": refused.
    const error = await snapshots.checkpoint({ dir, workspace: 'gc-race' }).catch((e: { code: string; data: { transient: boolean } }) => e);
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', data: { transient: true } });
    expect((await snapshots.workspaces()).find((w) => w.name === 'gc-race')?.headCheckpointId).toBeNull();
    // GC finishes; a retry uploads the packs afresh and is restorable.
    for (const id of orphans) {
      await b.blobs.delete(`packs/${id.slice(0, 2)}/${id}`);
      await b.meta.gc.finishDeletion(id, Date.now());
    }
    const retry = await snapshots.checkpoint({ dir, workspace: 'gc-race' });
    expect(retry.stats.packsWritten).toBe(2);
    const target = path.join(b.dir, 'gc-race-restore');
    await snapshots.restore({ dir: target, workspace: 'gc-race' });
    expect(describeTree(target)).toEqual(describeTree(dir));
  });

  it('a checkpoint marks pending ones abandoned by a dead process (older than an hour) as failed', async () => {
    const dir = path.join(b.dir, 'abandoned');
    writeFile(dir, 'a.txt', 'a');
    const ws = await snapshots.workspace('abandoned', true);
    const dead = await b.meta.checkpoints.createPending({ workspaceId: ws.id, parentId: null, reason: 'turn' });
    const recent = await b.meta.checkpoints.createPending({ workspaceId: ws.id, parentId: null, reason: 'turn' });
    await b.meta.db
      .updateTable('checkpoints')
      .set({ created_at: Date.now() - 2 * 60 * 60 * 1000 })
      .where('id', '=', dead.id)
      .execute();
    await snapshots.checkpoint({ dir, workspace: 'abandoned' });
    expect(await b.meta.checkpoints.get(dead.id)).toMatchObject({ status: 'failed', error: { code: 'TIMEOUT' } });
    expect((await b.meta.checkpoints.get(recent.id)).status).toBe('pending');
  });

  it('unchanged directories keep their tree ids, but a change in what is excluded is never hidden by the cache', async () => {
    const dir = path.join(b.dir, 'reuse');
    const old = Date.UTC(2024, 1, 1);
    writeFile(dir, 'a/keep.txt', 'keep', 0o644, old);
    writeFile(dir, 'a/debug.log', 'log', 0o644, old);
    writeFile(dir, 'a/node_modules/x/index.js', 'x', 0o644, old);
    // Directory mtimes in the past too: a directory changed within the last second is never reused.
    settleDirMtimes(dir, old);
    const first = await snapshots.checkpoint({ dir, workspace: 'reuse' });
    const second = await snapshots.checkpoint({ dir, workspace: 'reuse' });
    expect(second.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    expect(second.stats.filesHashed).toBe(0);
    const names = async (id: string, p: string) => {
      const found = await snapshots.ls(id, p);
      return found.kind === 'dir' ? found.entries.map((e) => e.name) : [];
    };
    const third = await snapshots.checkpoint({ dir, workspace: 'reuse', excludes: { cacheExcludes: false } });
    expect(await names(third.checkpoint.id, 'a')).toEqual(['debug.log', 'keep.txt', 'node_modules']);
    const fourth = await snapshots.checkpoint({ dir, workspace: 'reuse', excludes: { cacheExcludes: false, exclude: ['*.log'] } });
    expect(await names(fourth.checkpoint.id, 'a')).toEqual(['keep.txt', 'node_modules']);
    const fifth = await snapshots.checkpoint({ dir, workspace: 'reuse' });
    expect(fifth.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
  });

  it('a missing pack fails the restore with RESTORE_INCOMPLETE and leaves nothing behind', async () => {
    const dir = path.join(b.dir, 'lossy');
    writeFile(dir, 'only.txt', seededBytes(10_000, 'lossy'));
    const result = await snapshots.checkpoint({ dir, workspace: 'lossy' });
    for await (const { key } of b.blobs.list('packs/')) {
      const bytes = Buffer.from(await b.blobs.get(key));
      if (bytes.includes(seededBytes(10_000, 'lossy').subarray(0, 64))) await b.blobs.delete(key);
    }
    const target = path.join(b.dir, 'lossy-restore');
    expect(await codeOf(snapshots.restore({ dir: target, workspace: 'lossy' }))).toBe('RESTORE_INCOMPLETE');
    expect(fs.existsSync(target)).toBe(false);
    expect(fs.readdirSync(b.dir).filter((n) => n.includes('holdfast-staging'))).toEqual([]);
    expect(result.checkpoint.status).toBe('ready');
  });
});
