/**
 * A file rewritten between the scan's stat and the read of its bytes (a torn read), locally and
 * through the bundled agent: the read that sees another size than the scan counts as a change,
 * the checkpoint scans again and saves the new bytes, and one that never settles fails
 * `WORKSPACE_CHANGED` naming the file. The rewrite is injected at a fixed point (before the
 * real source reads, or when the real agent's scan answer passes), so every run tears the same way.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentClient } from '../src/sandbox/agent/host/agent-client.js';
import { AgentWorkspaceSource } from '../src/sandbox/endpoints/agent-source.js';
import type { CheckpointResult } from '../src/snapshot/checkpoint/checkpoint.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import { type EndpointContext, LocalWorkspaceSource, type WorkspaceSource } from '../src/snapshot/workspace-source.js';
import { startAgent, tempDir } from './agent/agent-harness.js';
import { lyingChannel } from './agent/lying-agent.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { writeFile } from './support/trees.js';

/** The store pair does not matter here (the tear happens before anything is stored): the first one. */
const BACKEND = BACKENDS[0] as BackendCase;
const OLD_MS = Date.UTC(2024, 1, 2, 3, 4, 5);

/** How a test rewrites `torn.txt` each time it fires. */
type Tear = (abs: string) => void;
const NEW_BYTES = 'bytes the scan never saw\n';
const grow: Tear = (abs) => fs.writeFileSync(abs, NEW_BYTES);
/** Grows an empty file, empties one with bytes: whatever size the scan saw, the read sees another. */
const toggle: Tear = (abs) => fs.writeFileSync(abs, fs.statSync(abs).size === 0 ? NEW_BYTES : '');

/** A new mtime for torn.txt, so no stat cache vouches for it and the next checkpoint reads it. */
function touch(root: string): void {
  const now = new Date();
  fs.utimesSync(path.join(root, 'torn.txt'), now, now);
}

/** The bytes of `file` in `checkpoint`. */
async function cat(snapshots: Snapshots, checkpoint: string, file: string): Promise<string> {
  const parts: Uint8Array[] = [];
  for await (const piece of snapshots.cat(checkpoint, file)) parts.push(piece);
  return Buffer.concat(parts).toString('utf8');
}

/** The error a checkpoint rejected with (fails the test if it resolved). */
async function rejection(work: Promise<CheckpointResult>): Promise<{ code: string; data: Record<string, unknown> }> {
  const result = await work.then(
    () => undefined,
    (error: { code: string; data: Record<string, unknown> }) => error,
  );
  if (result === undefined) throw new Error('the checkpoint succeeded');
  return result;
}

describe(`torn reads (${BACKEND.name})`, () => {
  let b: OpenedBackends;
  let work: string;

  beforeAll(async () => {
    b = await BACKEND.open();
    work = tempDir('torn-reads');
  }, 60_000);
  afterAll(async () => {
    await b?.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** A workspace with `torn.txt` holding `initial` and a neighbour that never changes. */
  function workspace(name: string, initial: string): string {
    const root = path.join(work, name, 'ws');
    writeFile(root, 'torn.txt', initial, 0o644, OLD_MS);
    writeFile(root, 'steady.txt', 'steady\n', 0o644, OLD_MS);
    return root;
  }

  describe('read locally', () => {
    /** The real local source; before each batch of reads, `tear` rewrites torn.txt `times` times in all. */
    const tearing =
      (root: string, tear: Tear, times: number) =>
      (context: EndpointContext): WorkspaceSource => {
        const local = new LocalWorkspaceSource(root, context.workspace.id, path.join(b.dir, 'cache'), b.workers);
        let left = times;
        return Object.assign(Object.create(local) as LocalWorkspaceSource, {
          digest: (files: Parameters<WorkspaceSource['digest']>[0]) => {
            if (left > 0 && files.some((f) => f.path === 'torn.txt')) {
              left -= 1;
              tear(path.join(root, 'torn.txt'));
            }
            return local.digest(files);
          },
        });
      };

    it('a file that grows from empty between the stat and the read: the checkpoint scans again and saves the new bytes', async () => {
      const root = workspace('local-grow-once', '');
      const result = await b.snapshots.checkpoint({ workspace: 'local-grow-once', source: tearing(root, grow, 1) });
      expect(result.stats.attempts).toBe(2);
      expect(await cat(b.snapshots, result.checkpoint.id, 'torn.txt')).toBe('bytes the scan never saw\n');
      expect(await cat(b.snapshots, result.checkpoint.id, 'steady.txt')).toBe('steady\n');
    });

    it('a file torn on every attempt (grown from empty, or emptied) fails WORKSPACE_CHANGED naming it, and the head stays put', async () => {
      for (const [name, initial] of [
        ['local-grow-always', ''],
        ['local-empty-always', 'some bytes\n'],
      ] as const) {
        const root = workspace(name, initial);
        const first = await b.snapshots.checkpoint({ workspace: name, dir: root });
        touch(root);
        const error = await rejection(b.snapshots.checkpoint({ workspace: name, source: tearing(root, toggle, Number.POSITIVE_INFINITY) }));
        expect(error.code).toBe('WORKSPACE_CHANGED');
        expect(error.data).toMatchObject({ path: 'torn.txt' });
        const ws = (await b.snapshots.workspaces()).find((w) => w.name === name);
        expect(ws?.headCheckpointId).toBe(first.checkpoint.id);
      }
    });
  });

  describe('read through the bundled agent', () => {
    /**
     * Checkpoints `root` through a real agent; when its scan answer passes (the agent has
     * stat'ed every file, none is read yet), `tear` rewrites torn.txt, `times` times in all.
     */
    const checkpointThroughAgent = async (name: string, root: string, tear: Tear, times: number): Promise<CheckpointResult> => {
      let left = times;
      const channel = lyingChannel(startAgent(path.join(work, name, 'home')), (wire) => {
        if (left > 0) {
          left -= 1;
          tear(path.join(root, 'torn.txt'));
        }
        return wire;
      });
      const client = await AgentClient.connect(channel, { timeoutMs: 30_000 });
      try {
        return await b.snapshots.checkpoint({
          workspace: name,
          source: (context) => new AgentWorkspaceSource(client, root, name, context),
        });
      } finally {
        await client.close();
      }
    };

    it('a file that grows from empty between the agent scan and its read: scanned again, the new bytes saved', async () => {
      const root = workspace('agent-grow-once', '');
      const result = await checkpointThroughAgent('agent-grow-once', root, grow, 1);
      expect(result.stats.attempts).toBe(2);
      expect(await cat(b.snapshots, result.checkpoint.id, 'torn.txt')).toBe('bytes the scan never saw\n');
    });

    it('a file torn on every attempt (grown from empty, or emptied) fails WORKSPACE_CHANGED naming it, and the head stays put', async () => {
      for (const [name, initial] of [
        ['agent-grow-always', ''],
        ['agent-empty-always', 'some bytes\n'],
      ] as const) {
        const root = workspace(name, initial);
        const first = await checkpointThroughAgent(name, root, toggle, 0);
        touch(root);
        const error = await rejection(checkpointThroughAgent(name, root, toggle, Number.POSITIVE_INFINITY));
        expect(error.code).toBe('WORKSPACE_CHANGED');
        expect(error.data).toMatchObject({ path: 'torn.txt' });
        const ws = (await b.snapshots.workspaces()).find((w) => w.name === name);
        expect(ws?.headCheckpointId).toBe(first.checkpoint.id);
      }
    });
  });
});
