/**
 * Holdfast in the snapshot benchmark, driven through its built CLI (`node dist/bin/main.js`, the bundled `holdfast` bin) as a
 * child process exactly like the reference tools. The contract relied on:
 *
 * - `holdfast --store DIR init --json` creates the store (not timed, like `restic init`);
 * - `holdfast --store DIR checkpoint <dir> --workspace <name> --json` prints one JSON object with
 *   at least `{ id, stats: { files, bytes, newBytes, objectsWritten, packsWritten, blobWrites,
 *   durationMs, excluded } }`;
 * - `holdfast --store DIR restore <target> --workspace <name> [--replace] --json` restores the
 *   workspace's latest checkpoint into `target`, which must not exist (or, with `--replace`,
 *   replaces the tree there), and prints a receipt with `bytesFetched` and `filesReused`;
 * - `--no-cache-excludes` on checkpoint keeps dependency trees (`node_modules/`), so Holdfast
 *   stores the same bytes as the reference tools on the npm workloads;
 * - without `--store`, `HOLDFAST_META` / `HOLDFAST_BLOBS` (+ `AWS_*`) select SQLite + S3;
 * - `HOLDFAST_CACHE_DIR` moves the stat cache (default `~/.cache/holdfast`): each repository gets
 *   its own beside the store, like restic's `--cache-dir`, and it is not counted in the store size.
 *
 * The exclusion list is read from `excluded` at the top level of the JSON or from `stats.excluded`.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3TestServer } from '../test/support/s3-server.js';
import { type Command, runMeasured, runQuiet } from './process-runner.js';
import type { CheckpointMeasured, RestoreMeasured, SnapshotTool, ToolRepo } from './snapshot-tool.js';

/** The built CLI, relative to this file. */
export const HOLDFAST_CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/bin/main.js');

const QUIET_ENV = { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
/** Checkpoint flags: every tool stores the same bytes, node_modules/ included. */
const CHECKPOINT_FLAGS = ['--no-cache-excludes', '--json'];

/** The part of `checkpoint --json` output the benchmark reads. */
interface CheckpointJson {
  readonly id: string;
  readonly stats: {
    readonly files: number;
    readonly bytes: number;
    readonly blobWrites?: number;
    readonly packsWritten?: number;
  };
  readonly excluded: readonly unknown[];
}

/** Holdfast with `--store DIR` (SQLite + local-disk blobs under DIR); store size = DIR. */
export function holdfastLocalTool(cli = HOLDFAST_CLI): SnapshotTool {
  return {
    id: 'holdfast',
    label: 'holdfast',
    incremental: true,
    preflight: () => preflightCli(cli),
    async open(dir, workspace) {
      const store = path.join(dir, 'store');
      const base = [process.execPath, cli, '--store', store];
      const env = { ...QUIET_ENV, HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      await runQuiet({ argv: [...base, 'init', '--json'], env });
      return {
        storeDir: store,
        checkpoint: (source) => checkpoint({ argv: [...base, 'checkpoint', source, '--workspace', workspace, ...CHECKPOINT_FLAGS], env }),
        restore: (target) => restore({ argv: [...base, 'restore', target, '--workspace', workspace, '--json'], env }),
        warmRestore: (target) => restore({ argv: [...base, 'restore', target, '--workspace', workspace, '--replace', '--json'], env }),
      } satisfies ToolRepo;
    },
    async close() {},
  };
}

/**
 * Holdfast with SQLite metadata and S3 blobs on an s3rver started in the benchmark process (the
 * test harness's `startS3Server`). Measured for checkpoints only; it exists to count blob-store
 * writes per incremental checkpoint, both as reported (`stats.blobWrites`) and as seen by the
 * server (PUT + POST requests during the command).
 */
export function holdfastS3Tool(cli = HOLDFAST_CLI): SnapshotTool {
  let server: S3TestServer | undefined;
  let repos = 0;
  return {
    id: 'holdfast-s3',
    label: 'hf (S3)',
    incremental: true,
    async preflight() {
      const version = await preflightCli(cli);
      // Loaded only when asked for, so a reference-only run never compiles src/ or loads the AWS SDK.
      const { startS3Server } = await import('../test/support/s3-server.js');
      server ??= await startS3Server({ bucket: 'holdfast-bench' });
      return `${version}, s3rver at ${server.endpoint}`;
    },
    async open(dir, workspace) {
      const s3 = server;
      if (s3 === undefined) throw new Error('holdfast-s3: preflight() must run before open()');
      repos += 1;
      const query = `endpoint=${encodeURIComponent(s3.endpoint)}&region=${s3.region}&forcePathStyle=true`;
      const env = {
        ...QUIET_ENV,
        HOLDFAST_CACHE_DIR: path.join(dir, 'cache'),
        HOLDFAST_META: `sqlite:${path.join(dir, 'meta.db')}`,
        HOLDFAST_BLOBS: `s3://${s3.bucket}/bench-${process.pid}-${repos}?${query}`,
        AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
        AWS_REGION: s3.region,
      };
      const base = [process.execPath, cli];
      await runQuiet({ argv: [...base, 'init', '--json'], env });
      const writes = () => s3.faults.requests.filter((r) => r.method === 'PUT' || r.method === 'POST').length;
      return {
        async checkpoint(source) {
          const before = writes();
          const measured = await checkpoint({ argv: [...base, 'checkpoint', source, '--workspace', workspace, ...CHECKPOINT_FLAGS], env });
          return { ...measured, s3WriteRequests: writes() - before };
        },
      } satisfies ToolRepo;
    },
    async close() {
      await server?.close();
      server = undefined;
    },
  };
}

/** Throws a message saying what to do when the CLI is not built or lacks the commands used here. */
async function preflightCli(cli: string): Promise<string> {
  const skip = 'or leave Holdfast out with --only restic,git,tar';
  if (!existsSync(cli)) throw new Error(`Holdfast CLI not found at ${cli}: run \`npm run build\` first, ${skip}`);
  const help = await runQuiet({ argv: [process.execPath, cli, '--help'], env: QUIET_ENV });
  const missing = ['init', 'checkpoint', 'restore'].filter((name) => !new RegExp(`^\\s+${name}\\b`, 'm').test(help));
  if (missing.length > 0) {
    throw new Error(
      `the Holdfast CLI at ${cli} has no ${missing.join(' / ')} command yet: rebuild with \`npm run build\` once it lands, ${skip}`,
    );
  }
  const version = (await runQuiet({ argv: [process.execPath, cli, '--version'], env: QUIET_ENV })).trim();
  return `holdfast ${version} (node ${cli})`;
}

async function checkpoint(command: Command): Promise<CheckpointMeasured> {
  const measured = await runMeasured(command);
  const json = parseCheckpointJson(measured.stdout);
  const blobWrites = json.stats.blobWrites ?? json.stats.packsWritten;
  return {
    ...measured,
    files: json.stats.files,
    bytes: json.stats.bytes,
    ...(blobWrites === undefined ? {} : { blobWrites }),
    excluded: json.excluded.map(describeExclusion),
    excludedPaths: json.excluded.flatMap((e) => {
      const where = typeof e === 'string' ? e : (e as { path?: unknown } | null)?.path;
      return typeof where === 'string' ? [where] : [];
    }),
  };
}

/** Runs a restore and reads `bytesFetched` / `filesReused` from its receipt when present. */
async function restore(command: Command): Promise<RestoreMeasured> {
  const measured = await runMeasured(command);
  const start = measured.stdout.search(/^\{/m);
  let receipt: { bytesFetched?: unknown; filesReused?: unknown } | null;
  try {
    receipt = JSON.parse(start <= 0 ? measured.stdout : measured.stdout.slice(start)) as {
      bytesFetched?: unknown;
      filesReused?: unknown;
    } | null;
  } catch {
    throw new Error(`holdfast restore --json printed no JSON object; stdout began: ${measured.stdout.slice(0, 300)}`);
  }
  return {
    ...measured,
    ...(typeof receipt?.bytesFetched === 'number' ? { bytesFetched: receipt.bytesFetched } : {}),
    ...(typeof receipt?.filesReused === 'number' ? { filesReused: receipt.filesReused } : {}),
  };
}

/** Reads the checkpoint JSON (the whole of stdout, or from its first line that opens an object). */
function parseCheckpointJson(stdout: string): CheckpointJson {
  const start = stdout.search(/^\{/m);
  let value: unknown;
  try {
    value = JSON.parse(start <= 0 ? stdout : stdout.slice(start));
  } catch {
    throw new Error(`holdfast checkpoint --json printed no JSON object; stdout began: ${stdout.slice(0, 300)}`);
  }
  const stats = (value as { stats?: Record<string, unknown> } | null)?.stats;
  const id = (value as { id?: unknown } | null)?.id;
  if (typeof id !== 'string' || typeof stats?.files !== 'number' || typeof stats.bytes !== 'number') {
    throw new Error(`holdfast checkpoint --json must print { id, stats: { files, bytes, … } }; got: ${stdout.slice(0, 300)}`);
  }
  const numberOrUndefined = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const blobWrites = numberOrUndefined(stats.blobWrites);
  const packsWritten = numberOrUndefined(stats.packsWritten);
  return {
    id,
    stats: {
      files: stats.files,
      bytes: stats.bytes,
      ...(blobWrites === undefined ? {} : { blobWrites }),
      ...(packsWritten === undefined ? {} : { packsWritten }),
    },
    excluded: [(value as { excluded?: unknown }).excluded, stats.excluded].find(Array.isArray) ?? [],
  };
}

/** `path (reason)` for Holdfast's `{ path, reason, rule }` exclusions; other shapes as JSON. */
function describeExclusion(entry: unknown): string {
  if (typeof entry === 'string') return entry;
  const { path: where, reason } = (entry ?? {}) as { path?: unknown; reason?: unknown };
  return typeof where === 'string' ? `${where} (${String(reason)})` : JSON.stringify(entry);
}
