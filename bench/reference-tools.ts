/**
 * The reference tools Holdfast is measured against, each driven as child processes:
 * restic, git and `tar | zstd`. Every `open` makes a fresh repository, so no run inherits state
 * (restic's cache included) from an earlier one.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { onPath, runMeasured, runPipelineMeasured, runQuiet, runSequenceMeasured } from './process-runner.js';
import type { SnapshotTool, ToolRepo } from './snapshot-tool.js';

/** restic needs a password; the benchmark's repositories are throwaway. */
const RESTIC_PASSWORD = 'holdfast-bench';

/**
 * git isolated from the user's and system configuration (no global excludes or hooks), with
 * automatic gc off so objects stay loose and no background repack overlaps the next measurement.
 */
const GIT_ENV = { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0' };
const GIT_CONFIG = [
  ['user.name', 'holdfast-bench'],
  ['user.email', 'bench@holdfast.invalid'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
  ['core.excludesFile', '/dev/null'],
  ['commit.gpgSign', 'false'],
].flatMap(([key, value]) => ['-c', `${key}=${value}`]);

function requireProgram(program: string, debianPackage: string): void {
  if (!onPath(program)) {
    throw new Error(`${program} not found on PATH: apt-get install ${debianPackage} (it is in .ci/run's APT_PACKAGES)`);
  }
}

async function firstLine(argv: readonly string[]): Promise<string> {
  return (await runQuiet({ argv })).split('\n')[0]?.trim() ?? '';
}

/**
 * restic: `restic init` (repository format 2, compression auto), `restic backup .` from inside
 * the workspace (so the snapshot holds the workspace's contents at its root and later backups
 * find their parent), `restic restore latest --target T`. The cache lives next to the repository
 * and is not counted in the store size.
 */
export function resticTool(): SnapshotTool {
  return {
    id: 'restic',
    label: 'restic',
    incremental: true,
    async preflight() {
      requireProgram('restic', 'restic');
      return firstLine(['restic', 'version']);
    },
    async open(dir) {
      const repo = path.join(dir, 'repo');
      const cache = path.join(dir, 'cache');
      const env = { RESTIC_PASSWORD, RESTIC_CACHE_DIR: cache };
      const base = ['restic', '--repo', repo, '--cache-dir', cache, '--quiet'];
      await runQuiet({ argv: [...base, 'init'], env });
      return {
        storeDir: repo,
        checkpoint: (source) => runMeasured({ argv: [...base, 'backup', '.'], cwd: source, env }),
        restore: (target) => runMeasured({ argv: [...base, 'restore', 'latest', '--target', target], env }),
      } satisfies ToolRepo;
    },
    async close() {},
  };
}

/**
 * git: a bare repository used with `--work-tree`, so nothing is added to the workspace the other
 * tools read. Checkpoint = `git add -A` then `git commit -q --allow-empty` (a no-change checkpoint
 * still records a commit, as the other tools record a snapshot). Restore =
 * `git checkout -f HEAD -- .` into an empty directory with a throwaway index: it reads the same
 * object store the checkpoints wrote and writes only the files, like `restic restore`; a
 * `git clone` would also copy (or hard-link) the object database, which the others do not do.
 * Store = the bare repository (loose zlib objects, since automatic gc is off).
 */
export function gitTool(): SnapshotTool {
  return {
    id: 'git',
    label: 'git',
    incremental: true,
    skipsGitDir: true,
    async preflight() {
      requireProgram('git', 'git');
      return firstLine(['git', '--version']);
    },
    async open(dir) {
      const repo = path.join(dir, 'repo.git');
      await runQuiet({ argv: ['git', 'init', '-q', '--bare', repo], env: GIT_ENV });
      const git = (workTree: string, ...args: string[]) => ['git', ...GIT_CONFIG, '--git-dir', repo, '--work-tree', workTree, ...args];
      let restores = 0;
      return {
        storeDir: repo,
        checkpoint: (source) =>
          runSequenceMeasured([
            { argv: git(source, 'add', '-A'), cwd: source, env: GIT_ENV },
            { argv: git(source, 'commit', '-q', '--allow-empty', '-m', 'checkpoint'), cwd: source, env: GIT_ENV },
          ]),
        async restore(target) {
          await fs.mkdir(target);
          restores += 1;
          const env = { ...GIT_ENV, GIT_INDEX_FILE: path.join(dir, `restore-index-${restores}`) };
          return runMeasured({ argv: git(target, 'checkout', '-f', 'HEAD', '--', '.'), cwd: target, env });
        },
      } satisfies ToolRepo;
    },
    async close() {},
  };
}

/**
 * `tar -cf - -C DIR . | zstd -3 -T0`: no incremental mode, so every checkpoint is a full archive
 * again, and the store after three checkpoints holds three archives. Restore =
 * `zstd -dc ARCHIVE | tar -xf - -C T`. Peak RSS is tar's plus zstd's (they run concurrently).
 */
export function tarZstdTool(): SnapshotTool {
  return {
    id: 'tar',
    label: 'tar|zstd',
    incremental: false,
    async preflight() {
      requireProgram('tar', 'tar');
      requireProgram('zstd', 'zstd');
      requireProgram('bash', 'bash');
      return `${await firstLine(['tar', '--version'])}, ${await firstLine(['zstd', '--version'])}`;
    },
    async open(dir) {
      const store = path.join(dir, 'archives');
      await fs.mkdir(store);
      let archives = 0;
      const latest = () => path.join(store, `checkpoint-${archives}.tar.zst`);
      return {
        storeDir: store,
        checkpoint(source) {
          archives += 1;
          return runPipelineMeasured(
            { argv: ['tar', '-cf', '-', '-C', source, '.'] },
            { argv: ['zstd', '-3', '-T0', '-q', '-o', latest()] },
          );
        },
        async restore(target) {
          if (archives === 0) throw new Error('tar|zstd: nothing to restore yet');
          await fs.mkdir(target);
          return runPipelineMeasured({ argv: ['zstd', '-dc', latest()] }, { argv: ['tar', '-xf', '-', '-C', target] });
        },
      } satisfies ToolRepo;
    },
    async close() {},
  };
}
