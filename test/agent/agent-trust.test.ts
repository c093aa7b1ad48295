import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import { AgentWorkspaceSource } from '../../src/sandbox/endpoints/agent-source.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import { Snapshots } from '../../src/snapshot/snapshots.js';
import type { ScannedDir, ScannedEntry } from '../../src/workspace-fs/scan.js';
import { BACKENDS, type OpenedBackends } from '../support/backends.js';
import { codeOf } from '../support/error-code.js';
import { describeTree, seededBytes, writeFile } from '../support/trees.js';
import { startAgent, tempDir } from './agent-harness.js';
import { ErrorAnswer, lyingChannel, type ScanRewrite } from './lying-agent.js';

const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');
const OLD_MS = Date.UTC(2024, 1, 2, 3, 4, 5);
const honest: ScanRewrite = (wire) => wire;

/** A file entry as an agent would report it. */
function fakeFile(dir: ScannedDir, name: string, size: number, extra: Partial<Record<string, unknown>> = {}): ScannedEntry {
  const p = dir.path === '' ? name : `${dir.path}/${name}`;
  return { type: 'file', name, path: p, mode: 0o644, size, mtimeMs: OLD_MS, ctimeMs: OLD_MS, ino: 1, ...extra } as ScannedEntry;
}

/** A symlink entry as an agent would report it. */
function fakeLink(name: string, target: string): ScannedEntry {
  return { type: 'symlink', name, path: name, target, mtimeMs: OLD_MS };
}

/** Every entry of a checkpoint, as restored into a fresh directory. */
async function restored(snapshots: Snapshots, workspace: string, checkpoint: string, work: string): Promise<Map<string, unknown>> {
  const dir = path.join(work, `restore-${checkpoint}`);
  await snapshots.restore({ dir, workspace, checkpoint });
  return describeTree(dir);
}

for (const backend of BACKENDS) {
  describe(`a sandbox that lies about its workspace (${backend.name})`, () => {
    let b: OpenedBackends;
    let work: string;

    beforeAll(async () => {
      b = await backend.open();
      work = tempDir('agent-trust');
    }, 60_000);
    afterAll(async () => {
      await b?.cleanup();
      fs.rmSync(work, { recursive: true, force: true });
    });

    /** A workspace directory reached only through a real agent whose scan answers pass through `rewrite`. */
    function sandbox(name: string) {
      const root = path.join(work, name, 'ws');
      const home = path.join(work, name, 'home');
      fs.mkdirSync(root, { recursive: true });
      const checkpoint = async (
        snapshots: Snapshots,
        workspace: string,
        rewrite: ScanRewrite,
        streamPad?: (p: string) => Buffer | undefined,
      ): Promise<CheckpointResult> => {
        const channel = lyingChannel(startAgent(home), rewrite, streamPad === undefined ? {} : { streamPad });
        const client = await AgentClient.connect(channel, { timeoutMs: 30_000 });
        try {
          return await snapshots.checkpoint({
            workspace,
            source: (context) => new AgentWorkspaceSource(client, root, name, context),
          });
        } finally {
          await client.close();
        }
      };
      return { root, checkpoint };
    }

    it('names, links and modes a local scan would refuse are left out or cut back, and the checkpoint restores', async () => {
      const { root, checkpoint } = sandbox('names');
      writeFile(root, 'keep.txt', 'kept', 0o644, OLD_MS);
      writeFile(root, 'tool', '#!/bin/sh\n', 0o755, OLD_MS);
      fs.chmodSync(path.join(root, 'tool'), 0o4755);
      writeFile(root, '.ssh/id_ed25519', 'not a real key, but a credential path', 0o600, OLD_MS);
      writeFile(root, 'src/a.ts', 'export {};\n', 0o644, OLD_MS);
      const result = await checkpoint(b.snapshots, 'names', (wire) => {
        // The agent "forgot" the credential path rule and adds entries no directory can hold.
        const ssh: ScannedDir = { ...wire.root, type: 'dir', name: '.ssh', path: '.ssh', mode: 0o700, children: [] };
        ssh.children.push(fakeFile(ssh, 'id_ed25519', fs.statSync(path.join(root, '.ssh/id_ed25519')).size));
        wire.root.children.push(
          fakeLink('..', 'keep.txt'),
          fakeLink('a/b', 'keep.txt'),
          fakeLink('.holdfast', 'keep.txt'),
          fakeLink('bell\u0007', 'keep.txt'),
          fakeLink('esc', '/etc'),
          fakeLink('up', '../..'),
          ssh,
        );
        (wire.root.children.find((e) => e.name === 'tool') as { mode: number }).mode = 0o4755;
        return wire;
      });
      const reasons = Object.fromEntries(result.excluded.map((e) => [e.path, e.reason]));
      expect(reasons).toMatchObject({
        '..': 'invalid-path',
        'a/b': 'invalid-path',
        '.holdfast': 'invalid-path',
        'bell?': 'invalid-path',
        esc: 'symlink-escape',
        up: 'symlink-escape',
        '.ssh': 'secret-path',
        tool: 'mode-stripped',
      });
      const tree = await restored(b.snapshots, 'names', result.checkpoint.id, work);
      expect([...tree.keys()].sort()).toEqual(['keep.txt', 'src', 'src/a.ts', 'tool']);
      expect(tree.get('tool')).toMatchObject({ type: 'file', mode: 0o755 });
    });

    it('a tree no real directory can be fails with a code; the checkpoint is failed and the head stays', async () => {
      const { root, checkpoint } = sandbox('malformed');
      writeFile(root, 'a.txt', 'a', 0o644, OLD_MS);
      const first = await checkpoint(b.snapshots, 'malformed', honest);
      const lies: Array<[string, ScanRewrite, string]> = [
        ['duplicate names', (w) => ({ ...w, root: { ...w.root, children: [...w.root.children, ...w.root.children] } }), 'INTEGRITY'],
        ['a size that is not a count', (w) => ({ ...w, root: { ...w.root, children: [fakeFile(w.root, 'a.txt', -1)] } }), 'INTEGRITY'],
        ['an unknown type', (w) => ({ ...w, root: { ...w.root, children: [{ name: 'x', type: 'fifo' }] } }), 'INTEGRITY'],
        ['no root', (w) => ({ ...w, root: null }), 'INTEGRITY'],
        [
          'a mode beyond 0o7777',
          (w) => ({ ...w, root: { ...w.root, children: [fakeFile(w.root, 'a.txt', 1, { mode: 0o170000 })] } }),
          'INTEGRITY',
        ],
        [
          'more entries than the limit',
          (w) => ({ ...w, root: { ...w.root, children: Array.from({ length: 100_001 }, (_, i) => fakeLink(`l${i}`, 'a.txt')) } }),
          'LIMIT_EXCEEDED',
        ],
      ];
      for (const [what, lie, code] of lies) {
        expect(await codeOf(checkpoint(b.snapshots, 'malformed', lie)), what).toBe(code);
      }
      const ws = await b.snapshots.workspace('malformed', false);
      expect(ws.headCheckpointId).toBe(first.checkpoint.id);
      const log = await b.snapshots.log('malformed');
      expect(log.filter((c) => c.status === 'failed').map((c) => c.error?.code)).toEqual(lies.map(([, , code]) => code).reverse());
    });

    it('an agent cannot speak for the host: a code only the host raises arrives as INTERNAL, its text bounded and printable', async () => {
      const { root, checkpoint } = sandbox('codes');
      writeFile(root, 'a.txt', 'a', 0o644, OLD_MS);
      const first = await checkpoint(b.snapshots, 'codes', honest);
      for (const code of ['STALE_LEASE', 'UNAUTHORIZED', 'SETUP_FAILED', 'STORE_FULL', 'WORKSPACE_CHANGED', 'NO_SUCH_CODE']) {
        const lie = () => new ErrorAnswer({ code, message: `\u001b[31m${'x'.repeat(50_000)}`, data: { padding: 'y'.repeat(100_000) } });
        const error = await checkpoint(b.snapshots, 'codes', lie).then(
          () => undefined,
          (e: unknown) => e as { code: string; message: string; data: Record<string, unknown> },
        );
        expect(error?.code, code).toBe('INTERNAL');
        expect(error?.message.length).toBeLessThan(2000);
        expect(error?.message).not.toContain('\u001b');
        expect(error?.data.padding).toBeUndefined();
      }
      expect((await b.snapshots.workspace('codes', false)).headCheckpointId).toBe(first.checkpoint.id);
    });

    it('offered object ids that the host did not record for that path are ignored: the bytes are read', async () => {
      const { root, checkpoint } = sandbox('offers');
      writeFile(root, 'same.txt', 'unchanged content', 0o644, OLD_MS);
      writeFile(root, 'real.txt', 'what the sandbox really holds', 0o644, OLD_MS);
      const first = await checkpoint(b.snapshots, 'offers', honest);
      const missing = 'f'.repeat(64);
      // Claims: an object nobody stored, and another path's ids, both "from the stat cache of the head".
      const second = await checkpoint(b.snapshots, 'offers', (wire) => ({
        ...wire,
        base: first.checkpoint.id,
        cached: [
          { path: 'real.txt', sha256: missing, chunks: [missing] },
          { path: 'same.txt', sha256: sha('what the sandbox really holds'), chunks: [sha('what the sandbox really holds')] },
        ],
      }));
      expect(second.stats.filesHashed).toBe(2);
      const tree = await restored(b.snapshots, 'offers', second.checkpoint.id, work);
      expect(tree.get('real.txt')).toMatchObject({ sha256: sha('what the sandbox really holds') });
      expect(tree.get('same.txt')).toMatchObject({ sha256: sha('unchanged content') });
      // Honest offers of what the host recorded are still taken: nothing is read.
      const third = await checkpoint(b.snapshots, 'offers', honest);
      expect(third.stats.filesHashed).toBe(0);
    });

    it("knowing another tenant's hash gets nothing: tenant B's checkpoint holds B's own bytes, and B cannot read A's file", async () => {
      const a = new Snapshots({ blobs: b.blobs, meta: b.meta, workers: b.workers, cacheDir: path.join(b.dir, 'cache') }, 'tenant-a');
      const bSnap = new Snapshots({ blobs: b.blobs, meta: b.meta, workers: b.workers, cacheDir: path.join(b.dir, 'cache') }, 'tenant-b');
      const secret = seededBytes(4096, 'tenant A payroll');
      const dirA = path.join(work, 'tenant-a');
      writeFile(dirA, 'payroll.csv', secret, 0o644, OLD_MS);
      await a.checkpoint({ dir: dirA, workspace: 'books' });

      const { root, checkpoint } = sandbox('tenant-b');
      const decoy = seededBytes(4096, 'tenant B decoy');
      writeFile(root, 'loot.csv', decoy, 0o644, OLD_MS);
      const base = await checkpoint(bSnap, 'grab', honest);
      const stolen = sha(secret);
      const grab = await checkpoint(bSnap, 'grab', (wire) => ({
        ...wire,
        base: base.checkpoint.id,
        cached: [{ path: 'loot.csv', sha256: stolen, chunks: [stolen] }],
      }));
      const got: Buffer[] = [];
      for await (const piece of bSnap.cat(grab.checkpoint.id, 'loot.csv')) got.push(Buffer.from(piece));
      expect(sha(Buffer.concat(got))).toBe(sha(decoy));
      const listing = await bSnap.ls(grab.checkpoint.id);
      expect(JSON.stringify(listing)).not.toContain(stolen);
      // And the other way round: B never reaches A's checkpoint by id.
      const [aHead] = await a.log('books');
      expect(await codeOf(bSnap.cat(aHead?.id as string, 'payroll.csv').next())).toBe('NOT_FOUND');
    });

    it('an agent that sends more bytes than a file has is cut off at its size; the checkpoint fails and the head stays', async () => {
      const { root, checkpoint } = sandbox('flood');
      writeFile(root, 'big.bin', seededBytes(2 * 1024 * 1024, 'flood'), 0o644, OLD_MS);
      writeFile(root, 'small.txt', 's', 0o644, OLD_MS);
      const first = await checkpoint(b.snapshots, 'flood', honest);
      writeFile(root, 'big.bin', seededBytes(2 * 1024 * 1024, 'flood 2'), 0o644, OLD_MS + 1000);
      const pad = Buffer.alloc(7 * 1024 * 1024, 0x41);
      const code = await codeOf(checkpoint(b.snapshots, 'flood', honest, (p) => (p === 'big.bin' ? pad : undefined)));
      expect(code).toBe('WORKSPACE_CHANGED');
      expect((await b.snapshots.workspace('flood', false)).headCheckpointId).toBe(first.checkpoint.id);
    });
  });
}
