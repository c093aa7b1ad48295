import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Sha256Hex } from '../../src/core/hash.js';
import type { TreeEntry } from '../../src/core/tree.js';
import type { ObjectReader } from '../../src/objects/object-reader.js';
import type { SandboxHandle } from '../../src/sandbox/sandbox-provider.js';

/** Identity for every git commit a test makes (sandbox launches carry none). */
export const GIT_IDENTITY: Readonly<Record<string, string>> = Object.freeze({
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
});

/** Runs git on the host in `cwd`, with {@link GIT_IDENTITY}; returns stdout. */
export function hostGit(cwd: string, args: readonly string[], input?: string): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_IDENTITY }, input, encoding: 'utf8' });
}

/**
 * A bare repository at `<dir>/remote.git` seeded with one commit on `main`: a README, a
 * `.gitignore` (`node_modules/`, `.setup-ran`), an executable script, a relative symlink and a
 * tracked `a.txt`. Returns its `file://` URL.
 */
export function seedRemote(dir: string): string {
  const bare = path.join(dir, 'remote.git');
  const work = path.join(dir, 'seed');
  hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
  hostGit(dir, ['init', '--quiet', '--initial-branch=main', work]);
  fs.writeFileSync(path.join(work, 'README.md'), '# app\n');
  fs.writeFileSync(path.join(work, '.gitignore'), 'node_modules/\n.setup-ran\n');
  fs.writeFileSync(path.join(work, 'a.txt'), 'one\n');
  fs.writeFileSync(path.join(work, 'run.sh'), '#!/bin/sh\necho run\n', { mode: 0o755 });
  fs.symlinkSync('README.md', path.join(work, 'readme-link'));
  hostGit(work, ['add', '-A']);
  hostGit(work, ['commit', '--quiet', '-m', 'initial']);
  hostGit(work, ['push', '--quiet', bare, 'main']);
  return `file://${bare}`;
}

/**
 * A bare repository at `<dir>/<name>` whose one commit on `master` holds `count` files, all
 * the same two-byte blob: a pack of a few hundred KiB that checks out as `count` files.
 * Returns the repository's directory.
 */
export function seedManyFiles(dir: string, name: string, count: number): string {
  const bare = path.join(dir, name);
  hostGit(dir, ['init', '--quiet', '--bare', bare]);
  const blob = hostGit(bare, ['hash-object', '-w', '--stdin'], 'x\n').trim();
  const entries = Array.from({ length: count }, (_, i) => `100644 blob ${blob}\tf${i}\n`).join('');
  const tree = hostGit(bare, ['mktree'], entries).trim();
  const commit = hostGit(bare, ['commit-tree', tree, '-m', 'many'], '').trim();
  hostGit(bare, ['update-ref', 'refs/heads/master', commit]);
  hostGit(bare, ['symbolic-ref', 'HEAD', 'refs/heads/master']);
  return bare;
}

/**
 * Every byte a checkpoint's tree reaches: each tree object (as stored) and each file's content;
 * git loose objects (`.git/objects/xx/…`) are also given inflated, so a grep sees their text.
 */
export async function storedBytes(reader: ObjectReader, rootTree: Sha256Hex): Promise<Buffer[]> {
  const out: Buffer[] = [];
  const walk = async (id: Sha256Hex, at: string): Promise<void> => {
    out.push(Buffer.from(await reader.read(id)));
    const entries: TreeEntry[] = await reader.readTree(id);
    for (const e of entries) {
      const p = at === '' ? e.name : `${at}/${e.name}`;
      if (e.type === 'dir') await walk(e.tree, p);
      else if (e.type === 'file') {
        const chunks = await reader.readMany(e.chunks);
        const bytes = Buffer.concat(e.chunks.map((c) => Buffer.from(chunks.get(c) ?? new Uint8Array())));
        out.push(bytes);
        if (/^\.git\/objects\/[0-9a-f]{2}\//.test(p)) out.push(zlib.inflateSync(bytes));
      }
    }
  };
  await walk(rootTree, '');
  return out;
}

/** Runs `script` with `sh -c` in `dir` of a sandbox, with {@link GIT_IDENTITY}: its exit code and output as text. */
export async function gitShell(
  { sandbox, signal }: { readonly sandbox: SandboxHandle; readonly signal?: AbortSignal },
  dir: string,
  script: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const r = await sandbox.run(['sh', '-c', script], {
    cwd: dir,
    env: { ...GIT_IDENTITY },
    timeoutMs: 120_000,
    ...(signal === undefined ? {} : { signal }),
  });
  return { code: r.code, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8') };
}
