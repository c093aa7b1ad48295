import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import { AgentConnection } from '../../src/sandbox/agent/host/agent-connection.js';
import { writeBatchId } from '../../src/sandbox/agent/host/batch-writer.js';
import { encodeFrame, FrameDecoder } from '../../src/sandbox/agent/wire/frame-codec.js';
import { MAX_FRAME_BYTES, PROTOCOL_VERSION, WRITE_BATCH_MAX_OPS, type WriteOp } from '../../src/sandbox/agent/wire/protocol.js';
import { describeTree, makeMixedTree, seededBytes, writeFile } from '../support/trees.js';
import { buildAgentBundle, connectAgent, startAgent, tempDir } from './agent-harness.js';
import { cloneTree, listTree, sendTree } from './tree-sender.js';

const MiB = 1024 * 1024;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
let work: string;
let home: string;
let src: string;
let client: AgentClient;
let n = 0;

/** A fresh target path and staging id for one test. */
function fresh(): { target: string; stagingId: string } {
  n += 1;
  return { target: path.join(work, `target-${n}`, 'ws'), stagingId: `stage-${n}` };
}

const staged = (target: string, stagingId: string): string => path.join(path.dirname(target), `.ws.holdfast-staging-${stagingId}`);

beforeAll(async () => {
  buildAgentBundle();
  work = tempDir('agent-write');
  home = path.join(work, 'home');
  src = path.join(work, 'src');
  makeMixedTree(src, 9 * MiB);
  ({ client } = await connectAgent(home));
});

afterAll(async () => {
  await client?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('the bundled agent, restore side', () => {
  it('writes batches and publishes a tree byte-equal to what was sent (modes, mtimes, symlinks, empty dirs)', async () => {
    const { target, stagingId } = fresh();
    const begun = await client.stageBegin({ stagingId, target, cacheKey: 'restore-1' });
    expect(begun).toMatchObject({ targetState: 'absent', resumed: false, completedBatchIds: [] });
    const stats = await sendTree(client, stagingId, src);
    expect(stats.batches).toBeGreaterThan(3);
    expect(stats.applied).toBe(stats.batches);
    expect(fs.existsSync(target)).toBe(false);
    const published = await client.publish({ stagingId, target, base: 'ckpt-9' });
    expect(published).toMatchObject({ replaced: false, alreadyPublished: false, cacheEntries: listTree(src).files.length });
    expect(describeTree(target)).toEqual(describeTree(src));
    expect(fs.existsSync(staged(target, stagingId))).toBe(false);
    // The stat cache written at publish vouches for every file, so the next checkpoint hashes nothing.
    const scan = await client.scan({ root: target, limits: { maxFileBytes: 1e9, maxEntries: 1e5 }, cacheKey: 'restore-1', base: 'ckpt-9' });
    expect(scan.cached.size).toBe(listTree(src).files.length);
    expect(await client.publish({ stagingId, target })).toMatchObject({ alreadyPublished: true });
  });

  it('warm restore: reuses unchanged files by hard link and writes only what differs', async () => {
    const { target, stagingId } = fresh();
    cloneTree(src, target);
    const next = path.join(work, `next-${n}`);
    cloneTree(src, next);
    writeFile(next, 'plain.txt', 'changed\n', 0o644, Date.UTC(2024, 5, 1));
    writeFile(next, 'new/file.txt', 'new\n', 0o600, Date.UTC(2024, 5, 2));
    fs.rmSync(path.join(next, 'dup/two.txt'));
    fs.utimesSync(path.join(next, 'dup'), new Date(Date.UTC(2024, 5, 3)), new Date(Date.UTC(2024, 5, 3)));
    const bigIno = fs.statSync(path.join(target, 'sizes/big.bin')).ino;

    await expect(client.stageBegin({ stagingId, target })).rejects.toMatchObject({ code: 'CONFLICT' });
    expect((await client.stageBegin({ stagingId, target, replace: true })).targetState).toBe('non-empty');
    const wanted = listTree(next).files;
    const reused = await client.stageReuse(stagingId, wanted);
    expect(new Set(reused)).toEqual(new Set(wanted.map((f) => f.path).filter((p) => p !== 'plain.txt' && p !== 'new/file.txt')));
    const stats = await sendTree(client, stagingId, next, { skip: new Set(reused) });
    expect(stats.payloadBytes).toBeLessThan(1024);
    await client.publish({ stagingId, target });
    expect(describeTree(target)).toEqual(describeTree(next));
    expect(fs.statSync(path.join(target, 'sizes/big.bin')).ino).toBe(bigIno);
    expect(fs.readdirSync(path.dirname(target))).toEqual(['ws']);
  });

  it('acknowledges a completed batch sent again without applying it twice, also from a new agent process', async () => {
    const { target, stagingId } = fresh();
    await client.stageBegin({ stagingId, target });
    const bytes = seededBytes(6 * MiB, 'pieces');
    const meta = { path: 'big.bin', size: bytes.length, sha256: sha(bytes), mode: 0o644, mtimeMs: Date.UTC(2024, 1, 1) };
    const first: WriteOp[] = [{ op: 'file', ...meta, at: 0, offset: 0, length: 4 * MiB }];
    const second: WriteOp[] = [{ op: 'file', ...meta, at: 4 * MiB, offset: 0, length: 2 * MiB }];
    const batch1 = { stagingId, batchId: writeBatchId(stagingId, first), ops: first, payload: bytes.subarray(0, 4 * MiB) };
    const batch2 = { stagingId, batchId: writeBatchId(stagingId, second), ops: second, payload: bytes.subarray(4 * MiB) };
    expect(await client.write(batch1)).toEqual({ applied: true, ops: 1 });
    expect(await client.write(batch2)).toEqual({ applied: true, ops: 1 });
    // Applied again, batch 1 would cut the file back to 4 MiB.
    expect(await client.write(batch1)).toEqual({ applied: false, ops: 1 });
    const other = await connectAgent(home);
    expect(await other.client.write(batch1)).toEqual({ applied: false, ops: 1 });
    expect((await other.client.stageBegin({ stagingId, target })).completedBatchIds).toEqual([batch1.batchId, batch2.batchId]);
    await other.client.close();
    expect(sha(fs.readFileSync(path.join(staged(target, stagingId), 'big.bin')))).toBe(meta.sha256);
    await client.publish({ stagingId, target });
    expect(sha(fs.readFileSync(path.join(target, 'big.bin')))).toBe(meta.sha256);
  });

  describe('refuses bad batches and changes nothing', () => {
    let target: string;
    let stagingId: string;
    let stagingDir: string;
    let outside: string;
    let before: ReturnType<typeof describeTree>;

    beforeAll(async () => {
      ({ target, stagingId } = fresh());
      stagingDir = staged(target, stagingId);
      outside = path.join(work, 'outside');
      fs.mkdirSync(outside);
      await client.stageBegin({ stagingId, target });
      const ops: WriteOp[] = [
        { op: 'mkdir', path: 'dir' },
        { op: 'symlink', path: 'inner-link', target: 'dir', mtimeMs: 0 },
      ];
      await client.write({ stagingId, batchId: 'setup', ops, payload: new Uint8Array(0) });
      // What a hostile process in the sandbox could plant: a symlink out of staging.
      fs.symlinkSync(outside, path.join(stagingDir, 'evil'));
    });

    const attempt = async (ops: WriteOp[], payload: Uint8Array = new Uint8Array(0)): Promise<unknown> => {
      before = describeTree(stagingDir);
      const error = await client.write({ stagingId, batchId: `b${Math.random().toString(36).slice(2)}`, ops, payload }).catch((e) => e);
      expect(describeTree(stagingDir)).toEqual(before);
      expect(fs.readdirSync(outside)).toEqual([]);
      return error;
    };
    const ok: WriteOp = { op: 'mkdir', path: 'would-be-made' };
    const file = (p: string, bytes: Buffer, extra: Partial<WriteOp> = {}): WriteOp =>
      ({
        op: 'file',
        path: p,
        size: bytes.length,
        sha256: sha(bytes),
        at: 0,
        offset: 0,
        length: bytes.length,
        mode: 0o644,
        mtimeMs: 0,
        ...extra,
      }) as WriteOp;

    it('a payload over 4 MiB', async () => {
      const big = Buffer.alloc(5 * MiB, 1);
      expect(await attempt([ok, file('five', big)], big)).toMatchObject({ code: 'LIMIT_EXCEEDED' });
    });

    it('more than 256 operations', async () => {
      const ops = Array.from({ length: WRITE_BATCH_MAX_OPS + 44 }, (_, i): WriteOp => ({ op: 'mkdir', path: `d${i}` }));
      expect(await attempt(ops)).toMatchObject({ code: 'LIMIT_EXCEEDED' });
    });

    it('a path with "..", an absolute path, a reserved name', async () => {
      const x = Buffer.from('x');
      expect(await attempt([ok, file('dir/../../escape', x)], x)).toMatchObject({ code: 'INVALID_PATH' });
      expect(await attempt([ok, file(path.join(outside, 'abs'), x)], x)).toMatchObject({ code: 'INVALID_PATH' });
      expect(await attempt([ok, { op: 'mkdir', path: 'a/.holdfast' }])).toMatchObject({ code: 'INVALID_PATH' });
    });

    it('a symlink pointing outside the workspace', async () => {
      expect(await attempt([ok, { op: 'symlink', path: 'up', target: '../../x', mtimeMs: 0 }])).toMatchObject({ code: 'INVALID_PATH' });
    });

    it('a write through a symlink in staging, whether it points outside or inside', async () => {
      const x = Buffer.from('x');
      expect(await attempt([ok, file('evil/pwned', x)], x)).toMatchObject({ code: 'INVALID_PATH' });
      expect(await attempt([ok, { op: 'mkdir', path: 'evil/sub' }])).toMatchObject({ code: 'INVALID_PATH' });
      expect(await attempt([ok, file('inner-link/through', x)], x)).toMatchObject({ code: 'INVALID_PATH' });
    });

    it('bytes past the payload, a piece before its predecessors, an unknown op', async () => {
      const x = Buffer.from('xyz');
      expect(await attempt([ok, file('f', x)], x.subarray(0, 2))).toMatchObject({ code: 'INVALID_INPUT' });
      expect(await attempt([ok, file('g', x, { at: 5, size: 8 } as Partial<WriteOp>)], x)).toMatchObject({ code: 'INVALID_INPUT' });
      expect(await attempt([ok, { op: 'chown', path: 'x' } as unknown as WriteOp])).toMatchObject({ code: 'INVALID_INPUT' });
    });

    it('content that does not match its hash is INTEGRITY, and the batch is not journaled', async () => {
      const x = Buffer.from('abc');
      const id = 'bad-hash';
      const error = await client
        .write({ stagingId, batchId: id, ops: [file('h', x, { sha256: sha(Buffer.from('abd')) } as Partial<WriteOp>)], payload: x })
        .catch((e) => e);
      expect(error).toMatchObject({ code: 'INTEGRITY' });
      expect((await client.stageBegin({ stagingId, target })).completedBatchIds).not.toContain(id);
    });

    it('writes to a staging id nobody began', async () => {
      await expect(client.write({ stagingId: 'never', batchId: 'b', ops: [ok], payload: new Uint8Array(0) })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
    });

    it('an oversized frame ends the session with LIMIT_EXCEEDED; a malformed header is answered and skipped', async () => {
      const channel = startAgent(home);
      const decoder = new FrameDecoder();
      const answers: Array<Record<string, unknown>> = [];
      channel.stdout.on('data', (c: Buffer) => {
        for (const d of decoder.push(c)) if (d.kind === 'frame') answers.push(d.frame.header);
      });
      before = describeTree(stagingDir);
      for (const b of encodeFrame({ id: 1, op: 'hello', version: PROTOCOL_VERSION })) channel.stdin.write(b);
      const junk = Buffer.from('{not json');
      const prefix = Buffer.alloc(8);
      prefix.writeUInt32BE(junk.length, 0);
      prefix.writeUInt32BE(junk.length, 4);
      channel.stdin.write(Buffer.concat([prefix, junk]));
      for (const b of encodeFrame({ id: 2, op: 'probe' })) channel.stdin.write(b);
      const huge = Buffer.alloc(8);
      huge.writeUInt32BE(MAX_FRAME_BYTES + 1, 0);
      huge.writeUInt32BE(100, 4);
      channel.stdin.write(huge);
      channel.stdin.write(Buffer.concat(encodeFrame({ id: 3, op: 'stage-abort', stagingId })));
      expect(await channel.exit).toEqual({ code: 2, signal: null });
      // Frame errors are answered as soon as they are decoded, requests in turn: compare without order.
      const summary = answers.map((a) => [a.id, (a.error as { code?: string } | undefined)?.code ?? 'ok']);
      expect(summary).toHaveLength(4);
      expect(summary).toEqual(
        expect.arrayContaining([
          [1, 'ok'],
          [null, 'INVALID_INPUT'],
          [2, 'ok'],
          [null, 'LIMIT_EXCEEDED'],
        ]),
      );
      expect(describeTree(stagingDir)).toEqual(before);
    });

    it('aborting removes the staging directory; publishing it afterwards is NOT_FOUND', async () => {
      expect(await client.abort(stagingId)).toBe(true);
      expect(fs.existsSync(stagingDir)).toBe(false);
      await expect(client.publish({ stagingId, target })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect(await client.abort(stagingId)).toBe(false);
    });
  });

  it('answers a bad request with an error frame and keeps serving', async () => {
    const channel = startAgent(home);
    const conn = new AgentConnection(channel, 30_000, 4);
    await conn.call('hello', { version: PROTOCOL_VERSION });
    await expect(conn.call('scan', { root: 'relative', limits: {} })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(conn.call('write', { stagingId: '../x', batchId: 'b', ops: [] })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(conn.call('publish' as never, {})).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(conn.call('hello' as never, { version: 'one' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(conn.call('nonsense' as never, {})).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect((await conn.call('probe', {})).result).toMatchObject({ node: process.version });
    expect(await conn.close()).toEqual({ code: 0, signal: null });
  });
});
