import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTree, writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
/** A GitHub token shape the built-in secret rules recognise (never a real token). */
const GITHUB_TOKEN = `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe('holdfast checkpoint --label/--meta, log, restore by checkpoint alone, run fork (compiled bin)', () => {
  let dir = '';
  let store = '';
  let ws = '';
  const run = (args: string[]): Promise<Result> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_META: '', HOLDFAST_BLOBS: '', HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      execFile(process.execPath, [bin, '--store', store, ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      });
    });
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  const json = async (args: string[]): Promise<any> => {
    const r = await run([...args, '--json']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-cli-labels-'));
    store = path.join(dir, 'store');
    ws = path.join(dir, 'ws');
    writeFile(ws, 'notes.md', '# notes\n');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('checkpoint keeps --label and --meta; log shows them; restore --checkpoint needs no workspace', async () => {
    const made = await json(['checkpoint', ws, '-w', 'proj', '--label', 'after tool call', '--meta', 'thread=th-9', '--meta', 'url=a=b']);
    expect(made).toMatchObject({ label: 'after tool call', meta: { thread: 'th-9', url: 'a=b' } });
    const log = await run(['log', '-w', 'proj']);
    expect(log.code).toBe(0);
    expect(log.stdout).toContain('label "after tool call"  thread=th-9, url=a=b');
    expect((await json(['log', '-w', 'proj']))[0]).toMatchObject({ id: made.id, label: 'after tool call' });
    const target = path.join(dir, 'restored');
    const receipt = await json(['restore', target, '--checkpoint', made.id.slice(0, 10)]);
    expect(receipt.checkpointId).toBe(made.id);
    expect(describeTree(target)).toEqual(describeTree(ws));
    // Neither a workspace nor a checkpoint: a usage error.
    expect((await run(['restore', path.join(dir, 'nothing')])).code).toBe(2);
  }, 120_000);

  it('attack: a credential, a control sequence or a malformed --meta is refused (exit 2) and records nothing', async () => {
    for (const flags of [
      ['--label', `with ${GITHUB_TOKEN}`],
      ['--meta', `token=${GITHUB_TOKEN}`],
      ['--label', 'clear\u001b[2Jscreen'],
      ['--meta', 'no-equals-sign'],
      ['--meta', 'k=1', '--meta', 'k=2'],
    ]) {
      const r = await run(['checkpoint', ws, '-w', 'refused', ...flags, '--json']);
      expect(r.code, flags.join(' ')).toBe(2);
    }
    expect((await json(['workspaces'])).map((w: { name: string }) => w.name)).not.toContain('refused');
  }, 120_000);

  it('run fork starts a run from a checkpoint with the same tree; an unknown checkpoint is NOT_FOUND', async () => {
    const deployment = await json(['deployment', 'create', '--provider', 'local']);
    const run1 = await json(['run', 'create', '--deployment', deployment.id]);
    const made = await json(['checkpoint', ws, '-w', 'forkable']);
    // A checkpoint of no run needs the deployment named.
    expect((await run(['run', 'fork', made.id, '--json'])).code).toBe(2);
    const forked = await json(['run', 'fork', made.id, '--deployment', deployment.id, '--label', 'from cli', '--meta', 'origin=cli']);
    expect(forked.checkpoint).toMatchObject({ rootTree: made.rootTree, forkedFrom: made.id, label: 'from cli', meta: { origin: 'cli' } });
    expect(forked.id).not.toBe(run1.id);
    const missing = await run(['run', 'fork', 'f'.repeat(36), '--json']);
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout || missing.stderr).error.code).toBe('NOT_FOUND');
  }, 120_000);
});
