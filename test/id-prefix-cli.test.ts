import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { sha256Hex } from '../src/core/hash.js';
import { openHoldfast } from '../src/index.js';
import { writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');
/** Ids chosen by this test share these 8-character prefixes. */
const SHARED = 'c0ffee00';
const RUN_SHARED = 'feed0000';

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

describe('holdfast ids on the command line: exact, unique prefix, latest (compiled bin)', () => {
  let dir: string;
  let store: string;
  let first: string;
  let second: string;
  let foreign: string;
  const holdfast = (args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_META: '', HOLDFAST_BLOBS: '', HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      execFile(process.execPath, [bin, '--store', store, ...args], { env }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
      });
    });
  const json = async <T>(args: string[]): Promise<T> => {
    const r = await holdfast(['--json', ...args]);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as T;
  };
  const failure = async (args: string[]) => {
    const r = await holdfast(['--json', ...args]);
    return { code: r.code, error: (JSON.parse(r.stderr) as { error: { code: string; data: { candidates?: string[] } } }).error };
  };

  beforeAll(async () => {
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-ids-cli-'));
    store = path.join(dir, 'store');
    const ws = path.join(dir, 'ws');
    writeFile(ws, 'a.txt', 'one\n');
    first = (await json<{ id: string }>(['checkpoint', ws, '-w', 'demo'])).id;
    writeFile(ws, 'a.txt', 'two\n');
    second = (await json<{ id: string }>(['checkpoint', ws, '-w', 'demo'])).id;

    const hf = await openHoldfast({ config: loadConfig({ store }), cacheDir: path.join(dir, 'cache') });
    try {
      const other = await hf.forTenant('someone-else');
      foreign = (await other.snapshots.checkpoint({ dir: ws, workspace: 'theirs' })).checkpoint.id;
      const mine = await hf.snapshots.workspace('crafted', true);
      const theirs = await other.snapshots.workspace('crafted', true);
      await hf.meta.checkpoints.createPending({ id: `${SHARED}-aaaa`, workspaceId: mine.id, reason: 'manual' });
      await hf.meta.checkpoints.createPending({ id: `${SHARED}-bbbb`, workspaceId: mine.id, reason: 'manual' });
      await hf.meta.checkpoints.createPending({ id: `${SHARED}-cccc`, workspaceId: theirs.id, reason: 'manual' });
      const deploymentId = sha256Hex('ids-cli');
      for (const [tenant, id] of [
        [hf.tenant, `${RUN_SHARED}-1111`],
        [other.tenant, `${RUN_SHARED}-3333`],
      ] as const) {
        await hf.meta.deployments.put({ tenantId: tenant.id, id: deploymentId, spec: JSON.stringify({ provider: 'bwrap' }) });
        const runWs = await hf.meta.workspaces.create({ tenantId: tenant.id, name: `run:${id}` });
        await hf.meta.runs.create({ id, tenantId: tenant.id, workspaceId: runWs.id, channel: null, deploymentId });
      }
    } finally {
      await hf.close();
    }
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('ls, cat, diff and restore take a prefix or latest; latest is the head (the newest ready checkpoint)', async () => {
    expect(await json<{ entries: Array<{ name: string }> }>(['ls', first.slice(0, 8)])).toMatchObject({ entries: [{ name: 'a.txt' }] });
    expect((await holdfast(['cat', 'latest', 'a.txt'])).stdout).toBe('two\n');
    expect((await holdfast(['cat', first.slice(0, 12), 'a.txt'])).stdout).toBe('one\n');
    expect(await json<Array<{ path: string; change: string }>>(['diff', first.slice(0, 9), 'latest'])).toEqual([
      expect.objectContaining({ path: 'a.txt', change: 'modified' }),
    ]);
    const restored = await json<{ checkpointId: string }>(['restore', path.join(dir, 'r1'), '-w', 'demo', '-c', 'latest']);
    expect(restored.checkpointId).toBe(second);
    expect(fs.readFileSync(path.join(dir, 'r1', 'a.txt'), 'utf8')).toBe('two\n');
    const older = await json<{ checkpointId: string }>(['restore', path.join(dir, 'r2'), '-w', 'demo', '-c', first.slice(0, 8)]);
    expect(older.checkpointId).toBe(first);
  });

  it('a short prefix exits 2 (INVALID_INPUT); an ambiguous one is CONFLICT with only this tenant\u2019s candidates; foreign ids are NOT_FOUND', async () => {
    expect(await failure(['ls', first.slice(0, 7)])).toMatchObject({ code: 2, error: { code: 'INVALID_INPUT' } });
    const ambiguous = await failure(['ls', SHARED]);
    expect(ambiguous).toMatchObject({ code: 1, error: { code: 'CONFLICT', data: { candidates: [`${SHARED}-aaaa`, `${SHARED}-bbbb`] } } });
    for (const id of [foreign, foreign.slice(0, 8), `${SHARED}-c`]) {
      expect(await failure(['ls', id]), id).toMatchObject({ code: 1, error: { code: 'NOT_FOUND' } });
    }
    // A checkpoint of another workspace of this tenant is not restored into this one.
    expect(await failure(['restore', path.join(dir, 'r3'), '-w', 'crafted', '-c', first.slice(0, 8)])).toMatchObject({
      error: { code: 'NOT_FOUND' },
    });
  });

  it('run show takes a prefix or latest; across tenants an ambiguity lists both, --tenant narrows it', async () => {
    const shown = await json<{ run: { id: string }; tenant: string }>(['run', 'show', `${RUN_SHARED}-1`]);
    expect(shown).toMatchObject({ run: { id: `${RUN_SHARED}-1111` }, tenant: 'default' });
    expect((await json<{ run: { id: string } }>(['run', 'show', 'latest'])).run.id).toBe(`${RUN_SHARED}-3333`);
    expect((await json<{ run: { id: string } }>(['run', 'show', 'latest', '--tenant', 'default'])).run.id).toBe(`${RUN_SHARED}-1111`);
    expect(await failure(['run', 'show', RUN_SHARED])).toMatchObject({
      code: 1,
      error: { code: 'CONFLICT', data: { candidates: [`${RUN_SHARED}-1111`, `${RUN_SHARED}-3333`] } },
    });
    expect((await json<{ run: { id: string } }>(['run', 'show', RUN_SHARED, '--tenant', 'default'])).run.id).toBe(`${RUN_SHARED}-1111`);
    expect(await failure(['run', 'show', `${RUN_SHARED}-3`, '--tenant', 'default'])).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(await failure(['run', 'show', 'feed000'])).toMatchObject({ code: 2, error: { code: 'INVALID_INPUT' } });
    // Resolved to the one run, which needs no recovery: CONFLICT naming it and its state.
    expect(await failure(['lease', 'resolve', `${RUN_SHARED}-1`])).toMatchObject({
      error: { code: 'CONFLICT', data: { runId: `${RUN_SHARED}-1111`, state: 'free' } },
    });
  });
});
