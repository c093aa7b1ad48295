import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExcludeRules } from '../../src/rules/excludes.js';
import type { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import type { AgentExecFn } from '../../src/sandbox/agent/host/agent-connection.js';
import { connectAgent, ensureAgent, locateAgentBundle } from '../../src/sandbox/agent/host/stage-agent.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { LocalSandboxProvider } from '../../src/sandbox/providers/local.js';
import type { SandboxHandle, SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import { listFiles, scanWorkspace } from '../../src/workspace-fs/scan.js';
import { expectBwrapInstalled } from '../support/sandbox-processes.js';
import { describeTree, makeMixedTree } from '../support/trees.js';
import { buildAgentBundle, hostExec, spawnChannel, tempDir } from './agent-harness.js';
import { execOf } from './agent-hosts.js';
import { sendTree } from './tree-sender.js';

const limits = { maxFileBytes: 1024 * 1024 * 1024, maxEntries: 100_000 };
let work: string;

beforeAll(() => {
  buildAgentBundle();
  work = tempDir('agent-sandbox');
});

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

/**
 * An exec whose stdin loses everything after the first {@link CUT_AT} bytes, as a dropped
 * connection would; with `endAtCut` the agent's stdin also ends there (so a boot reading the
 * bundle sees end of input), otherwise only when the writer ends.
 */
const CUT_AT = 1000;
function cuttingExec(endAtCut: boolean): AgentExecFn {
  return (argv) => {
    const channel = spawnChannel(argv);
    const stdin = new PassThrough();
    let sent = 0;
    stdin.on('data', (chunk: Buffer) => {
      if (sent < CUT_AT) channel.stdin.write(chunk.subarray(0, CUT_AT - sent));
      sent += chunk.length;
      if (endAtCut && sent >= CUT_AT) channel.stdin.end();
    });
    stdin.on('end', () => channel.stdin.end());
    return { ...channel, stdin };
  };
}

describe('staging the agent', () => {
  it('uploads once, then finds it by hash; a damaged copy is replaced', async () => {
    const home = path.join(work, 'stage-home');
    const bundle = locateAgentBundle();
    const first = await ensureAgent(hostExec, home);
    expect(first).toMatchObject({ uploaded: true, hash: bundle.hash, node: process.version });
    expect(first.path).toBe(path.join(home, '.holdfast', `agent-${bundle.hash}.mjs`));
    expect(fs.readFileSync(first.path)).toEqual(bundle.bytes);
    expect((await ensureAgent(hostExec, home)).uploaded).toBe(false);
    fs.appendFileSync(first.path, '// tampered');
    expect((await ensureAgent(hostExec, home)).uploaded).toBe(true);
    expect(fs.readFileSync(first.path)).toEqual(bundle.bytes);
    const { staged, client } = await connectAgent(hostExec, home);
    expect(client.agent.agentHash).toBe(staged.hash);
    await client.close();
  });

  it('an upload cut short fails and leaves no file under the final name', async () => {
    const home = path.join(work, 'cut-home');
    await expect(ensureAgent(cuttingExec(false), home)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    const own = path.join(home, '.holdfast');
    expect(fs.existsSync(own) ? fs.readdirSync(own) : []).toEqual([]);
  });

  it('starts the agent in one exec: on a fresh home it uploads through the same stdin, then finds it by hash', async () => {
    const home = path.join(work, 'boot-home');
    const bundle = locateAgentBundle();
    const argvs: string[][] = [];
    const counting: AgentExecFn = (argv, options) => {
      argvs.push([...argv]);
      return hostExec(argv, options);
    };
    const first = await connectAgent(counting, home);
    expect(argvs).toHaveLength(1);
    expect(first.staged).toMatchObject({ uploaded: true, hash: bundle.hash, node: process.version });
    expect(first.client.agent.agentHash).toBe(bundle.hash);
    expect(fs.readFileSync(first.staged.path)).toEqual(bundle.bytes);
    // The agent serves requests on the boot's stdin from the first byte after the bundle.
    expect((await first.client.probe(home)).root).toMatchObject({ exists: true, isDirectory: true });
    await first.client.close();
    const second = await connectAgent(counting, home);
    expect(argvs).toHaveLength(2);
    expect(second.staged.uploaded).toBe(false);
    await second.client.close();
    fs.appendFileSync(first.staged.path, '// tampered');
    const third = await connectAgent(counting, home);
    expect(argvs).toHaveLength(3);
    expect(third.staged.uploaded).toBe(true);
    expect(third.client.agent.agentHash).toBe(bundle.hash);
    expect(fs.readFileSync(first.staged.path)).toEqual(bundle.bytes);
    await third.client.close();
    expect(fs.readdirSync(path.join(home, '.holdfast')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('a boot whose upload is cut short starts no agent and leaves no file under the final name', async () => {
    const home = path.join(work, 'boot-cut-home');
    await expect(connectAgent(cuttingExec(true), home)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    const own = path.join(home, '.holdfast');
    expect(fs.existsSync(own) ? fs.readdirSync(own) : []).toEqual([]);
  });
});

describe.each([
  ['local', (root: string): SandboxProvider => new LocalSandboxProvider({ root }), (h: SandboxHandle) => h.workspaceRoot],
  [
    'bwrap',
    (root: string): SandboxProvider => new BwrapSandboxProvider({ root }),
    (h: SandboxHandle) => path.join((h as SandboxHandle & { hostDiskPath: string }).hostDiskPath, 'workspace'),
  ],
] as const)('through a real %s sandbox, reached only by exec', (name, makeProvider, hostWorkspace) => {
  let provider: SandboxProvider;
  let sandbox: SandboxHandle;
  let client: AgentClient;
  let providerRoot: string | undefined;
  const src = (): string => path.join(work, `src-${name}`);

  beforeAll(async () => {
    if (name === 'bwrap') expectBwrapInstalled();
    providerRoot = fs.realpathSync(tempDir(`provider-${name}`));
    provider = makeProvider(providerRoot);
    sandbox = await provider.create();
    makeMixedTree(src(), 6 * 1024 * 1024);
    ({ client } = await connectAgent(execOf(sandbox), sandbox.agentHome));
  });

  afterAll(async () => {
    await client?.close();
    await provider?.destroy(sandbox.id);
    if (providerRoot !== undefined) fs.rmSync(providerRoot, { recursive: true, force: true });
  });

  it('probes the workspace', async () => {
    expect((await client.probe(sandbox.workspaceRoot)).root).toEqual({ exists: true, isDirectory: true, writable: true });
  });

  it('restores a tree into the workspace, then scans and reads it exactly as the engine would locally', async () => {
    const target = sandbox.workspaceRoot;
    expect((await client.stageBegin({ stagingId: 'first', target })).targetState).toBe('empty');
    await sendTree(client, 'first', src());
    expect(await client.publish({ stagingId: 'first', target })).toMatchObject({ alreadyPublished: false });
    expect(describeTree(hostWorkspace(sandbox))).toEqual(describeTree(src()));

    const local = scanWorkspace(hostWorkspace(sandbox), ExcludeRules.create(), limits);
    const remote = await client.scan({ root: target, limits });
    const { startedAtMs: _a, ...expected } = local;
    const { startedAtMs: _b, ...actual } = remote.scan;
    expect(actual).toEqual(expected);
    for await (const { path: p, bytes } of client.readFiles(target, listFiles(remote.scan.root))) {
      const want = fs.readFileSync(path.join(src(), p));
      expect(
        createHash('sha256')
          .update(bytes as Buffer)
          .digest('hex'),
      ).toBe(createHash('sha256').update(want).digest('hex'));
    }
  });

  it('restores over it again (warm), reusing every file', async () => {
    const target = sandbox.workspaceRoot;
    await client.stageBegin({ stagingId: 'second', target, replace: true });
    const files = listFiles(scanWorkspace(src(), ExcludeRules.create(), limits).root).map((f) => {
      const sha256 = createHash('sha256')
        .update(fs.readFileSync(path.join(src(), f.path)))
        .digest('hex');
      return { path: f.path, size: f.size, mode: f.mode, mtimeMs: Math.floor(f.mtimeMs), sha256, chunks: [sha256] };
    });
    const reused = await client.stageReuse('second', files);
    expect(reused.length).toBe(files.length);
    const stats = await sendTree(client, 'second', src(), { skip: new Set(reused) });
    expect(stats.payloadBytes).toBe(0);
    expect(await client.publish({ stagingId: 'second', target })).toMatchObject({ replaced: true });
    expect(describeTree(hostWorkspace(sandbox))).toEqual(describeTree(src()));
  });
});
