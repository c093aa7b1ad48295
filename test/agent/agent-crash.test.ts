import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isHoldfastError } from '../../src/errors.js';
import type { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import type { WriteSink } from '../../src/sandbox/agent/host/batch-writer.js';
import { expectBwrapInstalled } from '../support/sandbox-processes.js';
import { describeTree, type EntryFacts, seededBytes, settleDirMtimes, writeFile } from '../support/trees.js';
import { buildAgentBundle, tempDir } from './agent-harness.js';
import { type AgentHost, bwrapHost, processHost } from './agent-hosts.js';
import { cloneTree, listTree, sendTree } from './tree-sender.js';

const MiB = 1024 * 1024;
const old = Date.UTC(2024, 2, 3, 4, 5, 6, 789);
let work: string;
let v1: string;
let v2: string;
let oldFacts: ReturnType<typeof describeTree>;
let newFacts: ReturnType<typeof describeTree>;

beforeAll(() => {
  buildAgentBundle();
  work = tempDir('agent-crash');
  v1 = path.join(work, 'v1');
  v2 = path.join(work, 'v2');
  writeFile(v1, 'keep.txt', 'unchanged\n', 0o644, old);
  writeFile(v1, 'edit.txt', 'before\n', 0o644, old + 1);
  writeFile(v1, 'lib/gone.txt', 'removed later\n', 0o644, old + 2);
  // Read-only directories: not even their owner may change them, yet restores replace and remove them.
  writeFile(v1, 'frozen/a.txt', 'old and frozen\n', 0o444, old + 3);
  settleDirMtimes(v1, old + 50);
  fs.chmodSync(path.join(v1, 'frozen'), 0o555);
  cloneTree(v1, v2);
  writeFile(v2, 'edit.txt', 'after\n', 0o600, old + 10);
  fs.rmSync(path.join(v2, 'lib/gone.txt'));
  fs.rmSync(path.join(v2, 'frozen'), { recursive: true });
  writeFile(v2, 'ro/b.txt', 'new and frozen\n', 0o444, old + 13);
  // 9 MiB spans three write batches: its pieces are appended, so a re-applied piece would show.
  writeFile(v2, 'lib/big.bin', seededBytes(9 * MiB, 'crash'), 0o644, old + 11);
  writeFile(v2, 'bin/tool', '#!/bin/sh\n', 0o755, old + 12);
  fs.mkdirSync(path.join(v2, 'empty'));
  fs.symlinkSync('../keep.txt', path.join(v2, 'lib/link'));
  settleDirMtimes(v2, old + 60);
  fs.chmodSync(path.join(v2, 'ro'), 0o555);
  oldFacts = describeTree(v1);
  newFacts = describeTree(v2);
});

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

/** One restore of `tree` into `target`: stage-begin, reuse, batches (skipping those done), publish. */
async function restore(
  client: AgentClient,
  target: string,
  stagingId: string,
  tree: string,
  resend: 'all' | 'remaining',
  sink: WriteSink = client,
) {
  const begun = await client.stageBegin({ stagingId, target, replace: true, cacheKey: 'crash' });
  if (begun.phase === 'staging') {
    const reused = await client.stageReuse(stagingId, listTree(tree).files);
    const completed = resend === 'remaining' ? begun.completedBatchIds : [];
    const stats = await sendTree(sink, stagingId, tree, { skip: new Set(reused), completed });
    // Every batch a killed agent had journaled is skipped (by us, or acknowledged by the agent), never re-applied.
    expect(stats.skipped).toBe(begun.completedBatchIds.length);
  }
  return client.publish({ stagingId, target, base: `ckpt-${path.basename(tree)}` });
}

const same = (a: Map<string, unknown>, b: Map<string, unknown>): boolean => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

/** Without directory modes: a directory being moved is opened (owner write) until it is in place. */
const contentOf = (facts: Map<string, EntryFacts>): Map<string, EntryFacts> =>
  new Map([...facts].map(([p, f]) => [p, f.type === 'dir' ? { ...f, mode: 0 } : f]));

/** Entries of two directories taken together, as if the moved ones had never left. */
function merged(dir: string, other: string): Map<string, EntryFacts> {
  return contentOf(new Map([...describeTree(dir, ['.holdfast']), ...(fs.existsSync(other) ? describeTree(other) : [])]));
}

/**
 * What the target is after a kill: the old tree, the new one, or a publish caught between its
 * renames, where nothing is lost: the old tree is whole once the entries set aside are counted
 * (`aside`), or the new one once those still in staging are (`moving-in`, inside layout only).
 */
function stateAfterKill(target: string, stagingId: string): 'old' | 'new' | 'aside' | 'moving-in' {
  const own = path.join(target, '.holdfast');
  const aside = fs.existsSync(own) ? path.join(own, `old-${stagingId}`) : path.join(path.dirname(target), `.ws.holdfast-old-${stagingId}`);
  if (!fs.existsSync(target)) {
    expect(describeTree(aside)).toEqual(oldFacts);
    return 'aside';
  }
  const facts = describeTree(target, ['.holdfast']);
  if (same(facts, oldFacts)) return 'old';
  if (same(facts, newFacts)) return 'new';
  if (same(merged(target, aside), contentOf(oldFacts))) return 'aside';
  expect(merged(target, path.join(own, `staging-${stagingId}`))).toEqual(contentOf(newFacts));
  return 'moving-in';
}

describe.each([
  ['a child process, staging beside the target', processHost, ['aside', 'new', 'old']],
  ['a bubblewrap sandbox, staging inside the mounted workspace', bwrapHost, ['aside', 'moving-in', 'old']],
] as const)('an agent killed (SIGKILL) in the middle of a restore, in %s', (_name, makeHost, phases) => {
  let host: AgentHost;
  beforeAll(async () => {
    expectBwrapInstalled();
    host = await makeHost();
  });
  afterAll(() => host?.close());

  /** Puts v1 at the target through a well-behaved agent. */
  async function reset(n: number): Promise<string> {
    const target = host.target(n);
    const agent = await host.connect();
    await restore(agent.client, target, `reset-${n}`, v1, 'all');
    await agent.client.close();
    expect(describeTree(host.hostPath(target), ['.holdfast'])).toEqual(oldFacts);
    return target;
  }

  it('at every write and publish step: a new agent re-sending the batches converges, nothing applied twice', async () => {
    const seen = new Set<string>();
    let killedAt = 0;
    for (let step = 1; step < 500; step += 1) {
      const target = await reset(step);
      const hostTarget = host.hostPath(target);
      const stagingId = `crash-${step}`;
      const a = await host.connect({ HOLDFAST_AGENT_KILL_AT: String(step) });
      const outcome = await restore(a.client, target, stagingId, v2, 'remaining').then(
        () => 'completed' as const,
        (error: unknown) => error,
      );
      if (outcome === 'completed') {
        await a.client.close();
        expect(describeTree(hostTarget)).toEqual(newFacts);
        break;
      }
      expect(isHoldfastError(outcome, 'STORE_UNAVAILABLE')).toBe(true);
      await a.channel.exit;
      killedAt = step;
      seen.add(stateAfterKill(hostTarget, stagingId));

      const b = await host.connect();
      const published = await restore(b.client, target, stagingId, v2, step % 2 === 0 ? 'remaining' : 'all');
      // The stat cache is written even when the publish was finished by another process.
      const scan = await b.client.scan({
        root: target,
        limits: { maxFileBytes: 1e9, maxEntries: 1e5 },
        cacheKey: 'crash',
        base: 'ckpt-v2',
      });
      expect(scan.cached.size).toBe(listTree(v2).files.length);
      await b.client.close();
      expect(published.target).toBe(target);
      expect(describeTree(hostTarget)).toEqual(newFacts);
      expect(fs.readdirSync(path.dirname(hostTarget)).filter((name) => name.includes('holdfast'))).toEqual([]);
    }
    // Kills landed in every phase: while staging (target still old), during publish, after it.
    expect(killedAt).toBeGreaterThan(15);
    expect([...seen].sort()).toEqual(phases);
  });

  it('killed from outside while batches are in flight: resending everything converges', async () => {
    const target = await reset(1000);
    const a = await host.connect();
    let answered = 0;
    const killing: WriteSink = {
      write: async (batch) => {
        const result = await a.client.write(batch);
        answered += 1;
        if (answered === 1) a.channel.kill();
        return result;
      },
    };
    const error = await restore(a.client, target, 'outside', v2, 'remaining', killing).catch((e: unknown) => e);
    expect(isHoldfastError(error, 'STORE_UNAVAILABLE')).toBe(true);
    expect(describeTree(host.hostPath(target), ['.holdfast'])).toEqual(oldFacts);
    const b = await host.connect();
    await restore(b.client, target, 'outside', v2, 'all');
    await b.client.close();
    expect(describeTree(host.hostPath(target))).toEqual(newFacts);
  });
});
