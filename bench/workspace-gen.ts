/**
 * Deterministic workspaces for the snapshot benchmark. Same seed and scale, same bytes, same
 * paths. Generation is never timed. See {@link generateWorkloadA} and {@link generateWorkloadB}.
 */
import { createCipheriv } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { CodeTextGenerator, Rng, WORDS } from './code-text.js';

/** `full` is the real benchmark; `small` is about ten times smaller, for a quick smoke run. */
export type Scale = 'full' | 'small';

/**
 * The workloads: A and B generated here, N and K real npm trees, M mixed random + text, T tiny
 * files beside one large mixed-entropy log (mixed-workload.ts).
 */
export type WorkloadName = 'A' | 'B' | 'N' | 'K' | 'M' | 'T';

/** What was generated, for the report header and for checking restores. */
export interface WorkspaceManifest {
  readonly name: WorkloadName;
  readonly root: string;
  readonly files: number;
  readonly bytes: number;
  readonly dirs: number;
  /** Deepest directory, counted in path components below the root. */
  readonly maxDepth: number;
  /** Files whose bytes exactly equal an earlier file's. */
  readonly duplicateFiles: number;
  readonly binaryBytes: number;
  /** Sizes of the large random files, in bytes. */
  readonly largeBinaryBytes: readonly number[];
  /** Non-duplicate text files (relative paths) in a seeded order; {@link modifyFiles} walks it. */
  readonly editable: readonly string[];
  /** A large file that one measurement edits 4 KiB inside (workload M). */
  readonly bigFile?: string;
}

const MiB = 1024 * 1024;
/** Parallel file writes while generating. */
const WRITE_CONCURRENCY = 32;
/** Deepest source directory, counted in path components below the workspace root. */
const MAX_SRC_DEPTH = 8;
/** Share of workload A's files that are exact copies of other files. */
const DUPLICATE_SHARE = 0.1;

const A_SHAPE = {
  full: { srcFiles: 9000, srcDirs: 900, packages: 400, filesPerPackage: 20, smallBinaries: 1000, largeMiB: [6, 12, 24, 40] },
  small: { srcFiles: 900, srcDirs: 90, packages: 40, filesPerPackage: 20, smallBinaries: 100, largeMiB: [0.6, 1.2, 2.4, 4] },
} as const;
const B_SHAPE = { full: { files: 100_000, dirs: 2000 }, small: { files: 10_000, dirs: 200 } } as const;
const PACKAGE_DIRS = ['', 'lib', 'lib/internal', 'dist', 'dist/esm', 'types'];
const PACKAGE_EXTS = ['.js', '.js', '.cjs', '.d.ts', '.md', '.json'];
const SRC_EXTS = ['.ts', '.ts', '.ts', '.tsx', '.js', '.json', '.md'];
const BINARY_EXTS = ['.png', '.wasm', '.woff2', '.bin', '.jpg'];

interface PendingFile {
  readonly rel: string;
  readonly write: () => Buffer | string;
}

/**
 * Workload A (full scale): about 20k files and 300 MB. Source-like text (200 B-60 KB) in a tree up
 * to 8 levels deep; a node_modules-like tree named `vendor_modules/` (so no tool's default cache
 * excludes drop it); 10% exact duplicates (whole packages copied into nested `vendor_modules/`);
 * small random binaries (1-128 KB) and a few large ones (6-40 MB).
 */
export async function generateWorkloadA(root: string, seed: number, scale: Scale): Promise<WorkspaceManifest> {
  const shape = A_SHAPE[scale];
  const rng = new Rng(seed).fork('workload-a');
  const gen = new CodeTextGenerator(seed);
  const text = (r: Rng) => () => gen.text(r, r.logInt(200, 60_000));
  const files: PendingFile[] = [];
  const editable: string[] = [];

  const srcDirs = randomTree(rng.fork('src-tree'), 'src', shape.srcDirs, MAX_SRC_DEPTH);
  for (let i = 0; i < shape.srcFiles; i += 1) {
    const rel = `${rng.pick(srcDirs)}/${rng.pick(WORDS)}-${i}${rng.pick(SRC_EXTS)}`;
    files.push({ rel, write: text(rng.fork(rel)) });
    editable.push(rel);
  }
  const packages = Array.from({ length: shape.packages }, (_, i) => `${i % 7 === 0 ? `@${rng.pick(WORDS)}/` : ''}${rng.pick(WORDS)}-${i}`);
  const packageFiles = new Map<string, string[]>();
  for (const pkg of packages) {
    const list: string[] = [];
    for (let i = 0; i < shape.filesPerPackage; i += 1) {
      const dir = rng.pick(PACKAGE_DIRS);
      const rel = `vendor_modules/${pkg}/${dir === '' ? '' : `${dir}/`}${rng.pick(WORDS)}-${i}${rng.pick(PACKAGE_EXTS)}`;
      files.push({ rel, write: text(rng.fork(rel)) });
      list.push(rel);
      editable.push(rel);
    }
    packageFiles.set(pkg, list);
  }
  let binaryBytes = 0;
  for (let i = 0; i < shape.smallBinaries; i += 1) {
    const size = rng.logInt(1024, 128 * 1024);
    const rel = `assets/${rng.pick(WORDS)}-${i % 20}/${rng.pick(WORDS)}-${i}${rng.pick(BINARY_EXTS)}`;
    files.push({ rel, write: randomBytesFrom(rng.fork(rel), size) });
    binaryBytes += size;
  }
  const largeBinaryBytes = shape.largeMiB.map((mib) => Math.round(mib * MiB));
  largeBinaryBytes.forEach((size, i) => {
    files.push({ rel: `data/blob-${i}.bin`, write: randomBytesFrom(rng.fork(`large-${i}`), size) });
    binaryBytes += size;
  });

  const written = await writeAll(root, files);
  const duplicates = await copyPackages(
    root,
    rng.fork('duplicates'),
    packages,
    packageFiles,
    Math.round((files.length * DUPLICATE_SHARE) / (1 - DUPLICATE_SHARE)),
  );
  const dirs = new Set([...files.map((f) => path.posix.dirname(f.rel)), ...duplicates.rels.map((r) => path.posix.dirname(r))]);
  return {
    name: 'A',
    root,
    files: files.length + duplicates.rels.length,
    bytes: written + duplicates.bytes,
    dirs: countDirs(dirs),
    maxDepth: Math.max(...[...dirs].map((d) => d.split('/').length)),
    duplicateFiles: duplicates.rels.length,
    binaryBytes,
    largeBinaryBytes,
    editable: rng.fork('edit-order').shuffled(editable),
  };
}

/**
 * Workload B (full scale): 100k tiny text files (10-500 B) spread evenly over 2k directories.
 * `files` takes fewer (workload T leaves room for its log under the 100,000-entry limit).
 */
export async function generateWorkloadB(
  root: string,
  seed: number,
  scale: Scale,
  files: number = B_SHAPE[scale].files,
): Promise<WorkspaceManifest> {
  const shape = { ...B_SHAPE[scale], files };
  const rng = new Rng(seed).fork('workload-b');
  const gen = new CodeTextGenerator(seed);
  const top = Math.ceil(Math.sqrt(shape.dirs));
  const leafDirs = Array.from({ length: shape.dirs }, (_, i) => `d${Math.floor(i / top)}/${rng.pick(WORDS)}-${i}`);
  const pending: PendingFile[] = [];
  for (let i = 0; i < shape.files; i += 1) {
    const rel = `${leafDirs[i % leafDirs.length]}/${rng.pick(WORDS)}-${i}.txt`;
    const r = rng.fork(rel);
    pending.push({ rel, write: () => gen.exact(r, r.int(10, 500)) });
  }
  const bytes = await writeAll(root, pending);
  const dirs = new Set(leafDirs);
  return {
    name: 'B',
    root,
    files: pending.length,
    bytes,
    dirs: countDirs(dirs),
    maxDepth: 2,
    duplicateFiles: 0,
    binaryBytes: 0,
    largeBinaryBytes: [],
    editable: rng.fork('edit-order').shuffled(pending.map((f) => f.rel)),
  };
}

/**
 * Changes `count` editable files of `manifest` in place (a line inserted mid-file), a different
 * set for each `run`, and returns their relative paths.
 */
export async function modifyFiles(manifest: WorkspaceManifest, run: number, count: number): Promise<string[]> {
  const rels: string[] = [];
  for (let k = 0; k < count; k += 1) {
    const rel = manifest.editable[(run * count + k) % manifest.editable.length];
    if (rel === undefined) throw new Error(`workload ${manifest.name} has no editable files`);
    const file = path.join(manifest.root, rel);
    const rng = new Rng(`edit:${run}:${k}:${rel}`);
    const before = await fs.readFile(file, 'utf8');
    const at = before.indexOf('\n', rng.int(0, before.length - 1)) + 1;
    const line = `// edited in run ${run}: ${rng.next().toString(16)}${rng.next().toString(16)}\n`;
    await fs.writeFile(file, before.slice(0, at) + line + before.slice(at));
    rels.push(rel);
  }
  return rels;
}

/** Directory names forming a random tree of `count` directories under `top`, at most `maxDepth` deep. */
function randomTree(rng: Rng, top: string, count: number, maxDepth: number): string[] {
  const dirs = [{ rel: top, depth: 1 }];
  while (dirs.length < count) {
    // Parents skewed towards recent directories, so chains reach the maximum depth.
    const parent = dirs[Math.floor(Math.sqrt(rng.float()) * dirs.length)];
    if (parent === undefined || parent.depth >= maxDepth) continue;
    dirs.push({ rel: `${parent.rel}/${rng.pick(WORDS)}-${dirs.length}`, depth: parent.depth + 1 });
  }
  return dirs.map((d) => d.rel);
}

/** Copies whole packages into nested `vendor_modules/` of other packages until `target` files are copied. */
async function copyPackages(
  root: string,
  rng: Rng,
  packages: readonly string[],
  packageFiles: ReadonlyMap<string, readonly string[]>,
  target: number,
): Promise<{ rels: string[]; bytes: number }> {
  const copies: Array<{ from: string; to: string }> = [];
  while (copies.length < target) {
    const pkg = rng.pick(packages);
    const into = `vendor_modules/${rng.pick(packages)}/vendor_modules/${pkg}-copy-${copies.length}`;
    for (const from of packageFiles.get(pkg) ?? []) {
      if (copies.length >= target) break;
      copies.push({ from, to: `${into}${from.slice(`vendor_modules/${pkg}`.length)}` });
    }
  }
  let bytes = 0;
  await forEachLimit(copies, WRITE_CONCURRENCY, async ({ from, to }) => {
    await fs.mkdir(path.dirname(path.join(root, to)), { recursive: true });
    await fs.copyFile(path.join(root, from), path.join(root, to));
    bytes += (await fs.stat(path.join(root, to))).size;
  });
  return { rels: copies.map((c) => c.to), bytes };
}

/** Writes every file (creating directories first) and returns the total bytes written. */
async function writeAll(root: string, files: readonly PendingFile[]): Promise<number> {
  const dirs = new Set(files.map((f) => path.dirname(path.join(root, f.rel))));
  for (const dir of dirs) await fs.mkdir(dir, { recursive: true });
  let bytes = 0;
  await forEachLimit(files, WRITE_CONCURRENCY, async (file) => {
    const content = file.write();
    bytes += typeof content === 'string' ? Buffer.byteLength(content) : content.length;
    await fs.writeFile(path.join(root, file.rel), content);
  });
  return bytes;
}

/** `size` pseudo-random bytes from an AES-CTR keystream keyed by `rng`: deterministic and fast. */
export function randomBytesFrom(rng: Rng, size: number): () => Buffer {
  const seed = Buffer.alloc(32);
  for (let i = 0; i < 8; i += 1) seed.writeUInt32LE(rng.next(), i * 4);
  return () => createCipheriv('aes-128-ctr', seed.subarray(0, 16), seed.subarray(16)).update(Buffer.alloc(size));
}

/** Number of distinct directories implied by a set of directory paths (their ancestors included). */
function countDirs(leaves: ReadonlySet<string>): number {
  const all = new Set<string>();
  for (const leaf of leaves) {
    for (let d = leaf; d !== '.' && d !== '' && !all.has(d); d = path.posix.dirname(d)) all.add(d);
  }
  return all.size;
}

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
