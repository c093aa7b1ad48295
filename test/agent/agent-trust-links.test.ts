import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectReader } from '../../src/objects/object-reader.js';
import { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import { writeBatchId } from '../../src/sandbox/agent/host/batch-writer.js';
import type { ScanWire, WriteOp } from '../../src/sandbox/agent/wire/protocol.js';
import { AgentWorkspaceSource } from '../../src/sandbox/endpoints/agent-source.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import { flattenTree } from '../../src/snapshot/tree-walk.js';
import type { ScannedDir, ScannedEntry } from '../../src/workspace-fs/scan.js';
import { BACKENDS, type OpenedBackends } from '../support/backends.js';
import { codeOf } from '../support/error-code.js';
import { writeFile } from '../support/trees.js';
import { connectAgent, startAgent, tempDir } from './agent-harness.js';
import { lyingChannel, type ScanRewrite } from './lying-agent.js';

const OLD_MS = Date.UTC(2024, 1, 2, 3, 4, 5);
const sha = (b: string): string => createHash('sha256').update(b).digest('hex');

/** The entry at `relPath` of a scan answer, to be rewritten in place. */
function entryAt(wire: ScanWire, relPath: string): Record<string, unknown> {
  let dir: ScannedDir = wire.root;
  const parts = relPath.split('/');
  for (const [i, name] of parts.entries()) {
    const e = dir.children.find((c: ScannedEntry) => c.name === name);
    if (e === undefined) throw new Error(`no ${relPath} in the scan`);
    if (i === parts.length - 1) return e as unknown as Record<string, unknown>;
    dir = e as ScannedDir;
  }
  throw new Error('unreachable');
}

/** Claims that every path in `paths` is the inode `dev:ino`. */
const claimOneInode =
  (paths: readonly string[], dev: number, ino: number): ScanRewrite =>
  (wire) => {
    for (const p of paths) Object.assign(entryAt(wire, p), { dev, ino });
    return wire;
  };

/** A sandbox that lies about which of its files are one inode; the host decides from what it reads. */
describe('a sandbox that lies about hard links', () => {
  let b: OpenedBackends;
  let work: string;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    work = tempDir('agent-trust-links');
  }, 60_000);
  afterAll(async () => {
    await b?.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  });

  async function checkpoint(name: string, fill: (root: string) => void, rewrite: ScanRewrite): Promise<CheckpointResult> {
    const root = path.join(work, name, 'ws');
    fs.mkdirSync(root, { recursive: true });
    fill(root);
    const client = await AgentClient.connect(lyingChannel(startAgent(path.join(work, name, 'home')), rewrite), { timeoutMs: 30_000 });
    try {
      return await b.snapshots.checkpoint({
        workspace: name,
        source: (context) => new AgentWorkspaceSource(client, root, name, context),
      });
    } finally {
      await client.close();
    }
  }

  /** Each stored file: its content hash and the leader it links to, if any. */
  async function stored(result: CheckpointResult): Promise<Record<string, { sha256: string; hardlink?: string }>> {
    const flat = await flattenTree(new ObjectReader(b.blobs, b.meta), result.checkpoint.rootTree as string);
    return Object.fromEntries(
      flat.files.map((f) => [f.path, f.hardlink === undefined ? { sha256: f.sha256 } : { sha256: f.sha256, hardlink: f.hardlink }]),
    );
  }

  it('real links are recorded (the check can see a link)', async () => {
    const result = await checkpoint(
      'honest',
      (root) => {
        writeFile(root, 'a', 'shared', 0o644, OLD_MS);
        fs.linkSync(path.join(root, 'a'), path.join(root, 'b'));
      },
      (wire) => wire,
    );
    expect(await stored(result)).toEqual({ a: { sha256: sha('shared') }, b: { sha256: sha('shared'), hardlink: 'a' } });
  });

  it('a claimed group of files with different content is broken into plain files, each with its own bytes', async () => {
    const result = await checkpoint(
      'different',
      (root) => {
        writeFile(root, 'a', 'mine', 0o644, OLD_MS);
        writeFile(root, 'b', 'yours', 0o644, OLD_MS);
      },
      claimOneInode(['a', 'b'], 1, 4242),
    );
    expect(await stored(result)).toEqual({ a: { sha256: sha('mine') }, b: { sha256: sha('yours') } });
  });

  it('equal bytes with another mode are no link either', async () => {
    const result = await checkpoint(
      'modes',
      (root) => {
        writeFile(root, 'a', 'same', 0o644, OLD_MS);
        writeFile(root, 'b', 'same', 0o600, OLD_MS);
      },
      claimOneInode(['a', 'b'], 1, 4343),
    );
    expect(await stored(result)).toEqual({ a: { sha256: sha('same') }, b: { sha256: sha('same') } });
  });

  it('the inode of a file outside the workspace links nothing: only included files can lead', async () => {
    const outside = path.join(work, 'outside-secret');
    fs.writeFileSync(outside, 'outside');
    fs.linkSync(outside, `${outside}-2`);
    const st = fs.statSync(outside);
    const result = await checkpoint(
      'outside',
      (root) => writeFile(root, 'a', 'inside', 0o644, OLD_MS),
      claimOneInode(['a'], st.dev, st.ino),
    );
    expect(await stored(result)).toEqual({ a: { sha256: sha('inside') } });
  });

  it('a directory claimed as a member, and a hardlink field the agent adds, are ignored', async () => {
    const result = await checkpoint(
      'dir-member',
      (root) => {
        writeFile(root, 'a', 'file', 0o644, OLD_MS);
        writeFile(root, 'd/x', 'x', 0o644, OLD_MS);
      },
      (wire) => {
        Object.assign(entryAt(wire, 'd'), { dev: 1, ino: 99, nlink: 2 });
        Object.assign(entryAt(wire, 'a'), { dev: 1, ino: 99, hardlink: 'd' });
        Object.assign(entryAt(wire, 'd/x'), { hardlink: 'a' });
        return wire;
      },
    );
    expect(await stored(result)).toEqual({ a: { sha256: sha('file') }, 'd/x': { sha256: sha('x') } });
  });

  it('a link op the agent is sent must name a leader this staging completed, inside it', async () => {
    const { client } = await connectAgent(path.join(work, 'ops-home'));
    try {
      const target = path.join(work, 'ops', 'ws');
      const stagingId = 'links-1';
      await client.stageBegin({ stagingId, target });
      const send = (ops: WriteOp[], payload = new Uint8Array(0)) =>
        client.write({ stagingId, batchId: writeBatchId(stagingId, ops), ops, payload });
      const entry = { size: 4, sha256: sha('lead'), mode: 0o644, mtimeMs: OLD_MS };
      const link = (p: string, leader: string): WriteOp => ({ op: 'link', path: p, leader, ...entry });
      await send([{ op: 'mkdir', path: 'd' }]);
      expect(await codeOf(send([link('m', 'missing')]))).toBe('INVALID_INPUT');
      expect(await codeOf(send([link('m', 'd')]))).toBe('INVALID_INPUT');
      expect(await codeOf(send([link('m', '../escape')]))).toBe('INVALID_PATH');
      expect(await codeOf(send([link('m', 'm')]))).toBe('INVALID_INPUT');
      // A file still being written (its last piece not sent) is no leader.
      const partial: WriteOp = { op: 'file', path: 'lead', at: 0, offset: 0, length: 2, ...entry, chunks: [] };
      expect(await codeOf(send([partial, link('m', 'lead')], Buffer.from('le')))).toBe('INVALID_INPUT');
      const whole: WriteOp = { op: 'file', path: 'lead', at: 0, offset: 0, length: 4, ...entry, chunks: [sha('lead')] };
      await send([whole, link('m', 'lead')], Buffer.from('lead'));
      await send([link('d/m2', 'lead')]);
      const staging = (await client.stageBegin({ stagingId, target })).staging;
      const ino = fs.statSync(path.join(staging, 'lead')).ino;
      expect([fs.statSync(path.join(staging, 'm')).ino, fs.statSync(path.join(staging, 'd/m2')).ino]).toEqual([ino, ino]);
    } finally {
      await client.close();
    }
  });
});
