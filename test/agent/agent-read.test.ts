import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExcludeOptions, ExcludeRules } from '../../src/rules/excludes.js';
import type { AgentClient } from '../../src/sandbox/agent/host/agent-client.js';
import { AgentConnection } from '../../src/sandbox/agent/host/agent-connection.js';
import { encodeFrame, FrameDecoder } from '../../src/sandbox/agent/wire/frame-codec.js';
import { PROTOCOL_VERSION, READ_BATCH_MAX_FILES } from '../../src/sandbox/agent/wire/protocol.js';
import { listFiles, scanWorkspace } from '../../src/workspace-fs/scan.js';
import { makeMixedTree, writeFile } from '../support/trees.js';
import { buildAgentBundle, connectAgent, startAgent, tempDir } from './agent-harness.js';

const BIG_BYTES = 50 * 1024 * 1024;
const limits = { maxFileBytes: 1024 * 1024 * 1024, maxEntries: 100_000 };
const excludes: ExcludeOptions = { exclude: ['*.log'], allowSecretPaths: ['.env.local'] };
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

let work: string;
let root: string;
let home: string;
let client: AgentClient;

beforeAll(async () => {
  buildAgentBundle();
  work = tempDir('agent-read');
  root = path.join(work, 'ws');
  home = path.join(work, 'home');
  makeMixedTree(root, BIG_BYTES);
  const old = Date.UTC(2024, 0, 3);
  writeFile(root, '.env', 'SECRET=1', 0o600, old);
  writeFile(root, '.env.local', 'LOCAL=1', 0o600, old);
  writeFile(root, 'node_modules/x/index.js', 'x', 0o644, old);
  writeFile(root, 'debug.log', 'noise', 0o644, old);
  fs.symlinkSync('/etc/passwd', path.join(root, 'escape'));
  execFileSync('mkfifo', [path.join(root, 'pipe')]);
  ({ client } = await connectAgent(home));
});

afterAll(async () => {
  await client?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

function fileList(): Array<{ path: string; size: number }> {
  return listFiles(scanWorkspace(root, ExcludeRules.create(excludes), limits).root).map((f) => ({ path: f.path, size: f.size }));
}

describe('the bundled agent, read side', () => {
  it('shakes hands and reports the hash of the file it runs', () => {
    const bundle = fs.readFileSync(buildAgentBundle());
    expect(client.agent.version).toBe(PROTOCOL_VERSION);
    expect(client.agent.agentHash).toBe(sha(bundle));
    expect(fs.readFileSync(buildAgentBundle().replace(/\.mjs$/, '.sha256'), 'utf8').trim()).toBe(sha(bundle));
  });

  it('refuses another protocol version, and any request before hello', async () => {
    const channel = startAgent(home);
    const decoder = new FrameDecoder();
    const answers: Array<Record<string, unknown>> = [];
    channel.stdout.on('data', (c: Buffer) => {
      for (const d of decoder.push(c)) if (d.kind === 'frame') answers.push(d.frame.header);
    });
    for (const b of encodeFrame({ id: 1, op: 'hello', version: PROTOCOL_VERSION + 1 })) channel.stdin.write(b);
    for (const b of encodeFrame({ id: 2, op: 'probe' })) channel.stdin.write(b);
    channel.stdin.end();
    expect(await channel.exit).toEqual({ code: 0, signal: null });
    expect(answers).toEqual([
      expect.objectContaining({ id: 1, error: expect.objectContaining({ code: 'INVALID_INPUT' }) }),
      expect.objectContaining({ id: 2, error: expect.objectContaining({ code: 'INVALID_INPUT' }) }),
    ]);
  });

  it('probes the workspace and the sandbox', async () => {
    const probe = await client.probe(root);
    expect(probe.root).toEqual({ exists: true, isDirectory: true, writable: true });
    expect(probe.freeBytes).toBeGreaterThan(0);
    expect(probe.uid).toBe(process.getuid?.());
    expect(probe.stateDir).toBe(path.join(home, '.holdfast'));
    expect((await client.probe(path.join(work, 'nope'))).root).toEqual({ exists: false, isDirectory: false, writable: false });
  });

  it('scans exactly what the engine scans, exclusions and allowances included', async () => {
    const rules = ExcludeRules.create(excludes);
    const local = scanWorkspace(root, rules, limits);
    const remote = await client.scan({ root, excludes, limits });
    const { startedAtMs: _a, ...expected } = local;
    const { startedAtMs: _b, ...actual } = remote.scan;
    expect(actual).toEqual(expected);
    expect(remote.allowances).toEqual(rules.allowances);
    expect(remote.scan.excluded.map((e) => e.reason).sort()).toEqual([
      'cache',
      'secret-path',
      'special-file',
      'symlink-escape',
      'user-rule',
    ]);
    expect(remote.cached.size).toBe(0);
  });

  it('reports cached ids after a cache update, only for the base asked for and unchanged files', async () => {
    const first = await client.scan({ root, limits, excludes, cacheKey: 'ws1' });
    const files = listFiles(first.scan.root);
    const entries = files.map((f) => {
      const digest = sha(fs.readFileSync(path.join(root, f.path)));
      return { ...f, sha256: digest, chunks: [digest] };
    });
    await client.cacheUpdate({ cacheKey: 'ws1', base: 'ckpt-1', racyAfterMs: first.scan.startedAtMs, entries });
    const again = await client.scan({ root, limits, excludes, cacheKey: 'ws1', base: 'ckpt-1' });
    expect(again.base).toBe('ckpt-1');
    expect(Object.fromEntries(again.cached)).toEqual(
      Object.fromEntries(entries.map((e) => [e.path, { sha256: e.sha256, chunks: e.chunks }])),
    );
    expect((await client.scan({ root, limits, excludes, cacheKey: 'ws1', base: 'ckpt-2' })).cached.size).toBe(0);
    fs.utimesSync(path.join(root, 'plain.txt'), new Date(2020, 1, 1), new Date(2020, 1, 1));
    const touched = await client.scan({ root, limits, excludes, cacheKey: 'ws1', base: 'ckpt-1' });
    expect(touched.cached.has('plain.txt')).toBe(false);
    expect(touched.cached.size).toBe(entries.length - 1);
    // A cached file that changes after the scan is the next checkpoint's business, a read one is not.
    fs.utimesSync(path.join(root, 'run.sh'), new Date(2020, 1, 2), new Date(2020, 1, 2));
    expect(await client.recheck(touched, { cachedWereUsed: true })).toBe(true);
    expect(await client.recheck(touched)).toBe(false);
    fs.utimesSync(path.join(root, 'plain.txt'), new Date(2020, 1, 3), new Date(2020, 1, 3));
    expect(await client.recheck(touched, { cachedWereUsed: true })).toBe(false);
    expect(fs.readdirSync(root).some((n) => n.includes('stat-cache'))).toBe(false);
  });

  it('rechecks a scan: unchanged, then changed, and unknown scans count as changed', async () => {
    const scan = await client.scan({ root, limits, excludes });
    expect(await client.recheck(scan)).toBe(true);
    fs.appendFileSync(path.join(root, 'dup/one.txt'), '!');
    expect(await client.recheck(scan)).toBe(false);
    expect(await client.recheck({ root, scanId: 'not-a-scan' })).toBe(false);
  });

  it('reads every file byte-equal in pipelined batches, the 50 MB one streamed', async () => {
    const files = [...fileList(), { path: 'gone.txt', size: 3 }];
    let count = 0;
    for await (const { path: p, bytes } of client.readFiles(root, files)) {
      expect(p).toBe(files[count]?.path);
      if (p === 'gone.txt') expect(bytes).toBeUndefined();
      else expect(sha(bytes as Buffer)).toBe(sha(fs.readFileSync(path.join(root, p))));
      count += 1;
    }
    expect(count).toBe(files.length);
  });

  it('streams a 50 MB file in pieces, and a broken-off stream leaves the client usable', async () => {
    const hash = createHash('sha256');
    let pieces = 0;
    for await (const piece of client.readStream(root, 'sizes/big.bin', { chunkBytes: 4 * 1024 * 1024 })) {
      hash.update(piece);
      pieces += 1;
    }
    expect(hash.digest('hex')).toBe(sha(fs.readFileSync(path.join(root, 'sizes/big.bin'))));
    expect(pieces).toBe(13);
    for await (const _ of client.readStream(root, 'sizes/big.bin')) break;
    expect((await client.probe(root)).root?.exists).toBe(true);
    await expect(async () => {
      for await (const _ of client.readStream(root, 'missing.bin')) break;
    }).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('refuses a read of more than 64 paths, a path with "..", and never follows a symlink', async () => {
    const channel = startAgent(home);
    const conn = new AgentConnection(channel, 30_000, 4);
    await conn.call('hello', { version: PROTOCOL_VERSION });
    const many = Array.from({ length: READ_BATCH_MAX_FILES + 1 }, () => 'plain.txt');
    await expect(conn.call('read', { root, paths: many })).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
    await expect(conn.call('read', { root, paths: ['a/../plain.txt'] })).rejects.toMatchObject({ code: 'INVALID_PATH' });
    await expect(conn.call('read', { root, paths: ['/etc/passwd'] })).rejects.toMatchObject({ code: 'INVALID_PATH' });
    const { result, payload } = await conn.call('read', { root, paths: ['link-to-plain', 'link-to-dir/c/deep.txt', 'escape', 'run.sh'] });
    expect(result).toEqual({
      files: [
        { path: 'link-to-plain', length: 0, status: 'not-file' },
        { path: 'link-to-dir/c/deep.txt', length: 0, status: 'missing' },
        { path: 'escape', length: 0, status: 'not-file' },
        { path: 'run.sh', length: 18 },
      ],
    });
    expect(payload.toString()).toBe('#!/bin/sh\necho hi\n');
    await expect(conn.call('read-stream', { root, path: 'link-to-plain' })).rejects.toMatchObject({ code: 'INVALID_PATH' });
    await conn.close();
  });
});
