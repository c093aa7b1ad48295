/**
 * Repository checkpoints against `git bundle --all` + `tar` of the working tree (issue 14), in
 * the same run, on a host directory: a repository of `--commits` commits (default 5,000,
 * generated with `git fast-import`) over `--files` files (default 2,000), packed as a clone
 * would be. Measured: a first checkpoint and a restore of it (with the working tree), the
 * reference's bundle + tar and its clone + untar, and the bytes an incremental checkpoint
 * stores after one more commit. `--json` prints the raw figures.
 */

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_EXCLUDES, refuseUnsupportedCheckout } from '../src/git/repo-rules.js';
import { openHoldfast } from '../src/index.js';
import { printTable } from './stats.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
};
const COMMITS = Number(arg('--commits')) || 5_000;
const FILES = Number(arg('--files')) || 2_000;
const json = process.argv.includes('--json');
/** Bytes of each generated file. */
const FILE_BYTES = 2_000;
const IDENTITY = {
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'b@example.com',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'b@example.com',
};

const git = (cwd: string, args: string[], input?: string): string =>
  execFileSync('git', args, { cwd, env: { ...process.env, ...IDENTITY }, input, encoding: 'utf8', maxBuffer: 1 << 30 });

/** A fast-import stream: the first commit adds every file, each later one rewrites one file. */
function fastImportStream(): string {
  const parts: string[] = [];
  let seed = 1;
  const text = (i: number, rev: number): string => {
    seed = (seed * 1103515245 + 12345 + i + rev) >>> 0;
    const line = `file ${i} revision ${rev} ${seed.toString(36)}\n`;
    return line.repeat(Math.ceil(FILE_BYTES / line.length)).slice(0, FILE_BYTES);
  };
  for (let c = 0; c < COMMITS; c += 1) {
    const msg = `commit ${c}\n`;
    parts.push(
      `commit refs/heads/main\ncommitter Bench <b@example.com> ${1_700_000_000 + c} +0000\ndata ${Buffer.byteLength(msg)}\n${msg}`,
    );
    const touched = c === 0 ? Array.from({ length: FILES }, (_, i) => i) : [c % FILES];
    for (const i of touched) {
      const body = text(i, c);
      parts.push(`M 644 inline src/d${Math.floor(i / 100)}/f${i}.txt\ndata ${Buffer.byteLength(body)}\n${body}\n`);
    }
  }
  return parts.join('');
}

function dirBytes(dir: string): number {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += fs.statSync(path.join(e.parentPath, e.name)).size;
  }
  return n;
}

async function main(): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-bench-repos-'));
  try {
    const repo = path.join(root, 'repo');
    git(root, ['init', '--quiet', '--initial-branch=main', repo]);
    const generated = timeSync(() => {
      git(repo, ['fast-import', '--quiet'], fastImportStream());
      git(repo, ['reset', '--quiet', '--hard', 'main']);
      git(repo, ['repack', '-a', '-d', '-q']);
      git(repo, ['gc', '--quiet', '--prune=now']);
    });
    const hf = await openHoldfast({
      meta: `sqlite:${path.join(root, 'store', 'meta.db')}`,
      blobs: `file:${path.join(root, 'store', 'blobs')}`,
      cacheDir: path.join(root, 'store', 'cache'),
    });
    try {
      const snapshots = hf.repositories.repoSnapshots;
      const capture = () =>
        snapshots.checkpoint({ dir: repo, workspace: 'bench', excludes: REPO_EXCLUDES, onScan: refuseUnsupportedCheckout });
      let first!: Awaited<ReturnType<typeof capture>>;
      const checkpointMs = await timeAsync(async () => {
        first = await capture();
      });
      const out = path.join(root, 'out', 'restored');
      const restoreMs = await timeAsync(async () => {
        await snapshots.restore({ dir: out, workspace: 'bench' });
      });
      const status = spawnSync('git', ['-c', `safe.directory=${out}`, 'status', '--porcelain'], { cwd: out, encoding: 'utf8' });

      const bundle = path.join(root, 'ref', 'repo.bundle');
      const tarFile = path.join(root, 'ref', 'tree.tar');
      fs.mkdirSync(path.dirname(bundle));
      const refSaveMs = timeSync(() => {
        git(repo, ['bundle', 'create', '--quiet', bundle, '--all']);
        execFileSync('tar', ['-cf', tarFile, '--exclude=./.git', '-C', repo, '.']);
      });
      const refOut = path.join(root, 'ref', 'restored');
      const refRestoreMs = timeSync(() => {
        git(root, ['clone', '--quiet', '--no-checkout', bundle, refOut]);
        execFileSync('tar', ['-xf', tarFile, '-C', refOut]);
        git(refOut, ['reset', '--quiet']);
      });

      fs.appendFileSync(path.join(repo, 'src', 'd0', 'f0.txt'), 'one more line\n');
      git(repo, ['commit', '--quiet', '-am', 'one more commit']);
      let next!: Awaited<ReturnType<typeof capture>>;
      const incrementalMs = await timeAsync(async () => {
        next = await capture();
      });

      const figures = {
        commits: COMMITS,
        files: FILES,
        generateMs: Math.round(generated),
        repoBytes: dirBytes(repo),
        checkpoint: { ms: Math.round(checkpointMs), storedBytes: first.stats.storedBytesWritten, files: first.stats.files },
        restore: { ms: Math.round(restoreMs), cleanStatus: status.status === 0 && status.stdout === '' },
        reference: {
          saveMs: Math.round(refSaveMs),
          restoreMs: Math.round(refRestoreMs),
          bundleBytes: fs.statSync(bundle).size,
          tarBytes: fs.statSync(tarFile).size,
        },
        incremental: { ms: Math.round(incrementalMs), storedBytes: next.stats.storedBytesWritten, objects: next.stats.objectsWritten },
      };
      if (json) {
        console.log(JSON.stringify(figures, null, 2));
        return;
      }
      printTable(
        'repository checkpoint vs git bundle --all + tar',
        ['', 'Holdfast', 'bundle + tar'],
        [
          ['save (ms)', String(figures.checkpoint.ms), String(figures.reference.saveMs)],
          ['restore (ms)', String(figures.restore.ms), String(figures.reference.restoreMs)],
          ['stored bytes', String(figures.checkpoint.storedBytes), String(figures.reference.bundleBytes + figures.reference.tarBytes)],
          [
            'after one commit: stored bytes',
            String(figures.incremental.storedBytes),
            String(figures.reference.bundleBytes + figures.reference.tarBytes),
          ],
          ['after one commit: save (ms)', String(figures.incremental.ms), '-'],
        ],
      );
      console.log(
        `${COMMITS} commits, ${FILES} files, repository ${figures.repoBytes} bytes on disk; restored status clean: ${figures.restore.cleanStatus}`,
      );
    } finally {
      await hf.close();
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

function timeSync(fn: () => void): number {
  const t = performance.now();
  fn();
  return performance.now() - t;
}

async function timeAsync(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

await main();
