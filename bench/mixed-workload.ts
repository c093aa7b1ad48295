/**
 * Workload M of the snapshot benchmark: files that are part incompressible, part text, the case
 * where compressing a whole pack or file at one setting goes wrong both ways. Full scale: 100
 * files of 1 MiB, each 128 KiB of random bytes followed by 896 KiB of log-like text, plus one
 * 100 MiB file of the same pattern (`big/dataset.bin`) that the warm-restore-after-a-4-KiB-edit
 * measurement edits in place.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { Rng } from './code-text.js';
import { forEachLimit, generateWorkloadB, randomBytesFrom, type Scale, type WorkspaceManifest } from './workspace-gen.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Random head and text tail of one 1 MiB unit. */
const RANDOM_BYTES = 128 * KiB;
const TEXT_BYTES = 896 * KiB;
/** Bytes overwritten by {@link editBigFile}, and the alignment of where. */
export const BIG_EDIT_BYTES = 4 * KiB;
const WRITE_CONCURRENCY = 8;

const M_SHAPE = { full: { files: 100, bigMiB: 100 }, small: { files: 10, bigMiB: 10 } } as const;
/** The large file's path inside the workspace. */
export const BIG_FILE = 'big/dataset.bin';

const LEVELS = ['INFO', 'INFO', 'INFO', 'DEBUG', 'WARN', 'ERROR'];
const ROUTES = ['/api/runs', '/api/checkpoints', '/api/workspaces', '/healthz', '/api/sandboxes/exec', '/metrics'];
const SERVICES = ['gateway', 'scheduler', 'worker-1', 'worker-2', 'indexer', 'uploader'];

/** `bytes` of log-like text: timestamped lines with levels, services, routes, ids and timings. */
function logText(rng: Rng, bytes: number): Buffer {
  const lines: string[] = [];
  let length = 0;
  let clock = Date.UTC(2024, 4, 1) + rng.int(0, 86_400_000);
  while (length < bytes) {
    clock += rng.int(0, 250);
    const id = rng.next().toString(16).padStart(8, '0');
    const line =
      `${new Date(clock).toISOString()} ${rng.pick(LEVELS)} [${rng.pick(SERVICES)}] req=${id} ` +
      `${rng.pick(['GET', 'POST', 'PUT'])} ${rng.pick(ROUTES)}/${rng.int(1, 5000)} status=${rng.pick([200, 200, 200, 201, 204, 404, 409, 500])} ` +
      `ms=${rng.logInt(1, 4000)} bytes=${rng.logInt(10, 2_000_000)}\n`;
    lines.push(line);
    length += line.length;
  }
  return Buffer.from(lines.join('')).subarray(0, bytes);
}

/** One 1 MiB unit: random head, text tail. */
function mixedUnit(rng: Rng): Buffer {
  return Buffer.concat([randomBytesFrom(rng.fork('random'), RANDOM_BYTES)(), logText(rng.fork('text'), TEXT_BYTES)]);
}

/** Generates workload M under `root` (see the file header). */
export async function generateWorkloadM(root: string, seed: number, scale: Scale): Promise<WorkspaceManifest> {
  const shape = M_SHAPE[scale];
  const rng = new Rng(seed).fork('workload-m');
  await fs.mkdir(path.join(root, 'logs'), { recursive: true });
  await fs.mkdir(path.join(root, path.dirname(BIG_FILE)), { recursive: true });
  const rels = Array.from({ length: shape.files }, (_, i) => `logs/shard-${String(i).padStart(3, '0')}.log`);
  await forEachLimit(rels, WRITE_CONCURRENCY, (rel) => fs.writeFile(path.join(root, rel), mixedUnit(rng.fork(rel))));
  await writeMixedLog(path.join(root, BIG_FILE), rng, shape.bigMiB);
  return {
    name: 'M',
    root,
    files: rels.length + 1,
    bytes: (rels.length + shape.bigMiB) * MiB,
    dirs: 2,
    maxDepth: 1,
    duplicateFiles: 0,
    binaryBytes: (rels.length + shape.bigMiB) * RANDOM_BYTES,
    largeBinaryBytes: [],
    editable: [],
    bigFile: BIG_FILE,
  };
}

/** Writes `mib` 1 MiB mixed units (random head, text tail) to `file`. */
async function writeMixedLog(file: string, rng: Rng, mib: number): Promise<void> {
  const big = await fs.open(file, 'w');
  try {
    for (let i = 0; i < mib; i += 1) await big.write(mixedUnit(rng.fork(`big-${i}`)));
  } finally {
    await big.close();
  }
}

/** Tiny files of workload T: workload B's, less this many, so the log fits under the 100,000-entry limit. */
const T_FEWER_TINY_FILES = 1000;
/** Workload T's log, in MiB, at each scale. */
const T_LOG_MIB = { full: 100, small: 10 } as const;

/**
 * Workload T: the tiny files of workload B (99k at full scale, in 2k directories) next to one
 * large mixed-entropy log (`big/dataset.bin`, 100 MiB of M's units). The case where a store
 * that packs tiny files well can still lose on its index and on the log's compression.
 */
export async function generateWorkloadT(root: string, seed: number, scale: Scale): Promise<WorkspaceManifest> {
  const tinyFiles = (scale === 'full' ? 100_000 : 10_000) - T_FEWER_TINY_FILES;
  const tiny = await generateWorkloadB(root, seed, scale, tinyFiles);
  await fs.mkdir(path.join(root, path.dirname(BIG_FILE)), { recursive: true });
  await writeMixedLog(path.join(root, BIG_FILE), new Rng(seed).fork('workload-t'), T_LOG_MIB[scale]);
  return {
    ...tiny,
    name: 'T',
    files: tiny.files + 1,
    bytes: tiny.bytes + T_LOG_MIB[scale] * MiB,
    dirs: tiny.dirs + 1,
    binaryBytes: T_LOG_MIB[scale] * RANDOM_BYTES,
    bigFile: BIG_FILE,
  };
}

/**
 * Overwrites {@link BIG_EDIT_BYTES} bytes in the middle region of the big file with new random
 * bytes, at a 4 KiB-aligned offset that differs per `run`; size is unchanged, mtime moves.
 */
export async function editBigFile(manifest: WorkspaceManifest, run: number): Promise<void> {
  if (manifest.bigFile === undefined) throw new Error(`workload ${manifest.name} has no big file to edit`);
  const file = path.join(manifest.root, manifest.bigFile);
  const { size } = await fs.stat(file);
  const rng = new Rng(`big-edit:${run}`);
  const blocks = Math.floor(size / BIG_EDIT_BYTES);
  const at = rng.int(Math.floor(blocks / 4), Math.floor((blocks * 3) / 4)) * BIG_EDIT_BYTES;
  const handle = await fs.open(file, 'r+');
  try {
    await handle.write(randomBytesFrom(rng, BIG_EDIT_BYTES)(), 0, BIG_EDIT_BYTES, at);
  } finally {
    await handle.close();
  }
}
