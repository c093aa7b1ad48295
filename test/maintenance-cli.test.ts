import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFile } from './support/trees.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const main = path.join(root, 'src', 'cli', 'main.ts');

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

describe('holdfast verify / gc / index rebuild (CLI)', () => {
  let dir: string;
  const holdfast = (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      const env = { ...process.env, HOLDFAST_CACHE_DIR: path.join(dir, 'cache') };
      execFile(tsx, [main, '--store', path.join(dir, 'store'), ...args], { env }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
      });
    });
  const json = <T>(run: Run): T => JSON.parse(run.stdout) as T;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-maint-cli-'));
    for (const v of ['one', 'two', 'three']) {
      writeFile(path.join(dir, 'ws'), 'file.txt', `version ${v}\n`);
      expect((await holdfast('checkpoint', path.join(dir, 'ws'), '-w', 'w', '--json')).code).toBe(0);
    }
  }, 60_000);
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('verify --json on a healthy store exits 0 with ok: true', async () => {
    for (const flags of [[], ['--read-data']]) {
      const run = await holdfast('verify', ...flags, '--json');
      expect(run.code).toBe(0);
      expect(json<{ ok: boolean; checkpoints: number }>(run)).toMatchObject({ ok: true, checkpoints: 3 });
    }
  });

  it('gc --dry-run reports and changes nothing; gc then forgets by --keep-last and deletes with --grace 0s', async () => {
    type Listed = { listing: { checkpointsForgotten: string[]; packsDeleted: Array<{ id: string; size: number; objects: number }> } };
    // The local-disk driver stores key packs/ab/abc… as a file whose name starts with the pack id.
    const packFile = (id: string): string | undefined => {
      const fan = path.join(dir, 'store', 'blobs', 'packs', id.slice(0, 2));
      const name = fs.existsSync(fan) ? fs.readdirSync(fan).find((n) => n.startsWith(id)) : undefined;
      return name === undefined ? undefined : path.join(fan, name);
    };
    const dry = await holdfast('gc', '--dry-run', '--keep-last', '1', '--keep-daily', '0', '--grace', '0s', '--json');
    expect(dry.code).toBe(0);
    expect(json(dry)).toMatchObject({ dryRun: true, forgotten: 2, packsCondemned: 4 });
    const planned = json<Listed>(dry).listing;
    expect(planned.checkpointsForgotten).toHaveLength(2);
    expect(planned.packsDeleted).toHaveLength(4);
    for (const pack of planned.packsDeleted) {
      expect(fs.statSync(packFile(pack.id) ?? 'missing').size).toBe(pack.size);
      expect(pack.objects).toBeGreaterThan(0);
    }
    const text = await holdfast('gc', '--dry-run', '--keep-last', '1', '--keep-daily', '0', '--grace', '0s');
    expect(text.stdout).toContain('would delete 4 packs');
    for (const pack of planned.packsDeleted) expect(text.stdout).toContain(pack.id);
    for (const id of planned.checkpointsForgotten) expect(text.stdout).toContain(id);
    const real = await holdfast('gc', '--keep-last', '1', '--keep-daily', '0', '--grace', '0s', '--json');
    expect(json(real)).toMatchObject({ dryRun: false, forgotten: 2, packsCondemned: 4, packsDeleted: 4 });
    // What the dry run listed is exactly what the real run deleted, and those blobs are gone.
    const done = json<Listed>(real).listing;
    expect(done.packsDeleted.map((p) => p.id).sort()).toEqual(planned.packsDeleted.map((p) => p.id).sort());
    expect(done.checkpointsForgotten).toEqual(planned.checkpointsForgotten);
    for (const pack of planned.packsDeleted) expect(packFile(pack.id)).toBeUndefined();
    expect(json<{ ok: boolean }>(await holdfast('verify', '--read-data', '--json')).ok).toBe(true);
    expect((await holdfast('gc', '--grace', 'soon')).code).toBe(2);
  }, 60_000);

  it('index rebuild --json re-registers packs; verify exits 1 once a pack is gone', async () => {
    const rebuilt = await holdfast('index', 'rebuild', '--json');
    expect(rebuilt.code).toBe(0);
    expect(json(rebuilt)).toMatchObject({ packsScanned: 2, packsRegistered: 0, damaged: [] });
    const packs = path.join(dir, 'store', 'blobs', 'packs');
    const file = fs.readdirSync(packs, { recursive: true, encoding: 'utf8' }).find((p) => fs.statSync(path.join(packs, p)).isFile());
    fs.rmSync(path.join(packs, file ?? 'none'));
    const run = await holdfast('verify', '--json');
    expect(run.code).toBe(1);
    expect(json<{ ok: boolean; problems: Array<{ kind: string }> }>(run).problems.map((p) => p.kind)).toContain('missing-pack');
    expect((JSON.parse(run.stderr) as { error: { code: string } }).error.code).toBe('INTEGRITY');
    // The report says which checkpoints lost what to the missing pack, in --json and in text.
    const lost = path.basename(file ?? 'none').replace(/~$/, '');
    const { damage } = json<{ damage: Array<{ pack: string; checkpoints: Array<{ checkpointId: string; paths: string[] }> }> }>(run);
    expect(damage.map((d) => d.pack)).toEqual([lost]);
    const damaged = damage[0]?.checkpoints ?? [];
    expect(damaged.length).toBeGreaterThan(0);
    const text = await holdfast('verify');
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(lost);
    for (const c of damaged) expect(text.stdout).toContain(c.checkpointId);
  }, 60_000);
});
