import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

/** The `error.code` of a `--json` error document, or undefined when stderr holds none (a usage error's text). */
function errorCode(stderr: string): string | undefined {
  try {
    return (JSON.parse(stderr) as { error: { code: string } }).error.code;
  } catch {
    return undefined;
  }
}

interface Run {
  readonly exit: number;
  /** The `error.code` of the `--json` error document on stderr. */
  readonly code: string | undefined;
}

describe('holdfast exit codes (compiled bin): the caller’s bad input exits 2, a failed operation 1', () => {
  let dir: string;
  let store: string;
  let checkpoint: string;
  const holdfast = (args: string[]): Promise<Run & { stdout: string }> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_META: '', HOLDFAST_BLOBS: '', HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      execFile(process.execPath, [bin, '--store', store, '--json', ...args], { env }, (error, stdout, stderr) => {
        const exit = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ exit, code: errorCode(stderr), stdout });
      });
    });

  beforeAll(async () => {
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-cli-exit-'));
    store = path.join(dir, 'store');
    const ws = path.join(dir, 'ws');
    writeFile(ws, 'a/file.txt', 'inside\n');
    writeFile(dir, 'outside.txt', 'outside the checkpoint\n');
    const created = await holdfast(['checkpoint', ws, '-w', 'w']);
    expect(created.exit).toBe(0);
    checkpoint = (JSON.parse(created.stdout) as { id: string }).id;
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a reader that closes the pipe early (holdfast … | head) ends it quietly with exit 0, not an EPIPE crash', async () => {
    const outcome = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [bin, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      // Read nothing: close our end at once, as `head -0` would.
      child.stdout.destroy();
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(outcome).toEqual({ code: 0, stderr: '' });
  });

  it('cat and ls of a path that climbs out of the checkpoint are INVALID_PATH, exit 2', async () => {
    for (const bad of ['../outside.txt', '/etc/passwd', 'a//file.txt', 'a/./file.txt']) {
      expect({ bad, ...(await holdfast(['cat', checkpoint, bad])) }).toMatchObject({
        bad,
        exit: EXIT_USAGE,
        code: 'INVALID_PATH',
        stdout: '',
      });
      expect({ bad, ...(await holdfast(['ls', checkpoint, bad])) }).toMatchObject({
        bad,
        exit: EXIT_USAGE,
        code: 'INVALID_PATH',
        stdout: '',
      });
    }
  });

  it('a well-formed path that is not there is NOT_FOUND, exit 1', async () => {
    expect(await holdfast(['cat', checkpoint, 'a/missing.txt'])).toMatchObject({ exit: EXIT_FAILURE, code: 'NOT_FOUND' });
  });

  it('a checkpoint of a directory that is not there, of a file, or with an unknown reason exits 2 and records nothing', async () => {
    const missing = await holdfast(['checkpoint', path.join(dir, 'nope'), '-w', 'ghost']);
    expect(missing).toMatchObject({ exit: EXIT_USAGE, code: 'INVALID_INPUT' });
    const file = await holdfast(['checkpoint', path.join(dir, 'outside.txt'), '-w', 'ghost']);
    expect(file).toMatchObject({ exit: EXIT_USAGE, code: 'INVALID_INPUT' });
    const bogus = await holdfast(['checkpoint', path.join(dir, 'ws'), '-w', 'ghost', '--reason', 'bogus']);
    expect(bogus.exit).toBe(EXIT_USAGE);
    // No workspace "ghost", and no failed checkpoint anywhere: the one workspace has its one ready checkpoint.
    const list = JSON.parse((await holdfast(['workspaces'])).stdout) as Array<{ name: string }>;
    expect(list.map((w) => w.name)).toEqual(['w']);
    const log = JSON.parse((await holdfast(['log', '-w', 'w'])).stdout) as Array<{ status: string }>;
    expect(log.map((c) => c.status)).toEqual(['ready']);
  });

  it('every usage error exits 2 at any depth and, under --json, is a JSON error document; --help and --version exit 0', async () => {
    for (const args of [['sandbox', 'create', '--bogus'], ['sandbox', 'exec'], ['sandbox'], [], ['checkpoint'], ['restore', '--nope']]) {
      expect(await holdfast(args), args.join(' ')).toMatchObject({ exit: EXIT_USAGE, code: 'INVALID_INPUT', stdout: '' });
    }
    expect((await holdfast(['--help'])).exit).toBe(0);
    expect((await holdfast(['--version'])).exit).toBe(0);
  });
});
