import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Fleet } from './fleet.js';
import { type Answer, call, NO_ANSWER } from './http.js';
import type { SeededRandom } from './rng.js';

const run = promisify(execFile);

/** The project collection every run is bound to. */
export const PROJECT = 'soak-project';
/** What the bundle of the soak's deployment holds at `bundle.txt`. */
export const BUNDLE_TEXT = 'soak bundle v1\n';
const MANIFEST_MARK = '---manifest---';
const REPO_MARK = '---repo---';
/** One run in this many binds the git repository. */
const REPO_RUN_EVERY = 4;
const BUNDLE_MARK = '---bundle---';
/** A turn's request may wait this long (its predecessor's lease, the turn, its save). */
const TURN_TIMEOUT_MS = 120_000;
const SETUP_ATTEMPTS = 10;
/** Keys the driver writes over HTTP and no sandbox ever writes: a stale copy must never win. */
export const HTTP_KEYS = 6;

/** A turn the service acknowledged (200), with what its command left in the workspace. */
export interface AckedTurn {
  readonly runId: string;
  readonly seq: number;
  readonly turnId: string;
  readonly checkpointId: string;
  readonly epoch: number | undefined;
  /** Path -> SHA-256 of every file the workspace held when the command ended; undefined if it printed none. */
  readonly manifest: ReadonlyMap<string, string> | undefined;
  readonly bundleText: string | undefined;
  /** Commits in the run's repository checkout after this turn's own commit; undefined for runs without one. */
  readonly repoCommits: number | undefined;
  readonly final: boolean;
}

/** One work-folder write by the driver, with whether it was acknowledged. */
export interface FolderWrite {
  readonly path: string;
  readonly content: string;
  readonly acked: boolean;
}

/** Everything the driver sent and what was acknowledged: the checker's half of the history. */
export interface DriverRecord {
  readonly runIds: string[];
  /** Runs bound to the soak's git repository (checked out at `$HOME/repos/app`). */
  readonly repoRuns: Set<string>;
  readonly acked: AckedTurn[];
  /** Turn attempts not acknowledged, by answer (`status:code`). */
  readonly unacked: Map<string, number>;
  /** Per run: the turn numbers (the driver's own count) whose command wrote runs/<run>.txt, acknowledged or not. */
  readonly runFileWrites: Map<string, { n: number; acked: boolean }[]>;
  readonly folderWrites: FolderWrite[];
  /** Runs whose final fault-free turn did not succeed: why, from the run's lease. */
  readonly finalFailures: { runId: string; status: number; code: string; lease: unknown; afterResolve: string | undefined }[];
  turnsAttempted: number;
}

export function emptyRecord(): DriverRecord {
  return {
    runIds: [],
    repoRuns: new Set(),
    acked: [],
    unacked: new Map(),
    runFileWrites: new Map(),
    folderWrites: [],
    finalFailures: [],
    turnsAttempted: 0,
  };
}

/** Captures the bundle and creates the bwrap deployment and `runs` runs bound to the project folder. */
export async function setUp(fleet: Fleet, random: SeededRandom, runs: number, record: DriverRecord, repoUrl: string): Promise<void> {
  const bundleDir = path.join(fleet.dir, 'bundle');
  fs.mkdirSync(bundleDir, { recursive: true });
  fs.writeFileSync(path.join(bundleDir, 'bundle.txt'), BUNDLE_TEXT);
  const tar = (await run('tar', ['-cf', '-', '-C', bundleDir, '.'], { encoding: 'buffer' })).stdout;
  const bundle = await retry(() =>
    call(fleet, random, 'POST', '/v1/bundles', { raw: { body: tar, type: 'application/x-tar' }, timeoutMs: 60_000 }),
  );
  const deployment = await retry(() =>
    call(fleet, random, 'POST', '/v1/deployments', { json: { provider: 'bwrap', bundle: bundle.body }, timeoutMs: 60_000 }),
  );
  for (let i = 0; i < runs; i += 1) {
    // Every REPO_RUN_EVERY-th run also binds the repository (a clone per new sandbox costs time).
    const repo = i % REPO_RUN_EVERY === 0;
    const bindings = { project: PROJECT, ...(repo ? { repos: [{ url: repoUrl, name: 'app' }] } : {}) };
    const created = await retry(() =>
      call(fleet, random, 'POST', '/v1/runs', { json: { deploymentId: deployment.body.id, bindings }, timeoutMs: 60_000 }),
    );
    record.runIds.push(created.body.id as string);
    if (repo) record.repoRuns.add(created.body.id as string);
    record.runFileWrites.set(created.body.id as string, []);
  }
}

async function retry(send: () => Promise<Answer>): Promise<Answer> {
  let last: Answer | undefined;
  for (let attempt = 0; attempt < SETUP_ATTEMPTS; attempt += 1) {
    last = await send();
    if (last.status >= 200 && last.status < 300) return last;
    await sleep(500);
  }
  throw new Error(`setup request kept failing: ${last?.status} ${JSON.stringify(last?.body)}`);
}

/** The shell command of a run's n-th turn: files in the workspace, a write to the project folder, a manifest. */
export function turnScript(runId: string, n: number, random: SeededRandom, repo: boolean): string {
  const lines = [
    'set -e',
    'mkdir -p src',
    `printf '%s\\n' '${runId} ${n} ${random.int(0, 1e9)}' > src/f-${n}.txt`,
    `printf '%s\\n' '${runId} ${n}' >> log.txt`,
  ];
  if (random.chance(0.3)) lines.push(`head -c ${random.int(1, 400) * 1024} /dev/urandom > blob.bin`);
  if (n > 2 && random.chance(0.4)) lines.push(`rm -f src/f-${n - 2}.txt`);
  lines.push(
    'mkdir -p "$HOLDFAST_PROJECT_DIR/runs"',
    `printf '%s' '${runId} ${n}' > "$HOLDFAST_PROJECT_DIR/runs/${runId}.txt"`,
    `printf '%s' '${runId} ${n}' > "$HOLDFAST_PROJECT_DIR/shared.txt"`,
    ...(repo
      ? [
          `printf '%s\\n' '${runId} ${n}' >> "$HOLDFAST_REPOS_DIR/app/turns.txt"`,
          `git -C "$HOLDFAST_REPOS_DIR/app" add turns.txt`,
          `git -C "$HOLDFAST_REPOS_DIR/app" -c user.name=soak -c user.email=soak@127.0.0.1 commit -q -m 'turn ${n}'`,
          `echo ${REPO_MARK}`,
          `git -C "$HOLDFAST_REPOS_DIR/app" rev-list --count HEAD`,
        ]
      : []),
    `echo ${BUNDLE_MARK}`,
    'cat "$HOME/.deployment/bundle.txt"',
    `echo ${MANIFEST_MARK}`,
    'find . -type f -print0 | sort -z | xargs -0 sha256sum',
  );
  return lines.join('\n');
}

/** Runs one turn; records its acknowledgement (and manifest) or why it was not acknowledged. */
export async function turn(
  fleet: Fleet,
  random: SeededRandom,
  record: DriverRecord,
  runId: string,
  n: number,
  final: boolean,
): Promise<Answer> {
  record.turnsAttempted += 1;
  const script = turnScript(runId, n, random, record.repoRuns.has(runId));
  record.runFileWrites.get(runId)?.push({ n, acked: false });
  const answer = await call(fleet, random, 'POST', `/v1/runs/${runId}/turns`, {
    json: { argv: ['sh', '-c', script], waitMs: 30_000, timeoutMs: 60_000 },
    timeoutMs: TURN_TIMEOUT_MS,
  });
  if (answer.status !== 200) {
    const key = `${answer.status === NO_ANSWER ? 'no answer' : answer.status}:${answer.body?.error?.code ?? '?'}`;
    record.unacked.set(key, (record.unacked.get(key) ?? 0) + 1);
    return answer;
  }
  const writes = record.runFileWrites.get(runId) ?? [];
  const last = writes.at(-1);
  if (last !== undefined) writes[writes.length - 1] = { n: last.n, acked: true };
  const stdout = String(answer.body.stdout ?? '');
  record.acked.push({
    runId,
    seq: answer.body.turn.seq as number,
    turnId: answer.body.turn.id as string,
    checkpointId: answer.body.checkpoint.id as string,
    epoch: answer.body.turn.epoch as number | undefined,
    manifest: parseManifest(stdout),
    bundleText: between(stdout, BUNDLE_MARK, MANIFEST_MARK),
    repoCommits: record.repoRuns.has(runId) ? Number(between(stdout, REPO_MARK, BUNDLE_MARK)?.trim() ?? Number.NaN) : undefined,
    final,
  });
  return answer;
}

function between(text: string, start: string, end: string): string | undefined {
  const a = text.indexOf(`${start}\n`);
  const b = text.indexOf(`${end}\n`);
  if (a < 0 || b < a) return undefined;
  return text.slice(a + start.length + 1, b);
}

function parseManifest(stdout: string): Map<string, string> | undefined {
  const at = stdout.indexOf(`${MANIFEST_MARK}\n`);
  if (at < 0) return undefined;
  const manifest = new Map<string, string>();
  for (const line of stdout.slice(at + MANIFEST_MARK.length + 1).split('\n')) {
    const match = /^([0-9a-f]{64}) {2}\.\/(.+)$/.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) manifest.set(match[2], match[1]);
  }
  return manifest;
}

/** Writes `http/<k>.txt` in the project folder over HTTP until `until()` says stop; one write at a time. */
export async function folderWriter(fleet: Fleet, random: SeededRandom, record: DriverRecord, until: () => boolean): Promise<void> {
  for (let i = 0; !until(); i += 1) {
    const key = random.int(0, HTTP_KEYS - 1);
    const filePath = `http/${key}.txt`;
    const content = `http ${key} ${i} ${random.int(0, 1e9)}`;
    const answer = await putFolderFile(fleet, random, filePath, content);
    record.folderWrites.push({ path: filePath, content, acked: answer.status === 200 });
    await sleep(random.int(100, 800));
  }
}

/** PUT of one project-folder file with a fresh operation id. */
export function putFolderFile(fleet: Fleet, random: SeededRandom, filePath: string, content: string): Promise<Answer> {
  return call(fleet, random, 'PUT', `/api/companies/default/work-folders/project/${PROJECT}/content?path=${encodeURIComponent(filePath)}`, {
    raw: { body: Buffer.from(content), type: 'application/octet-stream', headers: { 'idempotency-key': randomUUID() } },
    timeoutMs: 60_000,
  });
}
