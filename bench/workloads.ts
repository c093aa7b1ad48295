/**
 * The snapshot benchmark's workloads: how each is built and which measurements it gets.
 * A and B are generated (workspace-gen.ts), N and K are real npm trees (real-trees.ts), M is the
 * mixed random + text case and T the tiny files beside a large mixed log (mixed-workload.ts).
 */
import { Rng } from './code-text.js';
import { generateWorkloadM, generateWorkloadT } from './mixed-workload.js';
import { copyTree, ensureRealTree, type RealTreeSpec } from './real-trees.js';
import { treeFacts } from './tree-facts.js';
import { generateWorkloadA, generateWorkloadB, type Scale, type WorkloadName, type WorkspaceManifest } from './workspace-gen.js';

/** Every workload, in the order they run and print. */
export const WORKLOAD_NAMES: readonly WorkloadName[] = ['A', 'B', 'N', 'K', 'M', 'T'];

/** What building a workload needs. */
export interface BuildContext {
  /** The workspace directory to create; its parent exists, it does not. */
  readonly root: string;
  readonly seed: number;
  readonly scale: Scale;
  /** Where installed npm trees are cached. */
  readonly treeCache: string;
  readonly log: (message: string) => void;
}

/** One workload. */
export interface WorkloadSpec {
  readonly name: WorkloadName;
  readonly build: (ctx: BuildContext) => Promise<WorkspaceManifest>;
  /** Ten files edited, then a third checkpoint. */
  readonly changed10: boolean;
  /** Cold restore by every tool, then Holdfast's warm restores. */
  readonly restore: boolean;
  /** The 1,000-file directory rename, then a checkpoint and a warm restore (Holdfast). */
  readonly renameDir: boolean;
  /** Holdfast on S3 too (counts blob writes per incremental checkpoint). */
  readonly s3: boolean;
  /** npm packages of the tree at each scale, for the report header (real trees only). */
  readonly packages?: Readonly<Record<Scale, readonly string[]>>;
}

/** Workload N: an npm project (a front-end toolchain), with a `.git` holding one commit. */
const N_PACKAGES: Readonly<Record<Scale, readonly string[]>> = {
  full: ['typescript@5.5.4', 'vite@5.3.3', 'react@18.3.1', 'react-dom@18.3.1', 'eslint@9.6.0', '@babel/core@7.24.7', 'prettier@3.3.2'],
  small: ['react@18.3.1', 'react-dom@18.3.1', 'prettier@3.3.2'],
};

/**
 * Workload K: about 100k files from many packages, two TypeScript versions side by side; kept
 * just under Holdfast's default limit of 100,000 files and symlinks, so it runs with defaults.
 */
const K_PACKAGES: Readonly<Record<Scale, readonly string[]>> = {
  full: [
    'typescript-54@npm:typescript@5.4.5',
    'typescript-55@npm:typescript@5.5.4',
    '@babel/core@7.24.7',
    'eslint@8.57.0',
    'webpack@5.92.1',
    'rxjs@7.8.1',
    'rxjs-6@npm:rxjs@6.6.7',
    'lodash@4.17.21',
    '@types/node@20.14.9',
    'date-fns@2.30.0',
    'date-fns-3@npm:date-fns@3.6.0',
    'core-js@3.37.1',
    '@mui/icons-material@5.15.20',
    '@material-design-icons/svg@0.14.13',
    '@tabler/icons@3.6.0',
    '@fortawesome/fontawesome-free@6.5.2',
    'ionicons@7.4.0',
    'monaco-editor@0.50.0',
    'three@0.165.0',
    'aws-sdk@2.1651.0',
    '@fortawesome/free-solid-svg-icons@6.5.2',
    'lodash-es@4.17.21',
    'simple-icons@12.0.0',
  ],
  small: ['lodash@4.17.21', 'rxjs@7.8.1', 'date-fns@2.30.0'],
};

/** Editable files of a real tree: JavaScript of 1-200 KB outside `.git`. */
const EDITABLE_MIN_BYTES = 1000;
const EDITABLE_MAX_BYTES = 200_000;

function realTree(name: 'N' | 'K', packages: Readonly<Record<Scale, readonly string[]>>, gitRepo: boolean): WorkloadSpec {
  return {
    name,
    changed10: true,
    restore: true,
    renameDir: true,
    s3: false,
    packages,
    async build(ctx) {
      const spec: RealTreeSpec = { label: `${name.toLowerCase()}-${ctx.scale}`, packages: packages[ctx.scale], gitRepo };
      const cached = await ensureRealTree(ctx.treeCache, spec, ctx.log);
      await copyTree(cached, ctx.root);
      const facts = await treeFacts(ctx.root);
      const editable = facts.files
        .filter((f) => f.rel.endsWith('.js') && !f.rel.startsWith('.git/'))
        .filter((f) => f.size >= EDITABLE_MIN_BYTES && f.size <= EDITABLE_MAX_BYTES)
        .map((f) => f.rel);
      return {
        name,
        root: ctx.root,
        files: facts.files.length,
        bytes: facts.bytes,
        dirs: facts.dirs,
        maxDepth: facts.maxDepth,
        // Counted by the floor pass, which hashes every file anyway.
        duplicateFiles: 0,
        binaryBytes: 0,
        largeBinaryBytes: [],
        editable: new Rng(ctx.seed).fork(`edit-order-${name}`).shuffled(editable),
      };
    },
  };
}

/** The specs by name. */
export const WORKLOADS: Readonly<Record<WorkloadName, WorkloadSpec>> = {
  A: {
    name: 'A',
    changed10: true,
    restore: true,
    renameDir: true,
    s3: true,
    build: (ctx) => generateWorkloadA(ctx.root, ctx.seed, ctx.scale),
  },
  B: {
    name: 'B',
    changed10: false,
    restore: false,
    renameDir: false,
    s3: false,
    build: (ctx) => generateWorkloadB(ctx.root, ctx.seed, ctx.scale),
  },
  N: realTree('N', N_PACKAGES, true),
  K: realTree('K', K_PACKAGES, false),
  M: {
    name: 'M',
    changed10: false,
    restore: true,
    renameDir: false,
    s3: false,
    build: (ctx) => generateWorkloadM(ctx.root, ctx.seed, ctx.scale),
  },
  T: {
    name: 'T',
    changed10: false,
    restore: false,
    renameDir: false,
    s3: false,
    build: (ctx) => generateWorkloadT(ctx.root, ctx.seed, ctx.scale),
  },
};
