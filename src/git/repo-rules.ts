import path from 'node:path';
import { ConflictError, HoldfastError } from '../errors.js';
import type { ExcludeOptions } from '../rules/excludes.js';
import type { ScannedDir, ScannedEntry, ScanResult } from '../workspace-fs/scan.js';

/**
 * Git config files at any depth of a checkout: its own, a linked worktree's
 * (`.git/worktrees/<w>/config.worktree`), an absorbed submodule's (`.git/modules/<sub>/config`, at any depth of nesting)
 * and those of repositories nested in the work tree. Tools keep credentials in them (remote
 * URLs with tokens, `http.extraheader` as actions/checkout writes it, `url.*.insteadOf`).
 */
const GIT_CONFIG_FILES: readonly string[] = Object.freeze([
  '/.git/config',
  '/.git/config.worktree',
  '/.git/modules/**/config',
  '/.git/modules/**/config.worktree',
  '/.git/worktrees/*/config',
  '/.git/worktrees/*/config.worktree',
  '**/.git/config',
  '**/.git/config.worktree',
]);

/**
 * What a repository checkpoint leaves out. Git decides what is ignored (`.gitignore` at every
 * depth and `.git/info/exclude`, never applied inside `.git`), so the built-in cache excludes
 * are off: a tracked `.cache/` is part of the checkout. Every git config file
 * ({@link GIT_CONFIG_FILES}) and every hooks directory under `.git` (executable code) are never
 * stored: a restore writes a fresh config and no hooks. The secret rules apply to every file,
 * inside `.git` too.
 */
export const REPO_EXCLUDES: ExcludeOptions = Object.freeze({
  cacheExcludes: false,
  gitignore: true,
  exclude: Object.freeze([...GIT_CONFIG_FILES, '/.git/hooks/', '/.git/modules/**/hooks/', '/.git/worktrees/*/hooks/']),
});

/** Exclusion reasons that would make the stored checkout differ from what git sees. */
const REFUSED_EXCLUSIONS: ReadonlySet<string> = new Set(['symlink-escape', 'symlink-made-relative']);

/**
 * The scan hook of a repository checkpoint (`onScan`): refuses, before any byte is read, a
 * checkout whose copy would not be a faithful, self-contained repository. `REPOSITORY_BUSY`
 * (reason `lock`) when any `*.lock` exists under `.git` (a git command is writing: the next
 * save retries); `REPOSITORY_UNSUPPORTED` when `.git` is missing or not a directory (a linked
 * worktree or an absorbed submodule keeps its git directory elsewhere: `gitdir_file`),
 * `.git/objects/info/alternates` exists (objects borrowed from another repository), a file has
 * other hard links, a symlink lives inside `.git` or points into it, or a symlink escapes the
 * checkout or is absolute. Each error's `data` names the path and the reason.
 */
export function refuseUnsupportedCheckout(scan: ScanResult): void {
  const gitDir = scan.root.children.find((e) => e.name === '.git');
  if (gitDir === undefined) throw unsupported('.git', 'not_a_repository', 'has no .git directory');
  if (gitDir.type !== 'dir') {
    throw unsupported(
      '.git',
      'gitdir_file',
      'has a .git that is not a directory (a linked worktree or a submodule): check it out as a plain clone',
    );
  }
  for (const e of scan.excluded) {
    if (REFUSED_EXCLUSIONS.has(e.reason)) throw unsupported(e.path, 'symlink', 'holds a symlink that is absolute or escapes the checkout');
  }
  walk(scan.root, (entry, inGit) => {
    if (inGit && entry.type === 'file' && entry.name.endsWith('.lock')) {
      throw new ConflictError('REPOSITORY_BUSY', `git is writing in the checkout (${entry.path} exists): the next save retries`, {
        data: { path: entry.path, reason: 'lock' },
      });
    }
    if (entry.path === '.git/objects/info/alternates') {
      throw unsupported(
        entry.path,
        'alternates',
        'borrows objects from another repository (objects/info/alternates): run git repack -a -d and remove it',
      );
    }
    if (entry.type === 'file' && entry.dev !== undefined) throw unsupported(entry.path, 'hardlink', 'holds a file with other hard links');
    if (entry.type === 'symlink' && (inGit || pointsIntoGit(entry.path, entry.target))) {
      throw unsupported(entry.path, 'symlink', 'holds a symlink inside or into .git');
    }
  });
}

function walk(dir: ScannedDir, visit: (entry: ScannedEntry, inGit: boolean) => void): void {
  for (const entry of dir.children) {
    const inGit = entry.path.startsWith('.git/');
    visit(entry, inGit);
    if (entry.type === 'dir') walk(entry, visit);
  }
}

/** Whether relative link `target` at `linkPath` resolves to `.git` or below (the scan kept only links inside the root). */
function pointsIntoGit(linkPath: string, target: string): boolean {
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(linkPath), target));
  return resolved === '.git' || resolved.startsWith('.git/');
}

function unsupported(at: string, reason: string, what: string): HoldfastError {
  return new HoldfastError('REPOSITORY_UNSUPPORTED', `the checkout ${what} (${at}); the previous checkpoint stays`, {
    data: { path: at, reason },
  });
}
