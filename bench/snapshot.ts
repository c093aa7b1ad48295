/**
 * Snapshot benchmark: Holdfast's checkpoint and restore against restic, git and `tar | zstd`, on
 * generated workspaces (A: ~20k mixed files / ~300 MB; B: 100k tiny files), every tool a child
 * process under GNU time. Prints a table of medians per workload with Holdfast's ratios, then the
 * targets; `--json` prints every raw run and the medians instead.
 *
 *   npx tsx bench/snapshot.ts                                  # everything, 5 runs, full scale
 *   npx tsx bench/snapshot.ts --only restic,git,tar --scale small --runs 1
 *   npx tsx bench/snapshot.ts --only holdfast,restic --workload A --json
 *
 * Options: --runs N (5), --scale full|small, --only holdfast|holdfast-local|holdfast-s3|restic|git|tar
 * (comma-separated), --workload A,B, --seed N (1), --tmp DIR (os.tmpdir()), --keep (leave the
 * temp directory), --cli PATH (the Holdfast CLI to run; default dist/bin/main.js), --json.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { requireGnuTime } from './process-runner.js';
import { makeTool, parseOptions, type WorkloadName } from './snapshot-options.js';
import { evaluateTargets, printTargets, printWorkloadTable, warnings } from './snapshot-report.js';
import { allMedians, type WorkloadResult } from './snapshot-results.js';
import { benchWorkload, log, requireFreeSpace } from './snapshot-runner.js';
import type { ToolId } from './snapshot-tool.js';

function describeWorkload(result: WorkloadResult): string {
  const m = result.manifest;
  const mb = (n: number) => (n / 1e6).toFixed(1);
  const base = `${m.files.toLocaleString('en-US')} files, ${mb(m.bytes)} MB in ${m.dirs.toLocaleString('en-US')} dirs (depth ${m.maxDepth})`;
  if (m.name === 'B') return `Workload B: ${base}; 10-500 B text files.`;
  const large = m.largeBinaryBytes.map((b) => (b / 1e6).toFixed(1)).join('/');
  return (
    `Workload A: ${base}; ${mb(m.binaryBytes)} MB random binaries (incl. ${m.largeBinaryBytes.length} large: ${large} MB), ` +
    `${m.duplicateFiles.toLocaleString('en-US')} exact duplicates, code-like text otherwise. The node_modules-like tree is named ` +
    `vendor_modules/ so no default cache exclude drops it: every tool stores the same bytes.`
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
  'Holdfast: its CLI (path above) under node, init not timed. Its stat cache (HOLDFAST_CACHE_DIR), like the cache of restic,',
  '  sits beside the store, starts empty each run and is not counted in the store size.',
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
    await requireFreeSpace(options.tmp, options.runs, options.scale);
    const base = await fs.mkdtemp(path.join(options.tmp, 'hf-bench-snapshot-'));
    try {
      for (const name of options.workloads) {
        results[name] = await benchWorkload({ name, base, scale: options.scale, seed: options.seed, runs: options.runs, tools });
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
  const targets = evaluateTargets(results.A, results.B);
  const load = { before: loadBefore.map(round2), after: os.loadavg().map(round2) };
  if (options.json) {
    const workloads = Object.fromEntries(
      Object.entries(results).map(([name, r]) => [name, { manifest: r.manifest, medians: allMedians(r), runs: r.samples }]),
    );
    const machine = {
      cpus: os.cpus().length,
      memoryBytes: os.totalmem(),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      load,
    };
    process.stdout.write(
      `${JSON.stringify({ bench: 'snapshot', options, machine, versions, notes: METHOD_NOTES, workloads, targets }, null, 2)}\n`,
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
    out(describeWorkload(result));
    const title = `Workload ${name}: median of ${options.runs} run(s); seconds unless noted, MB = 10^6 bytes`;
    printWorkloadTable(name, title, result, tools);
    for (const warning of warnings(name, result, result.manifest.files)) out(`  ! ${warning}`);
  }
  printTargets(targets);
}

main().catch((error: unknown) => {
  process.stderr.write(`snapshot: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
