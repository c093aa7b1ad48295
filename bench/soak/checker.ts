import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { BlobStore } from '../../src/blob-store/blob-store.js';
import { openHoldfast } from '../../src/index.js';
import { BUNDLE_TEXT, type DriverRecord, HTTP_KEYS } from './workload.js';

/** A broken promise found in the history. */
export interface Violation {
  readonly invariant: string;
  readonly detail: string;
}

/** What the checker looked at and found. */
export interface CheckResult {
  /** Invariant name -> how many times it was checked. */
  readonly checked: Map<string, number>;
  readonly violations: Violation[];
  /** Facts of the history worth printing (fenced writes seen, runs needing resolution…). */
  readonly observed: Map<string, number>;
}

/** Where the checker reads the history: the database, the blob store, the CLI. */
export interface CheckInputs {
  readonly dbUrl: string;
  readonly blobs: BlobStore;
  readonly scratchDir: string;
  readonly record: DriverRecord;
  /** Reads a project-folder file through the service; undefined when it does not exist. */
  readonly readFolderFile: (filePath: string) => Promise<string | undefined>;
  /** Runs the CLI; resolves with its exit code and stdout. */
  readonly holdfast: (args: readonly string[]) => Promise<{ code: number; stdout: string }>;
}

interface TurnRow {
  id: string;
  run_id: string;
  /** int8 columns come back as strings from pg. */
  seq: string;
  epoch: string;
  status: string;
  checkpoint_id: string | null;
  started_at: string;
  finished_at: string | null;
}

interface CheckpointRow {
  id: string;
  workspace_id: string;
  parent_id: string | null;
  status: string;
  error: string | null;
}

/**
 * Checks the soak's history, read from the metadata store and the blob store (never the
 * logs), against what the driver was acknowledged.
 */
export async function checkHistory(inputs: CheckInputs): Promise<CheckResult> {
  const result: CheckResult = { checked: new Map(), violations: [], observed: new Map() };
  const check = (invariant: string, ok: boolean, detail: () => string): void => {
    result.checked.set(invariant, (result.checked.get(invariant) ?? 0) + 1);
    if (!ok) result.violations.push({ invariant, detail: detail() });
  };
  const client = new pg.Client({ connectionString: inputs.dbUrl });
  await client.connect();
  try {
    await checkTurnsAndCheckpoints(client, inputs.record, check, result.observed);
    await checkProgress(client, inputs.record, check, result.observed);
  } finally {
    await client.end();
  }
  await checkRestores(inputs, check);
  await checkFolders(inputs, check);
  const verify = await inputs.holdfast(['verify', '--read-data', '--json']);
  check('verify --read-data clean (no referenced pack deleted or damaged)', verify.code === 0, () => verify.stdout.slice(0, 2000));
  return result;
}

type Check = (invariant: string, ok: boolean, detail: () => string) => void;

async function checkTurnsAndCheckpoints(
  client: pg.Client,
  record: DriverRecord,
  check: Check,
  observed: Map<string, number>,
): Promise<void> {
  const turns = (await client.query<TurnRow>('SELECT * FROM turns ORDER BY run_id, seq')).rows;
  const checkpoints = new Map(
    (await client.query<CheckpointRow>('SELECT id, workspace_id, parent_id, status, error FROM checkpoints')).rows.map((c) => [c.id, c]),
  );
  const runs = (await client.query<{ id: string; workspace_id: string }>('SELECT id, workspace_id FROM runs')).rows;
  const heads = new Map(
    (await client.query<{ id: string; head_checkpoint_id: string | null }>('SELECT id, head_checkpoint_id FROM workspaces')).rows.map(
      (w) => [w.id, w.head_checkpoint_id],
    ),
  );
  const turnsById = new Map(turns.map((t) => [t.id, t]));

  for (const ack of record.acked) {
    const row = turnsById.get(ack.turnId);
    check(
      'acknowledged turn recorded completed with its checkpoint',
      row?.status === 'completed' && row.checkpoint_id === ack.checkpointId && Number(row.seq) === ack.seq && row.run_id === ack.runId,
      () => `${JSON.stringify(ack.turnId)} row ${JSON.stringify(row)} ack seq ${ack.seq} checkpoint ${ack.checkpointId}`,
    );
    const checkpoint = checkpoints.get(ack.checkpointId);
    check(
      'acknowledged turn checkpoint exists and is ready',
      checkpoint?.status === 'ready',
      () => `${ack.checkpointId}: ${JSON.stringify(checkpoint)}`,
    );
    check(
      'deployment bundle visible in every acknowledged turn',
      ack.bundleText === BUNDLE_TEXT,
      () => `run ${ack.runId} seq ${ack.seq}: ${JSON.stringify(ack.bundleText)}`,
    );
  }
  // A repository commit a turn made is never lost: each acknowledged turn finds every earlier acknowledged one's commits, plus its own.
  for (const runId of record.repoRuns) {
    const counts = record.acked.filter((a) => a.runId === runId).map((a) => a.repoCommits ?? Number.NaN);
    for (let i = 0; i < counts.length; i += 1) {
      const [before, now] = [i === 0 ? 1 : (counts[i - 1] as number), counts[i] as number];
      check(
        'repository commits of acknowledged turns survive (each turn sees all earlier ones)',
        now >= before + 1,
        () => `run ${runId}: commit counts ${counts.join(',')}`,
      );
    }
  }
  const ackSeqs = new Map<string, number[]>();
  for (const ack of record.acked) ackSeqs.set(ack.runId, [...(ackSeqs.get(ack.runId) ?? []), ack.seq]);
  for (const [runId, seqs] of ackSeqs)
    check('no turn acknowledged twice', new Set(seqs).size === seqs.length, () => `run ${runId}: ${seqs.join(',')}`);

  const byRun = new Map<string, TurnRow[]>();
  for (const t of turns) byRun.set(t.run_id, [...(byRun.get(t.run_id) ?? []), t]);
  for (const run of runs) {
    const list = byRun.get(run.id) ?? [];
    check(
      'turn seqs are 1..n with no gap or duplicate',
      list.every((t, i) => Number(t.seq) === i + 1),
      () => `run ${run.id}: ${list.map((t) => t.seq).join(',')}`,
    );
    for (let i = 1; i < list.length; i += 1) {
      const [a, b] = [list[i - 1] as TurnRow, list[i] as TurnRow];
      check(
        'epochs strictly increase along the turns',
        Number(b.epoch) > Number(a.epoch),
        () => `run ${run.id}: seq ${a.seq} epoch ${a.epoch}, seq ${b.seq} epoch ${b.epoch}`,
      );
    }
    const completed = list.filter((t) => t.status === 'completed');
    for (let i = 1; i < completed.length; i += 1) {
      const [a, b] = [completed[i - 1] as TurnRow, completed[i] as TurnRow];
      check(
        'completed turns of a run never overlap in time',
        Number(b.started_at) >= Number(a.finished_at),
        () => `run ${run.id}: seq ${a.seq} ended ${a.finished_at}, seq ${b.seq} started ${b.started_at}`,
      );
    }
    for (const t of list) check('no turn left running', t.status !== 'running', () => `run ${run.id} seq ${t.seq} is still running`);
    checkChain(run.id, run.workspace_id, heads.get(run.workspace_id) ?? null, checkpoints, completed, check);
  }
  let fenced = 0;
  for (const c of checkpoints.values()) if (c.status === 'failed' && c.error?.includes('"STALE_LEASE"')) fenced += 1;
  observed.set('checkpoints refused as fenced (STALE_LEASE)', fenced);
  observed.set('turns failed STALE_LEASE', turns.filter((t) => t.status === 'failed' && JSON.stringify(t).includes('STALE_LEASE')).length);
  observed.set('checkpoints failed', [...checkpoints.values()].filter((c) => c.status === 'failed').length);
  observed.set('checkpoints ready', [...checkpoints.values()].filter((c) => c.status === 'ready').length);
}

/**
 * The ready checkpoints of a workspace form one line ending at its head (a writer that lost
 * the swap never made a ready checkpoint beside the winner's), and the completed turns'
 * checkpoints lie on it in turn order.
 */
function checkChain(
  runId: string,
  workspaceId: string,
  head: string | null,
  checkpoints: Map<string, CheckpointRow>,
  completed: TurnRow[],
  check: Check,
): void {
  const ready = [...checkpoints.values()].filter((c) => c.workspace_id === workspaceId && c.status === 'ready');
  const chain: string[] = [];
  for (let at = head; at !== null; at = checkpoints.get(at)?.parent_id ?? null) {
    if (chain.includes(at)) break;
    chain.push(at);
  }
  chain.reverse();
  const onChain = new Set(chain);
  check(
    'ready checkpoints form one line ending at the head',
    ready.every((c) => onChain.has(c.id)) && chain.every((id) => checkpoints.get(id)?.status === 'ready'),
    () =>
      `run ${runId}: ${ready
        .filter((c) => !onChain.has(c.id))
        .map((c) => c.id)
        .join(',')} off the head's line`,
  );
  const positions = completed.map((t) => chain.indexOf(t.checkpoint_id ?? ''));
  check(
    'completed turns are on the head line, in order',
    positions.every((p, i) => p >= 0 && (i === 0 || p > (positions[i - 1] ?? -1))),
    () => `run ${runId}: positions ${positions.join(',')}`,
  );
}

async function checkProgress(client: pg.Client, record: DriverRecord, check: Check, observed: Map<string, number>): Promise<void> {
  const runs = new Map(
    (
      await client.query<{ id: string; lease_state: string; lease_error: string | null }>('SELECT id, lease_state, lease_error FROM runs')
    ).rows.map((r) => [r.id, r]),
  );
  let resolution = 0;
  for (const runId of record.runIds) {
    const failure = record.finalFailures.find((f) => f.runId === runId);
    const row = runs.get(runId);
    const explained = row?.lease_state === 'release_recovery_required' && row.lease_error !== null;
    if (failure !== undefined && explained) resolution += 1;
    check(
      'every run progresses once faults stop (or says release_recovery_required and why)',
      failure === undefined || explained,
      () => `run ${runId}: final turn ${failure?.status} ${failure?.code}, lease ${JSON.stringify(row)}`,
    );
  }
  observed.set('runs left release_recovery_required', resolution);
  observed.set(
    'of those, runs whose turn succeeded after lease resolve',
    record.finalFailures.filter((f) => f.afterResolve?.endsWith('then turn 200') === true).length,
  );
}

/** Every acknowledged checkpoint restores, byte for byte, to the files its turn left. */
async function checkRestores(inputs: CheckInputs, check: Check): Promise<void> {
  const hf = await openHoldfast({ meta: inputs.dbUrl, blobs: inputs.blobs, cacheDir: path.join(inputs.scratchDir, 'cache') });
  try {
    for (const [i, ack] of inputs.record.acked.entries()) {
      if (ack.manifest === undefined) {
        check('acknowledged turn printed its manifest', false, () => `run ${ack.runId} seq ${ack.seq}`);
        continue;
      }
      const dir = path.join(inputs.scratchDir, `restore-${i}`);
      let files: Map<string, string> | string;
      try {
        await hf.snapshots.restore({ dir, checkpoint: ack.checkpointId });
        files = hashTree(dir);
      } catch (error) {
        files = String(error);
      }
      fs.rmSync(dir, { recursive: true, force: true });
      const expected = ack.manifest;
      check(
        'acknowledged checkpoint restores byte for byte to its manifest',
        typeof files !== 'string' && sameMap(files, expected),
        () => `run ${ack.runId} seq ${ack.seq} ${ack.checkpointId}: ${typeof files === 'string' ? files : diff(files, expected)}`,
      );
    }
  } finally {
    await hf.close();
  }
}

function hashTree(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile())
        out.set(
          child,
          createHash('sha256')
            .update(fs.readFileSync(path.join(root, child)))
            .digest('hex'),
        );
    }
  };
  walk('');
  return out;
}

function sameMap(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

function diff(actual: ReadonlyMap<string, string>, expected: ReadonlyMap<string, string>): string {
  const keys = new Set([...actual.keys(), ...expected.keys()]);
  return [...keys]
    .filter((k) => actual.get(k) !== expected.get(k))
    .map((k) => `${k}: restored ${actual.get(k)?.slice(0, 12) ?? 'none'} expected ${expected.get(k)?.slice(0, 12) ?? 'none'}`)
    .join('; ');
}

/**
 * Work folders, last write wins and no stale overwrite: each run's own file holds that run's
 * last acknowledged write or a later one; each HTTP-written file (which sandboxes hold copies
 * of but never write) holds the last acknowledged PUT or a later one; the shared file holds
 * something some run wrote.
 */
async function checkFolders(inputs: CheckInputs, check: Check): Promise<void> {
  const { record } = inputs;
  for (const runId of record.runIds) {
    const writes = record.runFileWrites.get(runId) ?? [];
    const lastAcked = writes.map((w, i) => (w.acked ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
    if (lastAcked < 0) continue;
    const allowed = new Set(writes.slice(lastAcked).map((w) => `${runId} ${w.n}`));
    const content = await inputs.readFolderFile(`runs/${runId}.txt`);
    check(
      "a run's acknowledged folder write is visible (or a later one of its own)",
      content !== undefined && allowed.has(content),
      () => `runs/${runId}.txt holds ${JSON.stringify(content)}, allowed ${[...allowed].join(' | ')}`,
    );
  }
  for (let key = 0; key < HTTP_KEYS; key += 1) {
    const writes = record.folderWrites.filter((w) => w.path === `http/${key}.txt`);
    const lastAcked = writes.map((w, i) => (w.acked ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
    if (lastAcked < 0) continue;
    const allowed = new Set(writes.slice(lastAcked).map((w) => w.content));
    const content = await inputs.readFolderFile(`http/${key}.txt`);
    check(
      'an acknowledged HTTP folder write is never overwritten by a stale sandbox copy',
      content !== undefined && allowed.has(content),
      () => `http/${key}.txt holds ${JSON.stringify(content)}, allowed ${[...allowed].join(' | ')}`,
    );
  }
  const everWritten = new Set([...record.runFileWrites].flatMap(([runId, writes]) => writes.map((w) => `${runId} ${w.n}`)));
  const shared = await inputs.readFolderFile('shared.txt');
  check(
    'the shared file holds a value some run wrote',
    shared !== undefined && everWritten.has(shared),
    () => `shared.txt holds ${JSON.stringify(shared)}`,
  );
}
