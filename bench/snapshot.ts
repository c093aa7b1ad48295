/**
 * Snapshot benchmark: Holdfast's checkpoint and restore against restic, git and `tar | zstd`, every
 * tool a child process under GNU time, on generated workspaces (A: ~20k mixed files / ~300 MB;
 * B: 100k tiny files; M: 1 MiB files of random + log text and a 100 MiB one; T: 99k tiny files beside a
 * 100 MiB mixed log) and real trees npm
 * installs (N: an npm project with a .git; K: ~100k files from two dozen packages). Prints a
 * table of medians per workload with Holdfast's ratios (Holdfast's warm restores included), the
 * goals (MET / MISS, by how much, the floor that bounds each) and the floor of each workload on
 * this machine; `--json` prints every raw run, the medians, the floors and the goals instead.
 *
 *   npx tsx bench/snapshot.ts                                  # everything, 3 runs, full scale (about 45 min on 2 cores)
 *   npx tsx bench/snapshot.ts --scale small --runs 1           # smoke run, a few minutes
 *   npx tsx bench/snapshot.ts --only holdfast,restic --workload N,K,M --json
 *
 * Options: --runs N (3: goals are judged on medians of at least 3), --scale full|small, --only holdfast|holdfast-local|holdfast-s3|restic|git|tar
 * (comma-separated), --workload A,B,N,K,M,T (any subset), --seed N (1), --tmp DIR (os.tmpdir()),
 * --tree-cache DIR (installed npm trees, reused between runs; default $TMPDIR/holdfast-bench-trees),
 * --keep (leave the temp directory), --cli PATH (the Holdfast CLI; default dist/bin/main.js), --json.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { requireGnuTime } from './process-runner.js';
import { evaluateGoals, printFloors, printGoals } from './snapshot-goals.js';
import { makeTool, parseOptions, type WorkloadName } from './snapshot-options.js';
import { printWorkloadTable, warnings } from './snapshot-report.js';
import { allMedians, type WorkloadResult } from './snapshot-results.js';
import { benchWorkload, log, requireFreeSpace } from './snapshot-runner.js';
import type { ToolId } from './snapshot-tool.js';
import { WORKLOADS } from './workloads.js';
import type { Scale } from './workspace-gen.js';

function describeWorkload(result: WorkloadResult, scale: Scale): string {
  const m = result.manifest;
  const mb = (n: number) => (n / 1e6).toFixed(1);
  const base = `${m.files.toLocaleString('en-US')} files, ${mb(m.bytes)} MB in ${m.dirs.toLocaleString('en-US')} dirs (depth ${m.maxDepth})`;
  const rename =
    result.renameDir === undefined ? '' : ` The rename measurement moves ${result.renameDir.path}/ (${result.renameDir.files} files).`;
  if (m.name === 'B') return `Workload B: ${base}; 10-500 B text files.`;
  if (m.name === 'T') {
    return `Workload T: ${base}; workload B's 10-500 B text files beside ${m.bigFile}, ${mb(m.binaryBytes * 8)} MB of M's 1 MiB units (128 KiB random + 896 KiB log-like text).`;
  }
  if (m.name === 'M') {
    return `Workload M: ${base}; each 1 MiB unit is 128 KiB random + 896 KiB log-like text; ${m.bigFile} is ${mb(m.bytes - (m.files - 1) * 2 ** 20)} MB of such units.`;
  }
  const packages = WORKLOADS[m.name].packages?.[scale];
  if (packages !== undefined) {
    return (
      `Workload ${m.name}: ${base}, ${m.duplicateFiles.toLocaleString('en-US')} exact duplicates; \`npm i\` of ${packages.join(' ')}` +
      `${m.name === 'N' ? ', plus a .git with one commit' : ''}. node_modules/ keeps its name; Holdfast runs with --no-cache-excludes ` +
      `so every tool stores the same bytes (git never stores a .git).${rename}`
    );
  }
  const large = m.largeBinaryBytes.map((b) => (b / 1e6).toFixed(1)).join('/');
  return (
    `Workload A: ${base}; ${mb(m.binaryBytes)} MB random binaries (incl. ${m.largeBinaryBytes.length} large: ${large} MB), ` +
    `${m.duplicateFiles.toLocaleString('en-US')} exact duplicates, code-like text otherwise. The node_modules-like tree is named ` +
    `vendor_modules/ so no default cache exclude drops it: every tool stores the same bytes.${rename}`
  );
}

const METHOD_NOTES = [
  'Page cache is never dropped (no root). Measurements are interleaved (every tool does run 1 of an operation, then run 2, …)',
  'with the tool order rotated each run, so all tools meet comparable (warm) cache state; `sync` runs before each',
  'measurement so no tool pays for writing back dirty pages of another. Every run uses fresh repositories, and nothing',
  '  is deleted until the end: ext4 inode allocation skips inodes deleted in the last minutes, so a cleanup would slow',
  '  whichever tool creates files next (a restore right after a cleanup ran several times slower).',
  'restic: repository v2 (compression auto), own cache dir, `backup .` from the workspace, `restore latest --target`.',
  'git: bare repo + --work-tree, `add -A` then `commit --allow-empty`, automatic gc off (loose objects); restore =',
  '  `checkout -f HEAD -- .` into an empty dir with a throwaway index (reads the object store; a clone would also copy it).',
  'tar|zstd: `tar -c | zstd -3 -T0`; no incremental mode, so no-change and 10-changed are full archives again and the',
  '  store holds three archives. RSS of a pipeline = sum of its two processes.',
  'Holdfast: its CLI (path above) under node, init not timed, checkpoints with --no-cache-excludes. Its stat cache',
  '  (HOLDFAST_CACHE_DIR), like the cache of restic, sits beside the store, starts empty each run and is not counted in the store size.',
  "Warm restores (Holdfast only, after every tool's cold restore of the run): `restore --replace` onto the tree its cold restore",
  '  left: unchanged; after renaming a ~1,000-file directory and checkpointing; after overwriting 4 KiB inside the big file (M)',
  '  and checkpointing. "fetched" = the receipt\'s bytesFetched. The workspace is renamed back after each run.',
  'npm trees (N, K) are installed once (npm i --ignore-scripts --legacy-peer-deps) into --tree-cache, keyed by their package list,',
  '  and copied (cp -a) into the workspace; neither is timed.',
  'Store size = allocated blocks (du), so loose objects and small files pay for 4 KiB blocks; apparent sizes are in --json.',
];

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  requireGnuTime();
  const tools = options.tools.map((id) => makeTool(id, options.cli));
  const versions: Partial<Record<ToolId, string>> = {};
  const results: Partial<Record<WorkloadName, WorkloadResult>> = {};
  const loadBefore = os.loadavg();
  try {
    for (const tool of tools) versions[tool.id] = await tool.preflight();
    await fs.mkdir(options.tmp, { recursive: true });
    await requireFreeSpace(options.tmp, options.runs, options.scale, options.workloads);
    const base = await fs.mkdtemp(path.join(options.tmp, 'hf-bench-snapshot-'));
    try {
      for (const name of options.workloads) {
        results[name] = await benchWorkload({
          name,
          base,
          scale: options.scale,
          seed: options.seed,
          runs: options.runs,
          tools,
          treeCache: options.treeCache,
        });
      }
    } finally {
      if (options.keep) log(`kept ${base}`);
      else {
        log(`removing ${base}`);
        await fs.rm(base, { recursive: true, force: true });
      }
    }
  } finally {
    for (const tool of tools) await tool.close();
  }
  const goals = evaluateGoals(results);
  const load = { before: loadBefore.map(round2), after: os.loadavg().map(round2) };
  if (options.json) {
    const workloads = Object.fromEntries(
      Object.entries(results).map(([name, r]) => [
        name,
        { manifest: r.manifest, floor: r.floor, renameDir: r.renameDir, medians: allMedians(r), runs: r.samples },
      ]),
    );
    const machine = {
      cpus: os.cpus().length,
      memoryBytes: os.totalmem(),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      load,
    };
    process.stdout.write(
      `${JSON.stringify({ bench: 'snapshot', options, machine, versions, notes: METHOD_NOTES, workloads, goals }, null, 2)}\n`,
    );
    return;
  }
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`\nsnapshot: Holdfast vs reference tools, scale ${options.scale}, median of ${options.runs} run(s), seed ${options.seed}`);
  out(`Node ${process.version}, ${os.cpus().length} CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM`);
  out(`Load average (1/5/15 min) before ${load.before.join(' ')}, after ${load.after.join(' ')}: other work on the machine skews times.`);
  for (const [id, version] of Object.entries(versions)) out(`  ${id}: ${version}`);
  for (const note of METHOD_NOTES) out(note);
  for (const name of options.workloads) {
    const result = results[name];
    if (result === undefined) continue;
    out('');
    out(describeWorkload(result, options.scale));
    const title = `Workload ${name}: median of ${options.runs} run(s); seconds unless noted, MB = 10^6 bytes`;
    printWorkloadTable(title, result, tools);
    for (const warning of warnings(name, result, result.manifest.files)) out(`  ! ${warning}`);
  }
  printGoals(goals);
  printFloors(results);
}

main().catch((error: unknown) => {
  process.stderr.write(`snapshot: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
