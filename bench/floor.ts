/**
 * The floor of a workload on this machine: what one process needs just to walk the tree, read
 * its bytes, SHA-256 them and zstd -3 them, each stage timed on its own. A goal that a tool
 * misses by less than the floor allows can be closed; one below the floor cannot, short of doing
 * less work (not reading unchanged files) or more cores.
 *
 * One pass in sorted order, warm page cache (like every measured tool, the tree was just written
 * or copied). Each file is hashed on its own (a content-addressed store names every file);
 * compression runs over 1 MiB batches of concatenated file bytes, as a pack writer would, so tiny
 * files are not charged zstd's per-call overhead. The pass also counts exact duplicate files.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const zstd = createRequire(import.meta.url)('zstd-napi') as { compress(input: Uint8Array, options: { compressionLevel: number }): Buffer };

/** Bytes handed to zstd per call. */
const ZSTD_BATCH_BYTES = 1024 * 1024;
const ZSTD_LEVEL = 3;

/** Per-stage cost of a tree. */
export interface FloorResult {
  readonly files: number;
  readonly bytes: number;
  /** readdir + lstat of every entry: what a no-change checkpoint cannot avoid. */
  readonly walkMs: number;
  /** open + read + close of every file. */
  readonly readMs: number;
  readonly sha256Ms: number;
  readonly zstdMs: number;
  readonly zstdBytes: number;
  /** Files whose bytes equal an earlier file's. */
  readonly duplicateFiles: number;
}

/** MB/s of `bytes` in `ms` (10^6 bytes per second). */
export function mbPerSecond(bytes: number, ms: number): number {
  return ms <= 0 ? Number.POSITIVE_INFINITY : bytes / 1e3 / ms;
}

/** Floor of a full checkpoint on one core: walk, read, hash and compress one after another. */
export function serialFloorMs(f: FloorResult): number {
  return f.walkMs + f.readMs + f.sha256Ms + f.zstdMs;
}

/** Floor with the stages spread perfectly over `cores` (reading stays one stream). */
export function parallelFloorMs(f: FloorResult, cores: number): number {
  return Math.max(f.walkMs + f.readMs, (f.sha256Ms + f.zstdMs) / Math.max(1, cores));
}

/** Measures the floor of the tree at `root` (symlinks are not followed). */
export function measureFloor(root: string): FloorResult {
  const started = performance.now();
  const files = listFiles(root);
  const walkMs = performance.now() - started;
  let readMs = 0;
  let sha256Ms = 0;
  let zstdMs = 0;
  let zstdBytes = 0;
  let bytes = 0;
  const seen = new Set<string>();
  let duplicateFiles = 0;
  let batch: Buffer[] = [];
  let batchBytes = 0;
  const flush = () => {
    if (batchBytes === 0) return;
    const input = batch.length === 1 ? (batch[0] as Buffer) : Buffer.concat(batch, batchBytes);
    const t = performance.now();
    zstdBytes += zstd.compress(input, { compressionLevel: ZSTD_LEVEL }).length;
    zstdMs += performance.now() - t;
    batch = [];
    batchBytes = 0;
  };
  for (const file of files) {
    const t0 = performance.now();
    const content = fs.readFileSync(file);
    const t1 = performance.now();
    const digest = createHash('sha256').update(content).digest('hex');
    sha256Ms += performance.now() - t1;
    readMs += t1 - t0;
    bytes += content.length;
    if (seen.has(digest)) duplicateFiles += 1;
    else seen.add(digest);
    for (let at = 0; at < content.length; ) {
      const take = Math.min(content.length - at, ZSTD_BATCH_BYTES - batchBytes);
      batch.push(content.subarray(at, at + take));
      batchBytes += take;
      at += take;
      if (batchBytes >= ZSTD_BATCH_BYTES) flush();
    }
  }
  flush();
  return { files: files.length, bytes, walkMs, readMs, sha256Ms, zstdMs, zstdBytes, duplicateFiles };
}

/** Regular files below `root`, sorted per directory; each entry is `lstat`ed, as a scan does. */
function listFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const st = fs.lstatSync(full);
      if (st.isDirectory()) walk(full);
      else if (st.isFile()) out.push(full);
    }
  };
  walk(root);
  return out;
}
