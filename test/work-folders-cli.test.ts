import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
/** A file large enough that buffering it whole would show, streamed through stdin and back. */
const LARGE_BYTES = 24 * 1024 * 1024;

interface Run {
  readonly code: number;
  readonly stdout: Buffer;
  readonly stderr: string;
}

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

/** `holdfast folder …` on a --store directory: the library straight on the store, no server. */
describe('holdfast folder (compiled bin)', () => {
  let dir: string;
  let store: string;
  let env: Record<string, string>;
  const holdfast = (args: string[], stdin?: Buffer): Promise<Run> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [bin, '--store', store, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      let err = '';
      child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => {
        err += chunk.toString();
      });
      child.on('close', (code) => resolve({ code: code ?? -1, stdout: Buffer.concat(out), stderr: err }));
      child.stdin.end(stdin ?? Buffer.alloc(0));
    });
  const json = (run: Run) => JSON.parse(run.stdout.toString('utf8'));
  const errorCode = (run: Run): unknown => (JSON.parse(run.stderr) as { error: { code: string } }).error.code;
  const on = ['--scope', 'task', '--owner', 'task-42'];

  beforeAll(() => {
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-folder-cli-'));
    store = path.join(dir, 'store');
    env = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => !e[0].startsWith('HOLDFAST_') && e[1] !== undefined),
    );
    env.HOLDFAST_CACHE_DIR = path.join(dir, 'cache');
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('put from a file and from stdin, get to stdout and to -o FILE, ls', async () => {
    const local = path.join(dir, 'notes.md');
    fs.writeFileSync(local, '# notes\n');
    const put = await holdfast(['--json', 'folder', 'put', ...on, 'docs/notes.md', local, '--content-type', 'text/markdown']);
    expect(put.code, put.stderr).toBe(0);
    expect(json(put)).toMatchObject({
      applied: true,
      entry: { path: 'docs/notes.md', size: 8, sha256: sha256('# notes\n'), contentType: 'text/markdown' },
    });

    const large = randomBytes(LARGE_BYTES);
    const fromStdin = await holdfast(['--json', 'folder', 'put', ...on, 'bin/tool', '--executable', '--sha256', sha256(large)], large);
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(json(fromStdin).entry).toMatchObject({ size: LARGE_BYTES, sha256: sha256(large), executable: true });

    const toStdout = await holdfast(['folder', 'get', ...on, 'bin/tool']);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    expect(sha256(toStdout.stdout)).toBe(sha256(large));
    const target = path.join(dir, 'tool.out');
    const toFile = await holdfast(['--json', 'folder', 'get', ...on, 'bin/tool', '-o', target]);
    expect(toFile.code, toFile.stderr).toBe(0);
    expect(sha256(fs.readFileSync(target))).toBe(sha256(large));
    expect(fs.statSync(target).mode & 0o111).not.toBe(0);
    expect(fs.readdirSync(dir).filter((name) => name.endsWith('.partial'))).toEqual([]);

    const ls = await holdfast(['--json', 'folder', 'ls', ...on]);
    expect(ls.code, ls.stderr).toBe(0);
    expect(json(ls).files.map((f: { path: string }) => f.path)).toEqual(['bin', 'bin/tool', 'docs', 'docs/notes.md']);
    const human = await holdfast(['folder', 'ls', ...on]);
    expect(human.stdout.toString()).toContain('docs/notes.md');
  });

  it('--op-id: the same id again is a no-op, with other content CONFLICT (exit 1); a bad path is INVALID_PATH (exit 2)', async () => {
    const first = await holdfast(['--json', 'folder', 'put', ...on, 'op.txt', '--op-id', 'op-1'], Buffer.from('one'));
    expect(json(first).applied).toBe(true);
    const again = await holdfast(['--json', 'folder', 'put', ...on, 'op.txt', '--op-id', 'op-1'], Buffer.from('one'));
    expect(again.code).toBe(0);
    expect(json(again).applied).toBe(false);
    const other = await holdfast(['--json', 'folder', 'put', ...on, 'op.txt', '--op-id', 'op-1'], Buffer.from('two'));
    expect(other.code).toBe(1);
    expect(errorCode(other)).toBe('CONFLICT');
    const generated = await holdfast(['folder', 'put', ...on, 'op2.txt'], Buffer.from('x'));
    expect(generated.code).toBe(0);
    expect(generated.stderr).toMatch(/operation id cli-[0-9a-f-]{36}/);

    for (const bad of ['../secret', '/absolute', 'a//b', '.holdfast/x']) {
      const run = await holdfast(['--json', 'folder', 'put', ...on, bad], Buffer.from('x'));
      expect(run.code, bad).toBe(2);
      expect(errorCode(run), bad).toBe('INVALID_PATH');
    }
    const missingFile = await holdfast(['--json', 'folder', 'get', ...on, 'nope.txt', '-o', path.join(dir, 'nope.out')]);
    expect(missingFile.code).toBe(1);
    expect(errorCode(missingFile)).toBe('NOT_FOUND');
    expect(fs.existsSync(path.join(dir, 'nope.out'))).toBe(false);
    const badScope = await holdfast(['folder', 'ls', '--scope', 'secrets', '--owner', 'x']);
    expect(badScope.code).toBe(2);
  });

  it('mkdir, rm to the trash, restore, purge and purge --collection', async () => {
    const owner = ['--scope', 'project', '--owner', 'p-1'];
    expect((await holdfast(['folder', 'mkdir', ...owner, 'a/b'])).code).toBe(0);
    expect((await holdfast(['folder', 'put', ...owner, 'a/b/c.txt'], Buffer.from('c'))).code).toBe(0);
    const rm = await holdfast(['--json', 'folder', 'rm', ...owner, 'a']);
    expect(json(rm)).toMatchObject({ applied: true, removed: 3 });
    expect(json(await holdfast(['--json', 'folder', 'ls', ...owner])).files).toEqual([]);
    const trash = json(await holdfast(['--json', 'folder', 'ls', ...owner, '--trash'])).files as { id: string; path: string }[];
    expect(trash.map((f) => f.path).sort()).toEqual(['a', 'a/b', 'a/b/c.txt']);
    const restored = await holdfast(['--json', 'folder', 'restore', ...owner, trash.find((f) => f.path === 'a')?.id ?? '']);
    expect(json(restored)).toMatchObject({ applied: true, restored: 3 });
    expect((await holdfast(['folder', 'get', ...owner, 'a/b/c.txt'])).stdout.toString()).toBe('c');

    expect((await holdfast(['folder', 'rm', ...owner, 'a/b/c.txt'])).code).toBe(0);
    const [trashed] = json(await holdfast(['--json', 'folder', 'ls', ...owner, '--trash'])).files as { id: string }[];
    const purged = await holdfast(['--json', 'folder', 'purge', ...owner, trashed?.id ?? '']);
    expect(json(purged)).toMatchObject({ applied: true, purged: 1 });
    const neither = await holdfast(['--json', 'folder', 'purge', ...owner]);
    expect(neither.code).toBe(2);
    expect(errorCode(neither)).toBe('INVALID_INPUT');
    const all = await holdfast(['--json', 'folder', 'purge', ...owner, '--collection']);
    expect(json(all)).toMatchObject({ purged: 2 });
    expect(json(await holdfast(['--json', 'folder', 'ls', ...owner])).files).toEqual([]);
    const unknownTenant = await holdfast(['--json', 'folder', 'ls', ...owner, '--tenant', 'nobody']);
    expect(unknownTenant.code).toBe(1);
    expect(errorCode(unknownTenant)).toBe('NOT_FOUND');
  });

  it('sync lists the save state per sandbox (none yet); refresh takes a bound run and refuses an ended one', async () => {
    const none = await holdfast(['--json', 'folder', 'sync', ...on]);
    expect(none.code, none.stderr).toBe(0);
    expect(json(none)).toEqual({ sandboxes: [] });
    const deployment = json(await holdfast(['--json', 'deployment', 'create', '--provider', 'local']));
    const run = await holdfast(['--json', 'run', 'create', '--deployment', deployment.id, '--task', 'task-42']);
    expect(run.code, run.stderr).toBe(0);
    const runId = json(run).id as string;
    const queued = await holdfast(['--json', 'folder', 'refresh', ...on, '--run', runId]);
    expect(queued.code, queued.stderr).toBe(0);
    expect(json(queued)).toEqual({ queued: false });
    const unbound = await holdfast(['--json', 'folder', 'refresh', '--scope', 'project', '--owner', 'p-1', '--run', runId]);
    expect(unbound.code).toBe(1);
    expect(errorCode(unbound)).toBe('NOT_FOUND');
    expect((await holdfast(['run', 'end', runId])).code).toBe(0);
    const ended = await holdfast(['--json', 'folder', 'refresh', ...on, '--run', runId]);
    expect(ended.code).toBe(1);
    expect(errorCode(ended)).toBe('CONFLICT');
  });
});
