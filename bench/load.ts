/**
 * `npm run load -- --replicas 1,2,3 --duration 60 --workers-per-replica 4`: how many turns per
 * second `holdfast serve` replicas sustain on one PostgreSQL and one S3 endpoint, over HTTP
 * from a loopback load generator. For each replica count: a fresh database, a counting s3rver in
 * its own process (`scale-s3-server.ts`), that many `holdfast serve` processes (compiled CLI:
 * `npm run build` first) sharing one bwrap sandbox directory, one run per worker (its base
 * workspace written by an unmeasured first turn), then for `--duration` seconds every worker
 * posts small-edit turns to its run on its replica (sticky, as a load balancer keyed by run
 * would), one at a time. Reports turns/s, latency medians, errors by status, and CPU (share of
 * one core) of the replicas (with their sandboxes' processes), this database's PostgreSQL
 * backends, s3rver and the generator, so the table says what saturated. `--write` merges the
 * result into docs/scale-figures.json under `load`.
 */
import { type ChildProcess, fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { generateToken, hashToken } from '../src/tenants/tokens.js';
import { createTestDatabase } from '../test/support/postgres.js';
import { type ServeProcess, startServe } from '../test/support/serve-process.js';
import type { S3Counts } from './scale-s3.js';
import { median, printTable } from './stats.js';

const arg = (name: string): string | undefined => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const REPLICAS = (arg('--replicas') ?? '1,2,3').split(',').map(Number);
const DURATION_S = Number(arg('--duration') ?? 60);
const WORKERS_PER_REPLICA = Number(arg('--workers-per-replica') ?? 4);
/** A turn that takes longer than this counts as failed (and the worker moves on). */
const TURN_TIMEOUT_MS = 120_000;
const MAIN = path.resolve('dist/bin/main.js');
const FIGURES = path.resolve('docs/scale-figures.json');
const BASE_FILL =
  'for d in $(seq 20); do mkdir -p src/d$d; for f in $(seq 10); do head -c 2048 /dev/urandom | base64 > src/d$d/f$f.txt; done; done';
if (REPLICAS.some((r) => !Number.isInteger(r) || r < 1 || r > 8) || !(DURATION_S > 0 && DURATION_S <= 600) || !(WORKERS_PER_REPLICA >= 1)) {
  throw new Error('--replicas takes 1-8 (comma-separated), --duration 1-600 seconds, --workers-per-replica >= 1');
}

/** CPU seconds (user + system) of a process, and of its waited-for children, from /proc. */
function cpuOf(pid: number): { self: number; children: number } {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const tick = 100; // USER_HZ on Linux
    return { self: ((fields[11] ?? 0) + (fields[12] ?? 0)) / tick, children: ((fields[13] ?? 0) + (fields[14] ?? 0)) / tick };
  } catch {
    return { self: 0, children: 0 };
  }
}

/** CPU seconds of every process below `pid` (sandboxes, agents still running), by walking /proc. */
function descendantsCpu(pid: number): number {
  const parents = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const walk = (p: number) => {
    for (const [child, parent] of parents) {
      if (parent !== p) continue;
      total += cpuOf(child).self;
      walk(child);
    }
  };
  walk(pid);
  return total;
}

/** Busy and total jiffies of the whole machine (every engineer's work included). */
function machineCpu(): { busy: number; total: number } {
  const [, ...cols] = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/);
  const n = cols.map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}

type Replica = ServeProcess;

function startReplica(env: NodeJS.ProcessEnv, name: string): Promise<Replica> {
  const cacheDir = path.join(env.HOLDFAST_SANDBOX_DIR ?? '', '..', `cache-${name}`);
  return startServe({ ...(env as Record<string, string>), HOLDFAST_CACHE_DIR: cacheDir }, ['--no-inspector']);
}

interface S3Process {
  readonly child: ChildProcess;
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  counts(): Promise<S3Counts>;
}

function startS3(): Promise<S3Process> {
  const child = fork(path.resolve('bench/scale-s3-server.ts'), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { endpoint: string; bucket: string; region: string }) => {
      resolve({
        child,
        ...m,
        counts: () =>
          new Promise((ok) => {
            child.once('message', (c: { counts: S3Counts }) => ok(c.counts));
            child.send('counts');
          }),
      });
    });
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
  });
}

/** Result of one replica count. */
interface LoadResult {
  readonly replicas: number;
  readonly workers: number;
  readonly durationS: number;
  readonly turns: number;
  readonly turnsPerSecond: number;
  readonly latencyMsMedian: number;
  readonly latencyMsP95: number;
  readonly errors: Record<string, number>;
  /** Shares of one core over the window. */
  readonly cpu: {
    replicas: number[];
    replicaChildren: number[];
    postgres: number;
    s3rver: number;
    generator: number;
    machineBusyPercent: number;
  };
  readonly s3PerTurn: Record<string, number>;
}

async function pgBackends(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const rows = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    return rows.rows.map((r) => r.pid);
  } finally {
    await client.end();
  }
}

async function loadWith(replicaCount: number): Promise<LoadResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-load-'));
  const db = await createTestDatabase();
  const s3 = await startS3();
  const replicas: Replica[] = [];
  const sandboxDir = path.join(dir, 'sandboxes');
  try {
    const token = generateToken();
    const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
    try {
      const tenant = await meta.tenants.create({ name: 'default' });
      await meta.tokens.create({ tenantId: tenant.id, name: 'load', hash: hashToken(token), admin: false });
    } finally {
      await meta.close();
    }
    const env = {
      ...process.env,
      HOLDFAST_META: db.url,
      HOLDFAST_BLOBS: `s3://${s3.bucket}/load?endpoint=${encodeURIComponent(s3.endpoint)}&region=${s3.region}&forcePathStyle=true`,
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      HOLDFAST_SANDBOX_DIR: sandboxDir,
    };
    for (let i = 0; i < replicaCount; i += 1) replicas.push(await startReplica(env, `r${i}`));
    const api = async (
      replica: Replica,
      route: string,
      body: unknown,
    ): Promise<{ status: number; body: { id?: string; error?: { code?: string } } }> => {
      const response = await fetch(`${replica.url}${route}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(TURN_TIMEOUT_MS),
      });
      return { status: response.status, body: (await response.json()) as { id?: string; error?: { code?: string } } };
    };
    const first = replicas[0] as Replica;
    const deployment = (await api(first, '/v1/deployments', { provider: 'bwrap' })).body.id;
    const workers = replicaCount * WORKERS_PER_REPLICA;
    const runs: string[] = [];
    for (let w = 0; w < workers; w += 1) {
      const run = (await api(replicas[w % replicaCount] as Replica, '/v1/runs', { deploymentId: deployment })).body.id ?? '';
      const fill = await api(replicas[w % replicaCount] as Replica, `/v1/runs/${run}/turns`, { argv: ['sh', '-c', BASE_FILL] });
      if (fill.status !== 200) throw new Error(`base turn of run ${run} answered ${fill.status} ${fill.body.error?.code}`);
      runs.push(run);
    }
    const latencies: number[] = [];
    const errors: Record<string, number> = {};
    const pgPids = await pgBackends(db.url);
    const cpuStart = {
      replicas: replicas.map((r) => cpuOf(r.pid)),
      replicaDescendants: replicas.map((r) => descendantsCpu(r.pid)),
      pg: pgPids.map(cpuOf),
      s3: cpuOf(s3.child.pid ?? 0),
      generator: process.cpuUsage(),
      machine: machineCpu(),
      s3Counts: await s3.counts(),
    };
    const started = performance.now();
    const deadline = started + DURATION_S * 1000;
    await Promise.all(
      runs.map(async (run, w) => {
        for (let i = 0; performance.now() < deadline; i += 1) {
          const t0 = performance.now();
          try {
            const answer = await api(replicas[w % replicaCount] as Replica, `/v1/runs/${run}/turns`, {
              argv: ['sh', '-c', `echo "edit ${i}" >> src/d1/f1.txt`],
            });
            if (answer.status === 200) latencies.push(performance.now() - t0);
            else
              errors[`${answer.status} ${answer.body.error?.code ?? ''}`] =
                (errors[`${answer.status} ${answer.body.error?.code ?? ''}`] ?? 0) + 1;
          } catch (error) {
            const name = error instanceof Error ? error.name : 'error';
            errors[name] = (errors[name] ?? 0) + 1;
          }
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    const s3End = await s3.counts();
    const share = (seconds: number) => seconds / elapsed;
    const machineEnd = machineCpu();
    const gen = process.cpuUsage(cpuStart.generator);
    const sorted = [...latencies].sort((a, b) => a - b);
    const perTurn = (k: keyof S3Counts['requests']) => (s3End.requests[k] - cpuStart.s3Counts.requests[k]) / Math.max(1, latencies.length);
    return {
      replicas: replicaCount,
      workers,
      durationS: elapsed,
      turns: latencies.length,
      turnsPerSecond: latencies.length / elapsed,
      latencyMsMedian: latencies.length === 0 ? Number.NaN : median(latencies),
      latencyMsP95: sorted[Math.floor(sorted.length * 0.95)] ?? Number.NaN,
      errors,
      cpu: {
        replicas: replicas.map((r, i) => share(cpuOf(r.pid).self - (cpuStart.replicas[i]?.self ?? 0))),
        replicaChildren: replicas.map((r, i) => {
          const now = cpuOf(r.pid).children + descendantsCpu(r.pid);
          return share(now - ((cpuStart.replicas[i]?.children ?? 0) + (cpuStart.replicaDescendants[i] ?? 0)));
        }),
        postgres: share(pgPids.reduce((a, pid, i) => a + cpuOf(pid).self - (cpuStart.pg[i]?.self ?? 0), 0)),
        s3rver: share(cpuOf(s3.child.pid ?? 0).self - cpuStart.s3.self),
        generator: share((gen.user + gen.system) / 1e6),
        machineBusyPercent: (100 * (machineEnd.busy - cpuStart.machine.busy)) / (machineEnd.total - cpuStart.machine.total),
      },
      s3PerTurn: { put: perTurn('put'), head: perTurn('head'), get: perTurn('get'), list: perTurn('list'), delete: perTurn('delete') },
    };
  } finally {
    for (const r of replicas) process.kill(r.pid, 'SIGKILL');
    s3.child.send('stop');
    const provider = new BwrapSandboxProvider({ root: path.join(sandboxDir, 'bwrap') });
    for (const s of await provider.list().catch(() => [])) await provider.destroy(s.id).catch(() => undefined);
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  const results: LoadResult[] = [];
  for (const r of REPLICAS) {
    process.stderr.write(`[load] ${r} replica(s), ${r * WORKERS_PER_REPLICA} workers, ${DURATION_S} s\n`);
    results.push(await loadWith(r));
  }
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  printTable(
    `Turns over HTTP (small edit), ${DURATION_S} s per row, ${WORKERS_PER_REPLICA} workers per replica; CPU as share of one core (${os.cpus().length} cores)`,
    [
      'replicas',
      'turns',
      'turns/s',
      'p50 ms',
      'p95 ms',
      'errors',
      'replicas cpu',
      'sandboxes cpu',
      'postgres',
      's3rver',
      'generator',
      'machine busy',
    ],
    results.map((x) => [
      String(x.replicas),
      String(x.turns),
      x.turnsPerSecond.toFixed(2),
      x.latencyMsMedian.toFixed(0),
      x.latencyMsP95.toFixed(0),
      String(Object.values(x.errors).reduce((a, b) => a + b, 0)),
      x.cpu.replicas.map(pct).join('+'),
      x.cpu.replicaChildren.map(pct).join('+'),
      pct(x.cpu.postgres),
      pct(x.cpu.s3rver),
      pct(x.cpu.generator),
      `${x.cpu.machineBusyPercent.toFixed(0)}%`,
    ]),
  );
  if (process.argv.includes('--write')) {
    const figures = fs.existsSync(FIGURES) ? (JSON.parse(fs.readFileSync(FIGURES, 'utf8')) as Record<string, unknown>) : {};
    figures.load = { measuredAt: new Date().toISOString(), workersPerReplica: WORKERS_PER_REPLICA, results };
    fs.writeFileSync(FIGURES, `${JSON.stringify(figures, null, 2)}\n`);
  }
}

await main();
