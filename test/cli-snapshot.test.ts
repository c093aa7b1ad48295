import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTree, writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('holdfast snapshot commands (compiled bin, --json)', () => {
  let dir: string;
  let store: string;
  let ws: string;
  const run = (args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_META: '', HOLDFAST_BLOBS: '', HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      execFile(
        process.execPath,
        [bin, '--store', store, ...args],
        { env, maxBuffer: 64 * 1024 * 1024, encoding: 'buffer' },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
          resolve({ code, stdout: stdout.toString('latin1'), stderr: stderr.toString() });
        },
      );
    });
  const json = async <T>(args: string[]): Promise<T> => {
    const r = await run([...args, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as T;
  };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-cli-snap-'));
    store = path.join(dir, 'store');
    ws = path.join(dir, 'ws');
    writeFile(ws, 'README.md', '# project\n');
    writeFile(ws, 'src/main.ts', 'console.log(1);\n');
    writeFile(ws, 'bin/tool', '#!/bin/sh\n', 0o755);
    writeFile(ws, '.env', 'TOKEN=do-not-store\n');
    writeFile(ws, 'node_modules/dep/index.js', 'module.exports = 1;\n');
    fs.symlinkSync('src/main.ts', path.join(ws, 'main-link'));
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('checkpoint, log, workspaces, ls, cat, diff and restore work together', async () => {
    type Cp = {
      id: string;
      stats: { files: number; symlinks: number; objectsWritten: number };
      excluded: Array<{ path: string; reason: string }>;
    };
    const first = await json<Cp>(['checkpoint', ws, '--workspace', 'proj']);
    expect(first.stats).toMatchObject({ files: 3, symlinks: 1 });
    expect(first.excluded.map((e) => `${e.path}:${e.reason}`).sort()).toEqual(['.env:secret-path', 'node_modules:cache']);

    writeFile(ws, 'src/main.ts', 'console.log(2);\n');
    const second = await json<Cp>(['checkpoint', ws, '--workspace', 'proj', '--no-cache-excludes']);
    expect(second.stats.files).toBe(4);

    const log = await json<Array<{ id: string; status: string }>>(['log', '--workspace', 'proj']);
    expect(log.map((c) => [c.id, c.status])).toEqual([
      [second.id, 'ready'],
      [first.id, 'ready'],
    ]);
    const workspaces = await json<Array<{ name: string; headCheckpointId: string }>>(['workspaces']);
    expect(workspaces.map((w) => [w.name, w.headCheckpointId])).toEqual([['proj', second.id]]);

    const listing = await json<{ entries: Array<{ name: string; type: string }> }>(['ls', second.id, 'src']);
    expect(listing.entries.map((e) => `${e.type}:${e.name}`)).toEqual(['file:main.ts']);
    const cat = await run(['cat', first.id, 'src/main.ts']);
    expect(cat).toMatchObject({ code: 0, stdout: 'console.log(1);\n' });

    const diff = await json<Array<{ path: string; change: string }>>(['diff', first.id, second.id]);
    expect(diff.map((d) => `${d.change} ${d.path}`).sort()).toEqual([
      'added node_modules',
      'added node_modules/dep',
      'added node_modules/dep/index.js',
      'modified src/main.ts',
    ]);

    const target = path.join(dir, 'restored');
    const receipt = await json<{ checkpointId: string; files: number; verified: boolean }>([
      'restore',
      target,
      '--workspace',
      'proj',
      '--checkpoint',
      first.id,
    ]);
    expect(receipt).toMatchObject({ checkpointId: first.id, files: 3, verified: true });
    const original = describeTree(ws, ['.env', 'node_modules']);
    const restored = describeTree(target);
    expect(restored.get('src/main.ts')?.sha256).not.toBe(original.get('src/main.ts')?.sha256);
    expect(restored.get('bin/tool')).toEqual(original.get('bin/tool'));
    expect(restored.get('main-link')).toEqual({ type: 'symlink', target: 'src/main.ts' });
  }, 60_000);

  it('the restore receipt says what the checkpoint left out and how many hard links came back, in --json and for people', async () => {
    const linked = path.join(dir, 'linked');
    writeFile(linked, 'a.txt', 'shared\n');
    writeFile(linked, '.env', 'TOKEN=do-not-store\n');
    writeFile(linked, 'node_modules/dep/index.js', 'module.exports = 1;\n');
    writeFile(linked, 'packages/x/node_modules/dep/index.js', 'module.exports = 2;\n');
    fs.linkSync(path.join(linked, 'a.txt'), path.join(linked, 'b.txt'));
    fs.symlinkSync(path.join(linked, 'a.txt'), path.join(linked, 'abs-link'));
    await json(['checkpoint', linked, '--workspace', 'linked']);

    type Receipt = { hardlinks: number; excluded: { total: number; byReason: Record<string, number> }; verified: boolean };
    const receipt = await json<Receipt>(['restore', path.join(dir, 'linked-json'), '--workspace', 'linked']);
    expect(receipt).toMatchObject({
      hardlinks: 1,
      verified: true,
      excluded: { total: 4, byReason: { cache: 2, 'secret-path': 1, 'symlink-made-relative': 1 } },
    });
    expect(fs.lstatSync(path.join(dir, 'linked-json', 'b.txt')).ino).toBe(fs.lstatSync(path.join(dir, 'linked-json', 'a.txt')).ino);

    const human = await run(['restore', path.join(dir, 'linked-human'), '--workspace', 'linked']);
    expect(human.code).toBe(0);
    const lines = human.stdout.split('\n').map((l) => l.trim());
    expect(lines).toContain('left out: 2 cache, 1 secret-path; setup must rebuild them');
    expect(lines).toContain('kept changed: 1 symlink-made-relative');
    // Counts agree with their nouns: one hard link, not "1 hard links".
    expect(lines.some((l) => l.endsWith('; 1 hard link'))).toBe(true);
    expect(human.stdout).not.toMatch(/\b1 (files|dirs|symlinks|hard links)\b/);
  }, 60_000);

  it('errors carry stable codes and exit 1 (or 2 for bad input)', async () => {
    const missing = await run(['restore', path.join(dir, 'x'), '--workspace', 'no-such', '--json']);
    expect(missing.code).toBe(1);
    expect((JSON.parse(missing.stderr) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    const occupied = await run(['restore', ws, '--workspace', 'proj', '--json']);
    expect((JSON.parse(occupied.stderr) as { error: { code: string } }).error.code).toBe('CONFLICT');
    const badName = await run(['checkpoint', ws, '--workspace', '../escape', '--json']);
    expect(badName.code).toBe(2);
    expect((JSON.parse(badName.stderr) as { error: { code: string } }).error.code).toBe('INVALID_INPUT');
    expect((await run(['checkpoint', ws])).code).toBe(2);
  }, 60_000);
});
