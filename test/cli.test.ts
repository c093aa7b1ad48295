import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function holdfast(args: string[], env: Record<string, string> = {}, cwd = root): Promise<Run> {
  return new Promise((resolve) => {
    const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('HOLDFAST_') && !k.startsWith('AWS_')));
    execFile(process.execPath, [bin, ...args], { env: { ...cleanEnv, ...env }, cwd }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

describe('holdfast CLI (compiled bin)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-cli-'));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(await fs.readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
    const run = await holdfast(['--version']);
    expect(run).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it('--help lists the commands and the configuration variables', async () => {
    const run = await holdfast(['--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Usage: holdfast/);
    expect(run.stdout).toContain('init');
    expect(run.stdout).toContain('HOLDFAST_META');
  });

  it('an unknown command is a usage error (exit 2)', async () => {
    expect((await holdfast(['no-such-command'])).code).toBe(2);
    expect((await holdfast(['init', '--no-such-flag'])).code).toBe(2);
  });

  it('init --json on the embedded defaults creates ./.holdfast and reports a working store', async () => {
    const run = await holdfast(['init', '--json'], {}, dir);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { meta: string; blobs: string; schemaVersion: number; check: { probeBytes: number } };
    expect(out.meta).toBe(`sqlite:${path.join(dir, '.holdfast', 'meta.db')}`);
    expect(out.blobs).toBe(`file:${path.join(dir, '.holdfast', 'blobs')}`);
    expect(out.schemaVersion).toBeGreaterThanOrEqual(1);
    expect(out.check.probeBytes).toBe(4096);
    await fs.access(path.join(dir, '.holdfast', 'meta.db'));
    // The probe is removed again: no objects are left behind.
    const leftovers = await fs.readdir(path.join(dir, '.holdfast', 'blobs', 'probe')).catch(() => []);
    expect(leftovers).toEqual([]);
    // Idempotent: a second init succeeds on the same store.
    expect((await holdfast(['init', '--json'], {}, dir)).code).toBe(0);
  });

  it('--store DIR wins over the environment', async () => {
    const store = path.join(dir, 'explicit');
    const run = await holdfast(['--store', store, 'init', '--json'], { HOLDFAST_META: 'postgres://nobody@127.0.0.1:1/none' });
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as { meta: string }).meta).toBe(`sqlite:${path.join(store, 'meta.db')}`);
  });

  it('a bad HOLDFAST_BLOBS fails with INVALID_INPUT naming the variable, exit 2, as JSON with --json', async () => {
    const run = await holdfast(['init', '--json'], { HOLDFAST_BLOBS: 'ftp://nope' }, dir);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    const body = JSON.parse(run.stderr) as { error: { code: string; data: { variable: string } } };
    expect(body.error).toMatchObject({ code: 'INVALID_INPUT', data: { variable: 'HOLDFAST_BLOBS' } });
  });

  it('an unreachable PostgreSQL fails with STORE_UNAVAILABLE and exit 1, without the password', async () => {
    const run = await holdfast(['init', '--json'], { HOLDFAST_META: 'postgres://u:hunter2@127.0.0.1:1/none' }, dir);
    expect(run.code).toBe(1);
    expect((JSON.parse(run.stderr) as { error: { code: string } }).error.code).toBe('STORE_UNAVAILABLE');
    expect(run.stderr).not.toContain('hunter2');
  });
});

/** Bare packages reachable from `entry` through static imports of the compiled code. */
async function staticPackages(entry: string): Promise<Set<string>> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const source = await fs.readFile(file, 'utf8');
    for (const match of source.matchAll(/^(?:import|export)\s[^;]*?from\s+['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]/gm)) {
      const spec = match[1] ?? match[2] ?? '';
      if (spec.startsWith('.')) queue.push(path.resolve(path.dirname(file), spec));
      else if (!spec.startsWith('node:'))
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] ?? spec));
    }
  }
  return packages;
}

describe('CLI start-up', () => {
  it('loads no storage SDK or driver until a command needs it', async () => {
    const packages = await staticPackages(bin);
    expect([...packages].sort()).toEqual([]);
  });
});
