/**
 * Real workspaces for the snapshot benchmark, built from packages `npm` installs, so the
 * benchmark runs on a clean machine that reaches only the npm registry. Each tree is installed
 * once into a cache directory named after a hash of its package list and reused by later runs;
 * each run copies it into its own workspace (neither step is timed).
 *
 * Top-level versions are pinned; transitive ones are whatever the registry resolves on the first
 * install, which the cache then keeps. Installs use `--ignore-scripts` (no package code runs) and
 * `--legacy-peer-deps` (peers are not pulled in, so a tree is the listed packages' dependency
 * closure and icon packs that declare a React peer install without one).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runQuiet } from './process-runner.js';

/** A tree to install: its npm packages (`name@version` or `alias@npm:name@version`) and whether it holds a git repository. */
export interface RealTreeSpec {
  readonly label: string;
  readonly packages: readonly string[];
  /** `git init` plus one commit of package.json, so the tree carries a real `.git`. */
  readonly gitRepo: boolean;
}

/** Default cache directory of installed trees. */
export const DEFAULT_TREE_CACHE = path.join(os.tmpdir(), 'holdfast-bench-trees');

/** Bump when the way a tree is built changes, so older cached trees are not reused. */
const TREE_FORMAT = 1;

const GIT_ENV = { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0' };
const GIT_IDENTITY = ['-c', 'user.name=holdfast-bench', '-c', 'user.email=bench@holdfast.invalid', '-c', 'commit.gpgSign=false'];

/** The cache directory of `spec`: its label and a hash of everything that decides its contents. */
export function treeCacheDir(cacheRoot: string, spec: RealTreeSpec): string {
  const key = createHash('sha256')
    .update(JSON.stringify({ format: TREE_FORMAT, packages: spec.packages, gitRepo: spec.gitRepo }))
    .digest('hex')
    .slice(0, 16);
  return path.join(cacheRoot, `${spec.label}-${key}`);
}

/**
 * Returns the cached tree of `spec`, installing it first when it is not cached. The install
 * happens in a temporary sibling that is renamed into place only once complete, so an
 * interrupted install is never mistaken for a cached tree.
 */
export async function ensureRealTree(cacheRoot: string, spec: RealTreeSpec, log: (message: string) => void): Promise<string> {
  const dir = treeCacheDir(cacheRoot, spec);
  if (existsSync(dir)) return dir;
  await fs.mkdir(cacheRoot, { recursive: true });
  const building = `${dir}.building-${process.pid}`;
  await fs.rm(building, { recursive: true, force: true });
  await fs.mkdir(building);
  log(`installing ${spec.packages.length} npm packages for tree ${spec.label} into ${dir} (once; later runs reuse it)`);
  const manifest = { name: `holdfast-bench-${spec.label}`, version: '1.0.0', private: true };
  await fs.writeFile(path.join(building, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const npmFlags = ['--ignore-scripts', '--no-audit', '--no-fund', '--save-exact', '--legacy-peer-deps', '--loglevel=error'];
  await runQuiet({ argv: ['npm', 'install', ...npmFlags, ...spec.packages], cwd: building });
  if (spec.gitRepo) {
    const git = (...args: string[]) => runQuiet({ argv: ['git', ...GIT_IDENTITY, ...args], cwd: building, env: GIT_ENV });
    await git('init', '-q');
    await git('add', 'package.json', 'package-lock.json');
    await git('commit', '-q', '-m', 'bench tree');
  }
  await fs.rename(building, dir);
  return dir;
}

/** Copies the cached tree `from` into `to` (which must not exist), keeping modes, times and symlinks. */
export async function copyTree(from: string, to: string): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await runQuiet({ argv: ['cp', '-a', '--', from, to] });
}
