import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import { generateToken, hashToken } from '../src/tenants/tokens.js';
import { nodeImage } from './support/docker-images.js';
import { createTestDatabase, type TestDatabase } from './support/postgres.js';
import { type S3TestTarget, startS3Target } from './support/s3-server.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const MAIN = path.resolve('dist/bin/main.js');
/** Short enough that takeover happens within the test, long enough for heartbeats on a loaded box. */
const LEASE_TTL_MS = 3000;
const CONCURRENT_TURNS = 50;

interface Server {
  readonly child: ChildProcess;
  readonly url: string;
  readonly logs: string[];
}

/**
 * Two (and a third) `holdfast serve` processes on one PostgreSQL database, one S3 endpoint and
 * one bwrap sandbox directory, as several platform servers share a Holdfast deployment; and a
 * pair on docker, whose containers outlive a killed server.
 */
describe('holdfast serve: several processes on one PostgreSQL + S3', () => {
  let dir: string;
  let db: TestDatabase;
  let s3: S3TestTarget;
  let env: NodeJS.ProcessEnv;
  let token: string;
  const servers: Server[] = [];
  /**
   * Runs whose sandboxes are docker containers. `holdfast serve` uses the provider's default
   * scope, which other users of this daemon share: cleanup removes only these runs' containers.
   */
  const dockerRuns: string[] = [];
  const docker = new DockerSandboxProvider();

  const start = async (name: string): Promise<Server> => {
    const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--lease-ttl-ms', String(LEASE_TTL_MS)], {
      env: { ...env, HOLDFAST_CACHE_DIR: path.join(dir, `cache-${name}`) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const logs: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      let buffered = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          logs.push(line);
          const parsed = JSON.parse(line) as { msg?: string; url?: string };
          if (parsed.msg === 'listening' && parsed.url !== undefined) resolve(parsed.url);
        }
      });
      child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      child.on('exit', (code) => reject(new Error(`${name} exited with ${code} before listening: ${logs.join('\n')}`)));
    });
    const server = { child, url, logs };
    servers.push(server);
    return server;
  };

  const api = async (server: Server, method: string, route: string, body?: unknown) => {
    const response = await fetch(`${server.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers
    return { status: response.status, body: (await response.json()) as any };
  };
  const sandboxesOf = async (runId: string) => {
    const provider = new BwrapSandboxProvider({ root: path.join(dir, 'sandboxes', 'bwrap') });
    return (await provider.list()).filter((s) => s.labels['holdfast.run'] === runId);
  };
  const waitFor = async (what: string, check: () => Promise<boolean>) => {
    for (const deadline = Date.now() + 30_000; !(await check()); await sleep(100)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    }
  };

  beforeAll(async () => {
    expectBwrapInstalled();
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-cluster-'));
    db = await createTestDatabase({ migrated: true });
    s3 = await startS3Target();
    env = {
      ...process.env,
      HOLDFAST_META: db.url,
      HOLDFAST_BLOBS: `s3://${s3.bucket}/${s3.prefix}?endpoint=${encodeURIComponent(s3.endpoint)}&region=${s3.region}&forcePathStyle=true`,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      HOLDFAST_SANDBOX_DIR: path.join(dir, 'sandboxes'),
    };
    const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
    try {
      const tenant = await meta.tenants.create({ name: 'default' });
      token = generateToken();
      await meta.tokens.create({ tenantId: tenant.id, name: 'cluster-test', hash: hashToken(token), admin: false });
    } finally {
      await meta.close();
    }
  });

  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGKILL');
    const provider = new BwrapSandboxProvider({ root: path.join(dir, 'sandboxes', 'bwrap') });
    for (const sandbox of await provider.list().catch(() => [])) await provider.destroy(sandbox.id);
    for (const sandbox of dockerRuns.length === 0 ? [] : await docker.list()) {
      if (dockerRuns.includes(sandbox.labels['holdfast.run'] ?? '')) await docker.destroy(sandbox.id);
    }
    await s3?.close();
    await db?.drop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('50 concurrent turns on two servers: one owner at a time, one sandbox; a killed owner is recovered after its lease expires; a stale owner gets STALE_LEASE', async () => {
    const [a, b] = [await start('a'), await start('b')];
    const deployment = await api(a, 'POST', '/v1/deployments', { provider: 'bwrap' });
    expect(deployment.status).toBe(201);
    const run = (await api(b, 'POST', '/v1/runs', { deploymentId: deployment.body.id })).body;

    // 50 turn starts at once, half on each server; each appends one line to the same file.
    const answers = await Promise.all(
      Array.from({ length: CONCURRENT_TURNS }, (_, i) =>
        api(i % 2 === 0 ? a : b, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', `echo turn-${i} >> turns.log`], waitMs: 30_000 }),
      ),
    );
    const ok = answers.filter((x) => x.status === 200);
    for (const other of answers.filter((x) => x.status !== 200))
      expect(other.body.error).toMatchObject({ code: 'CONFLICT', data: { reason: 'busy' } });
    expect(ok.length).toBeGreaterThanOrEqual(CONCURRENT_TURNS / 2);
    expect(await sandboxesOf(run.id)).toHaveLength(1);
    const turns = (
      (await api(a, 'GET', `/v1/runs/${run.id}/turns?limit=100`)).body.turns as {
        seq: number;
        epoch: number;
        status: string;
        startedAt: number;
        finishedAt: number;
      }[]
    )
      .slice()
      .reverse();
    expect(turns.map((t) => t.seq)).toEqual(Array.from({ length: ok.length }, (_, i) => i + 1));
    expect(turns.every((t) => t.status === 'completed')).toBe(true);
    for (let i = 1; i < turns.length; i += 1) {
      expect(turns[i]?.epoch).toBeGreaterThan(turns[i - 1]?.epoch ?? Number.POSITIVE_INFINITY);
      expect(turns[i]?.startedAt).toBeGreaterThanOrEqual(turns[i - 1]?.finishedAt ?? Number.POSITIVE_INFINITY);
    }
    const head = ok
      .map((x) => x.body.checkpoint)
      .sort((x, y) => x.createdAt - y.createdAt)
      .at(-1);
    const log = await fetch(`${a.url}/v1/checkpoints/${head.id}/file?path=turns.log`, { headers: { authorization: `Bearer ${token}` } });
    const lines = (await log.text()).trim().split('\n');
    const succeeded = answers.flatMap((x, i) => (x.status === 200 ? [`turn-${i}`] : []));
    expect(lines.sort()).toEqual(succeeded.sort());

    // Kill -9 the owner in the middle of a turn: the other server recovers from the last ready checkpoint.
    const lastGood = (await api(a, 'GET', `/v1/runs/${run.id}`)).body;
    const doomed = api(a, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo lost >> turns.log; sleep 30'] }).catch(
      (e: unknown) => e,
    );
    await waitFor(
      'the turn on a to start',
      async () => (await api(b, 'GET', `/v1/runs/${run.id}/turns?limit=1`)).body.turns[0]?.status === 'running',
    );
    const ownerA = (await api(b, 'GET', `/v1/runs/${run.id}`)).body.lease.owner as string;
    a.child.kill('SIGKILL');
    await doomed;
    const recovered = await api(b, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'wc -l < turns.log'], waitMs: 30_000 });
    expect(recovered.status, JSON.stringify(recovered.body)).toBe(200);
    expect(Number(recovered.body.stdout.trim())).toBe(ok.length);
    const after = (await api(b, 'GET', `/v1/runs/${run.id}`)).body;
    expect(after.sandbox.id).not.toBe(lastGood.sandbox.id);
    expect(await sandboxesOf(run.id)).toHaveLength(1);
    const events = (await api(b, 'GET', `/v1/runs/${run.id}/events`)).body.events as {
      kind: string;
      step: string;
      status: string;
      durationMs: number;
      data: { from?: string };
    }[];
    expect(events.find((e) => e.kind === 'lease' && e.step === 'takeover')?.data.from).toBe(ownerA);
    const recovery = events.filter((e) => e.kind === 'recovery');
    expect(recovery.map((e) => `${e.step}:${e.status}`)).toEqual([
      'create_sandbox:ok',
      'restore:ok',
      'setup:ok',
      'validate:ok',
      'commit:ok',
    ]);
    const [killedTurn] = (
      (await api(b, 'GET', `/v1/runs/${run.id}/turns?limit=2`)).body.turns as { status: string; error: { code: string } }[]
    ).slice(1);
    expect(killedTurn).toMatchObject({ status: 'failed', error: { code: 'STALE_LEASE' } });

    // A frozen owner (SIGSTOP) loses its lease; when it wakes its writes are refused.
    const c = await start('c');
    const frozenTurn = api(c, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo frozen >> turns.log; sleep 4'] });
    await waitFor('the turn on c to start', async () =>
      (await api(b, 'GET', `/v1/runs/${run.id}`)).body.lease.owner?.includes(`:${c.child.pid}:`),
    );
    c.child.kill('SIGSTOP');
    const takeover = await api(b, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'wc -l < turns.log'], waitMs: 30_000 });
    c.child.kill('SIGCONT');
    expect(takeover.status, JSON.stringify(takeover.body)).toBe(200);
    expect(Number(takeover.body.stdout.trim())).toBe(ok.length);
    const stale = await frozenTurn;
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('STALE_LEASE');
    const final = (await api(b, 'GET', `/v1/runs/${run.id}/checkpoints?limit=1`)).body.checkpoints[0];
    expect(final.id).toBe(takeover.body.checkpoint.id);
  });

  it('SIGTERM drains: idle sandboxes are checkpointed, a running turn is reported incomplete, the process exits inside the deadline', async () => {
    const deadlineMs = 2000;
    const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--shutdown-deadline-ms', String(deadlineMs)], {
      env: { ...env, HOLDFAST_CACHE_DIR: path.join(dir, 'cache-drain') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: { msg?: string; url?: string; [key: string]: unknown }[] = [];
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const url = await new Promise<string>((resolve) => {
      let buffered = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = JSON.parse(buffered.slice(0, nl)) as { msg?: string; url?: string };
          buffered = buffered.slice(nl + 1);
          lines.push(line);
          if (line.msg === 'listening' && line.url !== undefined) resolve(line.url);
        }
      });
    });
    const server: Server = { child, url, logs: [] };
    const deployment = (await api(server, 'POST', '/v1/deployments', { provider: 'bwrap' })).body;
    const runs = [];
    for (let i = 0; i < 3; i += 1) runs.push((await api(server, 'POST', '/v1/runs', { deploymentId: deployment.id })).body.id as string);
    const [idle1, idle2, busy] = runs as [string, string, string];
    for (const id of [idle1, idle2])
      expect((await api(server, 'POST', `/v1/runs/${id}/turns`, { argv: ['sh', '-c', `echo ${id} > id.txt`] })).status).toBe(200);
    const running = api(server, 'POST', `/v1/runs/${busy}/turns`, { argv: ['sleep', '30'] }).catch((e: unknown) => e);
    await waitFor(
      'the long turn to start',
      async () => (await api(server, 'GET', `/v1/runs/${busy}/turns?limit=1`)).body.turns[0]?.status === 'running',
    );
    const signalled = performance.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(deadlineMs + 5000);
    await running;
    const report = lines.find((l) => l.msg === 'shutdown report') as {
      checkpointed: string[];
      incomplete: { runId: string; what: string }[];
    };
    expect(report.checkpointed.sort()).toEqual([idle1, idle2].sort());
    expect(report.incomplete).toContainEqual(expect.objectContaining({ runId: busy, what: 'turn' }));
    expect(lines.some((l) => l.msg === 'shutdown incomplete' && l.runId === busy)).toBe(true);
    const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
    try {
      for (const id of [idle1, idle2]) {
        const run = await meta.runs.get(id);
        const [latest] = await meta.checkpoints.listByWorkspace(run.workspaceId, { limit: 1 });
        expect(latest).toMatchObject({ reason: 'shutdown', status: 'ready' });
      }
    } finally {
      await meta.close();
    }
  });

  it('docker sandboxes through holdfast serve: a SIGKILLed owner leaves its container running; the other server takes over, removes it and recovers the run onto a new one', async () => {
    const image = nodeImage();
    const [a, b] = [await start('docker-a'), await start('docker-b')];
    const deployment = await api(a, 'POST', '/v1/deployments', {
      provider: 'docker',
      image,
      setup: [['sh', '-c', 'echo set-up > /home/agent/setup.txt']],
    });
    expect(deployment.status, JSON.stringify(deployment.body)).toBe(201);
    const run = (await api(b, 'POST', '/v1/runs', { deploymentId: deployment.body.id })).body;
    dockerRuns.push(run.id);
    const containersOf = async () => (await docker.list()).filter((s) => s.labels['holdfast.run'] === run.id).map((s) => s.id);

    const first = await api(a, 'POST', `/v1/runs/${run.id}/turns`, {
      argv: ['sh', '-c', 'echo one >> turns.log && cat /home/agent/setup.txt'],
    });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.stdout).toBe('set-up\n');
    const lastGood = (await api(a, 'GET', `/v1/runs/${run.id}`)).body;
    expect(await containersOf()).toEqual([lastGood.sandbox.id]);

    const doomed = api(a, 'POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo lost >> turns.log; sleep 30'] }).catch(
      (e: unknown) => e,
    );
    await waitFor(
      'the turn on a to start',
      async () => (await api(b, 'GET', `/v1/runs/${run.id}/turns?limit=1`)).body.turns[0]?.status === 'running',
    );
    a.child.kill('SIGKILL');
    await doomed;
    expect(await containersOf()).toEqual([lastGood.sandbox.id]);
    const recovered = await api(b, 'POST', `/v1/runs/${run.id}/turns`, {
      argv: ['sh', '-c', 'cat turns.log /home/agent/setup.txt'],
      waitMs: 30_000,
    });
    expect(recovered.status, JSON.stringify(recovered.body)).toBe(200);
    expect(recovered.body.stdout).toBe('one\nset-up\n');
    const after = (await api(b, 'GET', `/v1/runs/${run.id}`)).body;
    expect(after.sandbox.id).not.toBe(lastGood.sandbox.id);
    expect(await containersOf()).toEqual([after.sandbox.id]);
    const events = (await api(b, 'GET', `/v1/runs/${run.id}/events`)).body.events as { kind: string; step: string; status: string }[];
    expect(events.filter((e) => e.kind === 'recovery').map((e) => `${e.step}:${e.status}`)).toEqual([
      'create_sandbox:ok',
      'restore:ok',
      'setup:ok',
      'validate:ok',
      'commit:ok',
    ]);
    const [killedTurn] = (
      (await api(b, 'GET', `/v1/runs/${run.id}/turns?limit=2`)).body.turns as { status: string; error: { code: string } }[]
    ).slice(1);
    expect(killedTurn).toMatchObject({ status: 'failed', error: { code: 'STALE_LEASE' } });
  });
});
