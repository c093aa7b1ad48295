/** Command-line options of the snapshot benchmark and the tools they select. */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { HOLDFAST_CLI, holdfastLocalTool, holdfastS3Tool } from './holdfast-tool.js';
import { DEFAULT_TREE_CACHE } from './real-trees.js';
import { gitTool, resticTool, tarZstdTool } from './reference-tools.js';
import { type SnapshotTool, TOOL_IDS, type ToolId } from './snapshot-tool.js';
import { WORKLOAD_NAMES } from './workloads.js';
import type { Scale, WorkloadName } from './workspace-gen.js';

export type { WorkloadName } from './workspace-gen.js';

/** Names `--only` accepts, and the tools each selects. */
const ONLY_NAMES: Readonly<Record<string, readonly ToolId[]>> = {
  holdfast: ['holdfast', 'holdfast-s3'],
  'holdfast-local': ['holdfast'],
  'holdfast-s3': ['holdfast-s3'],
  restic: ['restic'],
  git: ['git'],
  tar: ['tar'],
  'tar|zstd': ['tar'],
  zstd: ['tar'],
};

/** Parsed command line. */
export interface SnapshotOptions {
  readonly runs: number;
  readonly scale: Scale;
  readonly tools: readonly ToolId[];
  readonly workloads: readonly WorkloadName[];
  readonly seed: number;
  readonly tmp: string;
  /** Where installed npm trees are cached between runs. */
  readonly treeCache: string;
  readonly keep: boolean;
  readonly cli: string;
  readonly json: boolean;
}

/** Parses the options listed in `snapshot.ts`'s header; throws on anything else. */
export function parseOptions(args: readonly string[]): SnapshotOptions {
  const { values } = parseArgs({
    args: [...args],
    options: {
      runs: { type: 'string', default: '3' },
      scale: { type: 'string', default: 'full' },
      only: { type: 'string' },
      workload: { type: 'string', default: WORKLOAD_NAMES.join(',') },
      seed: { type: 'string', default: '1' },
      tmp: { type: 'string', default: os.tmpdir() },
      'tree-cache': { type: 'string', default: DEFAULT_TREE_CACHE },
      keep: { type: 'boolean', default: false },
      cli: { type: 'string', default: HOLDFAST_CLI },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${values.runs}`);
  if (values.scale !== 'full' && values.scale !== 'small') throw new Error(`--scale must be full or small, got ${values.scale}`);
  const seed = Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got ${values.seed}`);
  const tools = new Set<ToolId>();
  for (const name of (values.only ?? 'holdfast,restic,git,tar').split(',').map((s) => s.trim().toLowerCase())) {
    const ids = ONLY_NAMES[name];
    if (ids === undefined) throw new Error(`--only: unknown tool ${name}; choose from ${Object.keys(ONLY_NAMES).join(', ')}`);
    for (const id of ids) tools.add(id);
  }
  const asked = new Set(values.workload.split(',').map((s) => s.trim().toUpperCase()));
  const workloads = WORKLOAD_NAMES.filter((w) => asked.has(w));
  if (workloads.length === 0 || workloads.length !== asked.size) {
    throw new Error(`--workload takes a comma-separated list of ${WORKLOAD_NAMES.join(', ')}; got ${values.workload}`);
  }
  return {
    runs,
    scale: values.scale,
    tools: TOOL_IDS.filter((id) => tools.has(id)),
    workloads: workloads satisfies WorkloadName[],
    seed,
    tmp: values.tmp,
    treeCache: path.resolve(values['tree-cache']),
    keep: values.keep,
    cli: path.resolve(values.cli),
    json: values.json,
  };
}

/** The tool object for `id`; Holdfast's variants run the CLI at `cli`. */
export function makeTool(id: ToolId, cli: string): SnapshotTool {
  switch (id) {
    case 'holdfast':
      return holdfastLocalTool(cli);
    case 'holdfast-s3':
      return holdfastS3Tool(cli);
    case 'restic':
      return resticTool();
    case 'git':
      return gitTool();
    case 'tar':
      return tarZstdTool();
  }
}
