import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import type { ScanWire } from '../../src/sandbox/agent/wire/protocol.js';
import { AgentWorkspaceSource } from '../../src/sandbox/endpoints/agent-source.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import type { ScannedEntry } from '../../src/workspace-fs/scan.js';
import { BACKENDS, type OpenedBackends } from '../support/backends.js';
import { codeOf } from '../support/error-code.js';
import { describeTree, seededBytes, writeFile } from '../support/trees.js';
import { startAgent, tempDir } from './agent-harness.js';
import { lyingChannel, type ScanRewrite } from './lying-agent.js';

const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');
const OLD_MS = Date.UTC(2024, 1, 2, 3, 4, 5);
const honest: ScanRewrite = (wire) => wire;
const stub = (name: string): ScannedEntry => ({ type: 'dir', name, same: true }) as unknown as ScannedEntry;

/** The wire with the root's child `name` replaced by a stub (or a stub added when there is none). */
function stubbing(name: string): ScanRewrite {
  return (wire: ScanWire) => {
    if (wire.delta !== true || (wire.root as { same?: boolean }).same === true) return wire;
    const children = wire.root.children.filter((c) => c.name !== name);
    return { ...wire, root: { ...wire.root, children: [...children, stub(name)] } };
  };
}

describe('an agent that lies in its scan delta', () => {
  let b: OpenedBackends;
  let work: string;

  beforeAll(async () => {
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    work = tempDir('agent-delta-trust');
  }, 60_000);
  afterAll(async () => {
    await b?.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /**
   * One long-lived agent connection (as a run's pool keeps) whose scan answers pass through
   * the current `lie`, and the workspace directories it serves.
   */
  async function sandbox(name: string) {
    const home = path.join(work, name, 'home');
    let lie: ScanRewrite = honest;
    const client = await AgentClient.connect(
      lyingChannel(startAgent(home), (wire) => lie(wire)),
      { timeoutMs: 30_000 },
    );
    const rootOf = (ws: string): string => {
      const root = path.join(work, name, ws);
      fs.mkdirSync(root, { recursive: true });
      return root;
    };
    const checkpoint = (workspace: string, rewrite: ScanRewrite = honest): Promise<CheckpointResult> => {
      lie = rewrite;
      return b.snapshots.checkpoint({
        workspace,
        source: (context) => new AgentWorkspaceSource(client, rootOf(workspace), name, context),
      });
    };
    const restored = async (workspace: string, checkpointId: string) => {
      const dir = path.join(work, name, `restore-${checkpointId}`);
      await b.snapshots.restore({ dir, workspace, checkpoint: checkpointId });
      return describeTree(dir);
    };
    return { client, rootOf, checkpoint, restored };
  }

  it('a changed directory claimed unchanged gets the host its own earlier view: none of the new bytes reach the checkpoint', async () => {
    const s = await sandbox('unchanged');
    const root = s.rootOf('ws');
    writeFile(root, 'd/a.txt', 'the old text', 0o644, OLD_MS);
    writeFile(root, 'keep.txt', 'kept', 0o644, OLD_MS);
    try {
      const first = await s.checkpoint('ws');
      const before = await s.restored('ws', first.checkpoint.id);
      writeFile(root, 'd/a.txt', 'NEW bytes never shown', 0o644, OLD_MS + 5000);
      writeFile(root, 'd/b.txt', 'another file never shown', 0o644, OLD_MS);
      writeFile(root, 'keep.txt', 'kept, and changed', 0o644, OLD_MS + 9000);
      const lied = await s.checkpoint('ws', stubbing('d'));
      const after = await s.restored('ws', lied.checkpoint.id);
      // What the agent did show (keep.txt) is read; `d` is exactly the host's earlier view.
      expect(lied.stats.filesHashed).toBe(1);
      for (const p of ['d', 'd/a.txt']) expect(after.get(p)).toEqual(before.get(p));
      expect(after.has('d/b.txt')).toBe(false);
      expect(after.get('keep.txt')).toMatchObject({ sha256: sha('kept, and changed') });
    } finally {
      await s.client.close();
    }
  }, 60_000);

  it('a stub naming a directory the host never saw there is refused (INTEGRITY) and the head stays', async () => {
    const s = await sandbox('ghost');
    const root = s.rootOf('ws');
    writeFile(root, 'a.txt', 'a', 0o644, OLD_MS);
    try {
      const first = await s.checkpoint('ws');
      writeFile(root, 'b.txt', 'b', 0o644, OLD_MS);
      expect(await codeOf(s.checkpoint('ws', stubbing('ghost')))).toBe('INTEGRITY');
      // A stubbed file (only a directory can be one) is refused the same way.
      const fileStub: ScanRewrite = (wire) =>
        wire.delta === true
          ? { ...wire, root: { ...wire.root, children: wire.root.children.map((c) => (c.name === 'a.txt' ? { ...c, same: true } : c)) } }
          : wire;
      expect(await codeOf(s.checkpoint('ws', fileStub))).toBe('INTEGRITY');
      expect((await b.snapshots.workspace('ws', false)).headCheckpointId).toBe(first.checkpoint.id);
      // Honest again: the change is there.
      const next = await s.checkpoint('ws');
      expect((await s.restored('ws', next.checkpoint.id)).has('b.txt')).toBe(true);
    } finally {
      await s.client.close();
    }
  }, 60_000);

  it('stubs in an answer the host asked no delta for are refused (INTEGRITY)', async () => {
    const s = await sandbox('unasked');
    writeFile(s.rootOf('fresh'), 'a.txt', 'a', 0o644, OLD_MS);
    try {
      const rootStub: ScanRewrite = (wire) => ({ ...wire, delta: true, root: { type: 'dir', name: '', same: true } as never });
      expect(await codeOf(s.checkpoint('fresh', rootStub))).toBe('INTEGRITY');
      const childStub: ScanRewrite = (wire) => ({ ...wire, delta: true, root: { ...wire.root, children: [stub('x')] } });
      expect(await codeOf(s.checkpoint('fresh', childStub))).toBe('INTEGRITY');
    } finally {
      await s.client.close();
    }
  }, 60_000);

  it("another workspace's directories and ids get nothing: stubs resolve only against this workspace's own view, offers only against its base", async () => {
    const s = await sandbox('cross');
    const rootA = s.rootOf('ws-a');
    const rootB = s.rootOf('ws-b');
    const secret = seededBytes(3000, 'only workspace A holds this');
    writeFile(rootA, 'only-in-a/loot.bin', secret, 0o644, OLD_MS);
    writeFile(rootA, 'shared/x.bin', secret, 0o644, OLD_MS);
    writeFile(rootB, 'shared/x.bin', seededBytes(3000, 'B of its own'), 0o644, OLD_MS);
    try {
      await s.checkpoint('ws-a');
      await s.checkpoint('ws-b');
      // B changes; its agent stubs a directory only A has, and offers A's ids for B's file of the same size.
      writeFile(rootB, 'shared/new.bin', seededBytes(3000, 'B writes this now'), 0o644, OLD_MS);
      expect(await codeOf(s.checkpoint('ws-b', stubbing('only-in-a')))).toBe('INTEGRITY');
      const offerA: ScanRewrite = (wire) => ({
        ...wire,
        cached: [
          ...wire.cached.filter((c) => !c.path.startsWith('shared/')),
          ...['shared/x.bin', 'shared/new.bin'].map((p) => ({ path: p, sha256: sha(secret), chunks: [sha(secret)] })),
        ],
      });
      const grabbed = await s.checkpoint('ws-b', offerA);
      const tree = await s.restored('ws-b', grabbed.checkpoint.id);
      expect(tree.get('shared/x.bin')).toMatchObject({ sha256: sha(seededBytes(3000, 'B of its own')) });
      expect(tree.get('shared/new.bin')).toMatchObject({ sha256: sha(seededBytes(3000, 'B writes this now')) });
      expect(tree.has('only-in-a')).toBe(false);
      for (const facts of tree.values()) expect(facts).not.toMatchObject({ sha256: sha(secret) });
    } finally {
      await s.client.close();
    }
  }, 60_000);
});
