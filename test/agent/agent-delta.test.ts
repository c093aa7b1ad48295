import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentClient, AgentScan } from '../../src/sandbox/agent/host/agent-client.js';
import { connectAgent } from '../../src/sandbox/agent/host/stage-agent.js';
import { AgentWorkspaceSource } from '../../src/sandbox/endpoints/agent-source.js';
import { type BwrapSandboxHandle, BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../../src/sandbox/providers/docker.js';
import type { SandboxHandle } from '../../src/sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../../src/snapshot/checkpoint/checkpoint.js';
import { BACKENDS, type OpenedBackends } from '../support/backends.js';
import { expectDockerInstalled, nodeImage } from '../support/docker-images.js';
import { expectBwrapInstalled } from '../support/sandbox-processes.js';
import { rng } from '../support/secret-samples.js';
import { SeededMutator as Mutator, OLD_S } from '../support/seeded-mutator.js';
import { describeTree } from '../support/trees.js';
import { buildAgentBundle, tempDir } from './agent-harness.js';
import { execOf } from './agent-hosts.js';

const STEPS = 36;

/** Checkpoints `root` (a directory inside `handle`'s sandbox) into `workspace` through `client`. */
function checkpointVia(
  b: OpenedBackends,
  client: AgentClient,
  handle: SandboxHandle,
  root: string,
  workspace: string,
  onScan?: () => void,
): Promise<CheckpointResult> {
  return b.snapshots.checkpoint({
    workspace,
    source: (context) => new AgentWorkspaceSource(client, root, handle.id, context),
    ...(onScan === undefined ? {} : { onScan }),
  });
}

/**
 * The tree a checkpoint should be, taken the slow way: a new agent process and a workspace
 * never checkpointed before (no held scan, no stat cache, every file read).
 */
async function fullRoot(b: OpenedBackends, handle: SandboxHandle, root: string, n: string): Promise<string | null> {
  const { client } = await connectAgent(execOf(handle), handle.agentHome);
  try {
    return (await checkpointVia(b, client, handle, root, `reference-${n}`)).checkpoint.rootTree;
  } finally {
    await client.close();
  }
}

/** Records every scan `client` makes (what the host made of the agent's answer). */
function watchScans(client: AgentClient): AgentScan[] {
  const seen: AgentScan[] = [];
  const scan = client.scan.bind(client);
  client.scan = async (...args) => {
    const got = await scan(...args);
    seen.push(got);
    return got;
  };
  return seen;
}

/** Hard-link groups of a directory: the paths of each inode with more than one link, sorted. */
function linkGroups(root: string): string[][] {
  const groups = new Map<number, string[]>();
  const walk = (abs: string, rel: string): void => {
    for (const name of fs.readdirSync(abs).sort()) {
      const p = rel === '' ? name : `${rel}/${name}`;
      const st = fs.lstatSync(path.join(abs, name));
      if (st.isDirectory()) walk(path.join(abs, name), p);
      else if (st.isFile() && st.nlink > 1) groups.set(st.ino, [...(groups.get(st.ino) ?? []), p]);
    }
  };
  walk(root, '');
  return [...groups.values()].map((g) => g.sort()).sort((a, b) => (a[0] as string).localeCompare(b[0] as string));
}

describe('checkpoints through the agent follow what changed (bwrap)', () => {
  let b: OpenedBackends;
  let provider: BwrapSandboxProvider;
  let sandbox: BwrapSandboxHandle;
  let client: AgentClient;
  let work: string;

  beforeAll(async () => {
    expectBwrapInstalled();
    buildAgentBundle();
    work = tempDir('agent-delta');
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    provider = new BwrapSandboxProvider({ root: path.join(work, 'sandboxes') });
    sandbox = (await provider.create()) as BwrapSandboxHandle;
    ({ client } = await connectAgent(execOf(sandbox), sandbox.agentHome));
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    if (sandbox !== undefined) await provider.destroy(sandbox.id);
    await b?.cleanup();
    fs.rmSync(work, { recursive: true, force: true });
  });

  /** A workspace directory of the sandbox: its path inside, and as this host sees it. */
  const workspaceDir = (name: string): { inside: string; host: string } => {
    const host = path.join(sandbox.hostDiskPath, 'workspace', name);
    fs.mkdirSync(host, { recursive: true });
    return { inside: path.posix.join(sandbox.workspaceRoot, name), host };
  };

  it('one changed file of many: the scan is a delta, it alone is read, every other directory is taken over', async () => {
    const { inside, host } = workspaceDir('quiet');
    for (let d = 0; d < 8; d += 1) {
      fs.mkdirSync(path.join(host, `d${d}`));
      for (let f = 0; f < 20; f += 1) {
        const p = path.join(host, `d${d}`, `f${f}`);
        fs.writeFileSync(p, `content ${d}/${f}\n`);
        fs.utimesSync(p, OLD_S, OLD_S);
      }
    }
    const scans = watchScans(client);
    const first = await checkpointVia(b, client, sandbox, inside, 'quiet');
    expect(first.stats.filesHashed).toBe(160);
    expect(scans.at(-1)?.delta).toBe(false);

    const same = await checkpointVia(b, client, sandbox, inside, 'quiet');
    expect(same.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    expect(same.stats.filesHashed).toBe(0);
    expect(scans.at(-1)?.delta).toBe(true);
    expect(scans.at(-1)?.adopted.map((d) => d.path)).toEqual(['']);

    fs.appendFileSync(path.join(host, 'd3', 'f7'), 'one more line\n');
    fs.utimesSync(path.join(host, 'd3', 'f7'), OLD_S + 10, OLD_S + 10);
    const changed = await checkpointVia(b, client, sandbox, inside, 'quiet');
    expect(changed.stats.filesHashed).toBe(1);
    expect(changed.stats.files).toBe(160);
    expect(scans.at(-1)?.delta).toBe(true);
    expect(
      scans
        .at(-1)
        ?.adopted.map((d) => d.path)
        .sort(),
    ).toEqual(['d0', 'd1', 'd2', 'd4', 'd5', 'd6', 'd7']);
    // One data object and the two trees on its path; every other tree kept its id.
    expect(changed.stats.objectsWritten).toBe(3);
    expect(changed.checkpoint.rootTree).toBe(await fullRoot(b, sandbox, inside, 'quiet'));

    // Another agent process holds no scan: the full path, and the same tree.
    const { client: other } = await connectAgent(execOf(sandbox), sandbox.agentHome);
    try {
      const otherScans = watchScans(other);
      const again = await checkpointVia(b, other, sandbox, inside, 'quiet');
      expect(otherScans.at(-1)?.delta).toBe(false);
      expect(again.checkpoint.rootTree).toBe(changed.checkpoint.rootTree);
      // The agent's own cache, updated with only the file read last time, still vouches for every file.
      expect(again.stats.filesHashed).toBe(0);
    } finally {
      await other.close();
    }
  }, 60_000);

  /**
   * The agent's watches under each way they can fail: as they are (only changed directories
   * read), a queue so small that most turns count as an overflow, and a watch limit of three
   * directories (watching off). The reasons each run's scans give show the path it took.
   */
  const WATCH_CASES = [
    { name: 'watched', env: {}, expects: ['delta'] },
    { name: 'a tiny queue (overflow)', env: { HOLDFAST_AGENT_WATCH_QUEUE: '8' }, expects: ['delta', 'overflow'] },
    { name: 'a watch limit', env: { HOLDFAST_AGENT_WATCH_MAX_DIRS: '3' }, expects: ['watch-limit', 'off'] },
    { name: 'frequent verifying scans', env: { HOLDFAST_AGENT_WATCH_VERIFY_EVERY: '4' }, expects: ['delta', 'verify'] },
  ] as const;

  it.each(WATCH_CASES)(
    'a seeded run of renames, hard links, same-size rewrites, deletes and new directories, $name: every checkpoint is the tree it claims',
    async ({ name, env, expects }) => {
      const { client: watched } = await connectAgent(execOf(sandbox, env), sandbox.agentHome);
      try {
        const reasons = await seededRun(watched, `random-${name.replace(/\W+/g, '-')}`, 0x5eed + name.length);
        for (const reason of expects) expect(reasons, name).toContain(reason);
        // A verifying scan finds nothing the watches missed: every change of this run raises an event.
        expect(reasons, name).not.toContain('missed');
      } finally {
        await watched.close();
      }
    },
    300_000,
  );

  /**
   * STEPS seeded changes of a new workspace (every fourth racing the checkpoint), each
   * checkpoint compared with a restore of it (bytes, modes, links) and with the tree a new agent
   * reads in full; returns how each scan was made (`delta`, a full scan's reason, `missed`).
   */
  async function seededRun(agent: AgentClient, name: string, seed: number): Promise<string[]> {
    const { inside, host } = workspaceDir(name);
    const mutator = new Mutator(host, seed);
    mutator.seed();
    const scans = watchScans(agent);
    const reasons = (): string[] =>
      scans.map((s) =>
        s.watch === undefined
          ? 'unwatched'
          : (s.watch.missed ?? 0) > 0
            ? 'missed'
            : s.watch.mode === 'delta'
              ? 'delta'
              : (s.watch.reason ?? 'full'),
      );
    const client = agent;
    let previous = await checkpointVia(b, client, sandbox, inside, name);
    for (let i = 0; i < STEPS; i += 1) {
      let what = mutator.step();
      // Every fourth step also changes the tree while the checkpoint runs, right after its first
      // scan: that checkpoint may hold the tree as scanned, and the next one must see the change.
      let racing = i % 4 === 3;
      let result = await checkpointVia(b, client, sandbox, inside, name, () => {
        if (!racing) return;
        racing = false;
        what += ` + racing: ${mutator.step()}`;
      });
      expect(scans.at(-1)?.delta, what).toBe(true);
      expect(result.checkpoint.parentId, what).toBe(previous.checkpoint.id);
      if (i % 4 === 3) {
        previous = result;
        result = await checkpointVia(b, client, sandbox, inside, name);
        expect(result.checkpoint.parentId, what).toBe(previous.checkpoint.id);
      }
      const restored = path.join(work, `restore-${name}-${i}`);
      await b.snapshots.restore({ dir: restored, workspace: name, checkpoint: result.checkpoint.id });
      // What the checkpoint left out on purpose (a link that escapes once its directory moved) is not in the restore.
      const expected = describeTree(host);
      for (const e of result.excluded) if (e.reason === 'symlink-escape') expected.delete(e.path);
      expect(describeTree(restored), what).toEqual(expected);
      expect(linkGroups(restored), what).toEqual(linkGroups(host));
      expect(result.checkpoint.rootTree, what).toBe(await fullRoot(b, sandbox, inside, `${name}-${i}`));
      fs.rmSync(restored, { recursive: true, force: true });
      previous = result;
    }
    return reasons();
  }
});

/** Seeded shell changes of a container's workspace, one per step (names known from a listing each step). */
class ShellMutator {
  private readonly next: () => number;
  private n = 0;

  constructor(
    private readonly sandbox: SandboxHandle,
    private readonly root: string,
    seed: number,
  ) {
    this.next = rng(seed);
  }

  private async list(type: 'f' | 'd'): Promise<string[]> {
    const got = await this.sandbox.run(['sh', '-c', `cd ${this.root} && find . -mindepth 1 -type ${type} | sort`]);
    return got.stdout
      .toString()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => l.slice(2));
  }

  private pick(list: readonly string[]): string | undefined {
    return list.length === 0 ? undefined : list[this.next() % list.length];
  }

  /** A shell command for one seeded change. */
  async step(): Promise<string> {
    const files = await this.list('f');
    const dirs = await this.list('d');
    const file = this.pick(files);
    this.n += 1;
    const n = this.n;
    const dir = this.next() % 3 === 0 ? '.' : (this.pick(dirs) ?? '.');
    const op = this.next() % 11;
    if (op === 0 || file === undefined) return `head -c ${this.next() % 4000} /dev/urandom > ${dir}/new${n}`;
    if (op === 1) return `echo line ${n} >> ${file}`;
    // Same size, same mtime: only ctime tells.
    if (op === 2)
      return `cp -p ${file} /tmp/ref${n} && printf Z | dd of=${file} bs=1 count=1 conv=notrunc 2>/dev/null && touch -r /tmp/ref${n} ${file}`;
    if (op === 3) return `mv ${file} ${dir}/mv${n}`;
    if (op === 4) {
      const d = this.pick(dirs);
      return d === undefined ? 'true' : `mv ${d} moved${n}`;
    }
    if (op === 5) return `ln ${file} ${dir}/ln${n}`;
    if (op === 6) return `rm ${file}`;
    if (op === 7) {
      const d = this.pick(dirs);
      return d === undefined || this.next() % 3 !== 0 ? 'true' : `rm -r ${d}`;
    }
    if (op === 8) return `mkdir -p ${dir}/dir${n} && echo in > ${dir}/dir${n}/f${n}`;
    if (op === 9) return `chmod ${this.next() % 2 === 0 ? 755 : 600} ${file}`;
    return `ln -s "$(realpath --relative-to=${dir} ${file})" ${dir}/sym${n}`;
  }
}

describe('checkpoints through the agent follow what changed (docker)', () => {
  let b: OpenedBackends;
  let provider: DockerSandboxProvider;
  let sandbox: SandboxHandle;
  let client: AgentClient;

  beforeAll(async () => {
    expectDockerInstalled();
    buildAgentBundle();
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    provider = new DockerSandboxProvider({ image: nodeImage(), scope: `test-delta-${process.pid}-${randomBytes(3).toString('hex')}` });
    sandbox = await provider.create();
    ({ client } = await connectAgent(execOf(sandbox), sandbox.agentHome));
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    if (sandbox !== undefined) await provider.destroy(sandbox.id);
    await b?.cleanup();
  });

  it.each([
    { name: 'watched', env: {}, expects: ['delta'] },
    { name: 'a tiny queue (overflow)', env: { HOLDFAST_AGENT_WATCH_QUEUE: '8' }, expects: ['overflow'] },
  ] as const)(
    'a seeded run of changes made in the container, $name: every checkpoint is the tree a new agent reads in full',
    async ({ name, env, expects }) => {
      const root = path.posix.join(sandbox.workspaceRoot, `seeded-${name.length}`);
      const sh = async (script: string): Promise<void> => {
        const result = await sandbox.run(['sh', '-c', `cd ${root} && ${script}`]);
        expect(result.code, `${script}: ${result.stderr.toString()}`).toBe(0);
      };
      await sandbox.run(['mkdir', '-p', root]);
      await sh('mkdir -p a/b/c d && for i in 1 2 3 4 5; do echo "f $i" > a/f$i; echo "g $i" > a/b/g$i; echo "h $i" > d/h$i; done');
      const { client: watched } = await connectAgent(execOf(sandbox, env), sandbox.agentHome);
      try {
        const scans = watchScans(watched);
        const mutator = new ShellMutator(sandbox, root, 0xd0c + name.length);
        await checkpointVia(b, watched, sandbox, root, `seeded-${name.length}`);
        for (let i = 0; i < 20; i += 1) {
          const step = await mutator.step();
          await sh(step);
          // Every fourth step races the checkpoint: a change made while it runs, seen by this one or the next.
          let racing: Promise<void> | undefined;
          let what = step;
          const result = await checkpointVia(b, watched, sandbox, root, `seeded-${name.length}`, () => {
            if (i % 4 !== 3 || racing !== undefined) return;
            racing = mutator.step().then((s) => {
              what += ` + racing: ${s}`;
              return sh(s);
            });
          });
          await racing;
          const again = racing === undefined ? result : await checkpointVia(b, watched, sandbox, root, `seeded-${name.length}`);
          expect(again.checkpoint.rootTree, what).toBe(await fullRoot(b, sandbox, root, `seeded-${name.length}-${i}`));
        }
        const reasons = scans.map((s) => (s.watch?.mode === 'delta' ? 'delta' : (s.watch?.reason ?? 'unwatched')));
        for (const reason of expects) expect(reasons, name).toContain(reason);
      } finally {
        await watched.close();
      }
    },
    300_000,
  );

  it('each change made in the container is in the next checkpoint, which is the tree a new agent reads in full', async () => {
    const sh = async (script: string): Promise<void> => {
      const result = await sandbox.run(['sh', '-c', `cd ${sandbox.workspaceRoot} && ${script}`]);
      expect(result.code, `${script}: ${result.stderr.toString()}`).toBe(0);
    };
    await sh(
      'mkdir -p a/b c && for i in 1 2 3 4 5 6; do echo "file $i" > a/f$i; echo "deep $i" > a/b/g$i; done && touch -t 202401020304.05 a/* a/b/*',
    );
    const scans = watchScans(client);
    await checkpointVia(b, client, sandbox, sandbox.workspaceRoot, 'docker');
    const steps = [
      'echo more >> a/f1',
      'mv a/f2 c/f2',
      'mv a/b c/moved',
      'ln c/f2 a/hard',
      'rm a/f3',
      'mkdir empty',
      'chmod 755 a/f4',
      'ln -s ../c/f2 a/sym',
      // Same size, same mtime: only ctime tells.
      'cp -p a/f5 /tmp/ref && printf X | dd of=a/f5 bs=1 count=1 conv=notrunc 2>/dev/null && touch -r /tmp/ref a/f5',
      'true',
    ];
    for (const [i, step] of steps.entries()) {
      await sh(step);
      const result = await checkpointVia(b, client, sandbox, sandbox.workspaceRoot, 'docker');
      expect(scans.at(-1)?.delta, step).toBe(true);
      expect(result.checkpoint.rootTree, step).toBe(await fullRoot(b, sandbox, sandbox.workspaceRoot, `docker-${i}`));
    }
  }, 300_000);
});
