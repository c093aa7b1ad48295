import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createS3BlobStore } from '../../src/blob-store/drivers/s3.js';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { environmentWithoutHoldfast } from '../../test/support/cli-env.js';
import { seedRemote } from '../../test/support/git-fixture.js';
import { startGitDaemon } from '../../test/support/git-servers.js';
import { createTestDatabase, DEFAULT_TEST_PG_URL } from '../../test/support/postgres.js';
import { runHoldfast } from '../../test/support/serve-process.js';
import { type CheckResult, checkHistory } from './checker.js';
import { type FaultKind, type FaultRecord, injectFaults } from './faults.js';
import { Fleet, type FleetTimings } from './fleet.js';
import { call } from './http.js';
import { SeededRandom } from './rng.js';
import { S3RVER_CREDENTIALS, S3RVER_REGION, startSoakS3 } from './s3.js';
import { S3Chaos } from './s3-chaos.js';
import { type DriverRecord, emptyRecord, folderWriter, setUp, turn } from './workload.js';

/** Fault kinds of every soak; `pg-restart` only on request (it restarts the PostgreSQL others share). */
export const DEFAULT_FAULT_KINDS: readonly FaultKind[] = [
  'kill-9',
  'sigstop',
  'pg-terminate',
  's3-500',
  's3-503',
  's3-slow',
  's3-drop-upload',
  'sandbox-destroy',
  'cache-full',
  'gc-zero-grace',
];

/** Every kind the driver knows. */
export const ALL_FAULT_KINDS: readonly FaultKind[] = [...DEFAULT_FAULT_KINDS, 'pg-restart'];

/** What one soak does. */
export interface SoakOptions {
  readonly seed: number;
  readonly replicas: number;
  readonly runs: number;
  readonly turnsPerRun: number;
  /** Runs driven at once. */
  readonly concurrency: number;
  readonly kinds: readonly FaultKind[];
  readonly timings: FleetTimings;
  readonly log: (line: string) => void;
}

/** Serve settings of a soak: 3 s leases, saves every second, GC sweeps every 3 s. */
export const SOAK_TIMINGS: FleetTimings = Object.freeze({
  leaseTtlMs: 3_000,
  checkpointIntervalMs: 1_000,
  gcSweepIntervalMs: 3_000,
  straySweepIntervalMs: 5_000,
});

/** A final fault-free turn is retried this often (a predecessor's lease may still be expiring). */
const FINAL_TURN_ATTEMPTS = 4;

/** The soak's outcome. */
export interface SoakReport {
  readonly seed: number;
  readonly runs: number;
  readonly turnsAttempted: number;
  readonly turnsAcked: number;
  readonly unacked: Map<string, number>;
  readonly folderWrites: number;
  readonly folderWritesAcked: number;
  readonly faults: FaultRecord[];
  readonly check: CheckResult;
  readonly durationMs: number;
  /** Runs whose final turn failed: what it answered, the lease, and what resolving it did. */
  readonly finalFailures: DriverRecord['finalFailures'];
}

/** Runs a whole soak: fleet up, workload under faults, faults off, final turns, history check, teardown. */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const started = Date.now();
  const root = new SeededRandom(options.seed);
  const [workRandom, faultRandom, chaosRandom, callRandom] = [root.fork(), root.fork(), root.fork(), root.fork()];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'holdfast-soak-'));
  const chaos = new S3Chaos(chaosRandom);
  const db = await createTestDatabase();
  const s3 = await startSoakS3(chaos);
  const prefix = 'soak';
  const blobsUrl = `s3://${s3.bucket}/${prefix}?endpoint=${encodeURIComponent(s3.endpoint)}&region=${S3RVER_REGION}&forcePathStyle=true`;
  const sandboxDir = path.join(dir, 'sandboxes');
  seedRemote(dir);
  const git = await startGitDaemon(dir);
  const env = {
    ...environmentWithoutHoldfast(),
    HOLDFAST_META: db.url,
    HOLDFAST_BLOBS: blobsUrl,
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    HOLDFAST_SANDBOX_DIR: sandboxDir,
    HOLDFAST_GIT_ALLOWED_HOSTS: '127.0.0.1',
    HOLDFAST_GIT_PROTOCOLS: 'git',
    HOLDFAST_GIT_ALLOW_PRIVATE_ADDRESSES: 'true',
  };
  const cliEnv = { ...env, HOLDFAST_CACHE_DIR: path.join(dir, 'cache-cli') };
  const holdfast = async (args: readonly string[]) => runHoldfast(args, cliEnv);
  const fleet = new Fleet(dir, { dbUrl: db.url, blobsUrl, sandboxDir, env }, options.timings);
  const record = emptyRecord();
  fleet.onCrash = (index, exit) => {
    options.log(`replica ${index} exited by itself (${exit}): restarting`);
    const replica = fleet.replicas[index];
    if (replica !== undefined)
      void fleet.launch(replica).catch((error: unknown) => options.log(`restart of replica ${index} failed: ${String(error)}`));
  };
  let faults: FaultRecord[] = [];
  try {
    await fleet.createToken();
    await fleet.start(options.replicas);
    options.log(`seed ${options.seed}: ${options.replicas} replicas up, database ${new URL(db.url).pathname.slice(1)}`);
    await setUp(fleet, workRandom, options.runs, record, git.url('remote.git'));
    options.log(`${record.runIds.length} runs created`);

    let workloadDone = false;
    const dbName = new URL(db.url).pathname.slice(1);
    const faultsDone = injectFaults(
      {
        fleet,
        chaos,
        dbName,
        adminUrl: process.env.HOLDFAST_TEST_PG || DEFAULT_TEST_PG_URL,
        sandboxRoot: path.join(sandboxDir, 'bwrap'),
        kinds: options.kinds,
        holdfast: async (args) => (await holdfast(args)).code,
        log: options.log,
      },
      faultRandom,
      () => workloadDone,
    );
    const writer = folderWriter(fleet, callRandom.fork(), record, () => workloadDone);
    await driveRuns(fleet, workRandom, callRandom, record, options);
    workloadDone = true;
    faults = await faultsDone;
    await writer;
    chaos.close();
    await healFleet(fleet);
    options.log(`workload done: ${record.acked.length}/${record.turnsAttempted} turns acknowledged; final turns`);
    await finalTurns(fleet, workRandom, callRandom, record, options);
    const blobs = await createS3BlobStore({
      kind: 's3',
      endpoint: s3.endpoint,
      bucket: s3.bucket,
      prefix,
      region: S3RVER_REGION,
      credentials: S3RVER_CREDENTIALS,
      forcePathStyle: true,
    });
    let check: CheckResult;
    try {
      check = await checkHistory({
        dbUrl: db.url,
        blobs,
        scratchDir: path.join(dir, 'check'),
        record,
        readFolderFile: (filePath) => readFolderFile(fleet, callRandom, filePath),
        holdfast,
      });
    } finally {
      await blobs.close();
    }
    check.checked.set('no replica exits by itself', options.replicas);
    for (const crash of fleet.crashes)
      check.violations.push({
        invariant: 'no replica exits by itself',
        detail: `replica ${crash.index} exited ${crash.exit}:\n${crash.tail.join('\n')}`,
      });
    return {
      seed: options.seed,
      runs: record.runIds.length,
      turnsAttempted: record.turnsAttempted,
      turnsAcked: record.acked.length,
      unacked: record.unacked,
      folderWrites: record.folderWrites.length,
      folderWritesAcked: record.folderWrites.filter((w) => w.acked).length,
      faults,
      check,
      durationMs: Date.now() - started,
      finalFailures: record.finalFailures,
    };
  } finally {
    chaos.close();
    await fleet.stop();
    const provider = new BwrapSandboxProvider({ root: path.join(sandboxDir, 'bwrap') });
    for (const sandbox of await provider.list().catch(() => [])) await provider.destroy(sandbox.id).catch(() => {});
    await s3.close();
    await git.close();
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** `concurrency` workers take the runs in turn and give each its turns, one after another. */
async function driveRuns(
  fleet: Fleet,
  random: SeededRandom,
  callRandom: SeededRandom,
  record: DriverRecord,
  options: SoakOptions,
): Promise<void> {
  await eachRun(record.runIds, options.concurrency, async (runId) => {
    for (let n = 1; n <= options.turnsPerRun; n += 1) {
      await turn(fleet, callRandom, record, runId, n, false);
      await sleep(random.int(0, 300));
    }
    options.log(`run ${runId} done (${record.acked.length}/${record.turnsAttempted} acknowledged so far)`);
  });
}

/** `fn` over every run, `concurrency` workers each taking the next run when done with one. */
async function eachRun(runIds: readonly string[], concurrency: number, fn: (runId: string) => Promise<void>): Promise<void> {
  const queue = [...runIds];
  const worker = async (): Promise<void> => {
    for (let runId = queue.shift(); runId !== undefined; runId = queue.shift()) await fn(runId);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Faults are off: every replica running and awake. */
async function healFleet(fleet: Fleet): Promise<void> {
  for (const replica of fleet.replicas) {
    if (replica.stopped) fleet.thaw(replica);
    if (replica.url === undefined) await fleet.launch(replica);
  }
}

/** One more turn on every run, without faults; a run whose turn keeps failing is recorded with its lease. */
async function finalTurns(
  fleet: Fleet,
  random: SeededRandom,
  callRandom: SeededRandom,
  record: DriverRecord,
  options: SoakOptions,
): Promise<void> {
  await eachRun(record.runIds, options.concurrency, async (runId) => {
    let answer = await turn(fleet, callRandom, record, runId, options.turnsPerRun + 1, true);
    for (let attempt = 1; answer.status !== 200 && attempt < FINAL_TURN_ATTEMPTS; attempt += 1) {
      await sleep(options.timings.leaseTtlMs);
      answer = await turn(fleet, callRandom, record, runId, options.turnsPerRun + 1 + attempt, true);
    }
    if (answer.status !== 200) {
      const lease = (await call(fleet, random, 'GET', `/v1/runs/${runId}`, { timeoutMs: 30_000 })).body?.lease;
      options.log(`final turn of ${runId} failed: ${answer.status} ${JSON.stringify(answer.body).slice(0, 500)}`);
      // What an operator does next: resolve the lease (saving a kept sandbox first), then one more turn.
      let afterResolve: string | undefined;
      if (lease?.state === 'release_recovery_required') {
        const resolved = await call(fleet, random, 'POST', `/v1/runs/${runId}/lease/resolve`, { json: {}, timeoutMs: 60_000 });
        const next = resolved.status === 200 ? await turn(fleet, callRandom, record, runId, options.turnsPerRun + 10, true) : undefined;
        afterResolve = `resolve ${answerOf(resolved)}${next === undefined ? '' : `, then turn ${answerOf(next)}`}`;
      }
      record.finalFailures.push({ runId, status: answer.status, code: String(answer.body?.error?.code), lease, afterResolve });
    }
  });
}

async function readFolderFile(fleet: Fleet, random: SeededRandom, filePath: string): Promise<string | undefined> {
  const answer = await call(
    fleet,
    random,
    'GET',
    `/api/companies/default/work-folders/project/soak-project/content?path=${encodeURIComponent(filePath)}`,
    {
      timeoutMs: 30_000,
    },
  );
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw new Error(`reading ${filePath}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
}

/** An HTTP answer as `status CODE` for the report. */
function answerOf(answer: { status: number; body?: { error?: { code?: unknown } } }): string {
  return `${answer.status}${answer.body?.error?.code === undefined ? '' : ` ${String(answer.body.error.code)}`}`;
}

/** The report as printed lines. */
export function formatReport(report: SoakReport): string[] {
  const byKind = new Map<string, number>();
  for (const f of report.faults) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
  const lines = [
    `soak seed ${report.seed} (${Math.round(report.durationMs / 1000)} s)`,
    `runs ${report.runs}, turns ${report.turnsAcked} acknowledged of ${report.turnsAttempted} attempted; folder writes ${report.folderWritesAcked} acknowledged of ${report.folderWrites}`,
    `unacknowledged turns by answer: ${[...report.unacked].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    `faults ${report.faults.length}: ${[...byKind].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    'invariants checked:',
    ...[...report.check.checked].map(([name, n]) => `  ${name}: ${n}`),
    'observed:',
    ...[...report.check.observed].map(([name, n]) => `  ${name}: ${n}`),
    `violations: ${report.check.violations.length}`,
    ...report.check.violations.slice(0, 50).map((v) => `  VIOLATION ${v.invariant}: ${v.detail}`),
    ...report.finalFailures.map(
      (f) =>
        `  final turn of ${f.runId} answered ${f.status} ${f.code}; lease ${JSON.stringify(f.lease)}; ${f.afterResolve ?? 'not resolved'}`,
    ),
  ];
  return lines;
}
