import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { openHoldfast } from '../src/holdfast.js';
import { holdfastStores } from '../src/tanstack/index.js';

const repo = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

/** What a child process prints after importing `holdfast/tanstack` by the package name (the built `dist/`, `npm run build` first). */
const CHILD = `
import { openHoldfast } from 'holdfast';
import { holdfastStores, HoldfastSandboxInstanceStore, HoldfastSandboxStore } from 'holdfast/tanstack';
const hf = await openHoldfast({ store: process.argv[1] });
const { store } = holdfastStores(hf);
const record = await store.getVersioned('thread-key');
await store.upsert({ ...record, key: 'thread-key', latestRunId: 'run-from-child', updatedAt: 2 });
console.log(JSON.stringify({ before: record, after: await store.getVersioned('thread-key'), alias: HoldfastSandboxInstanceStore === HoldfastSandboxStore }));
await hf.close();
`;

it('holdfast/tanstack resolves through the package exports, and a child process resumes the record this one wrote', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-tanstack-pkg-'));
  dirs.push(dir);
  const hf = await openHoldfast({ store: dir, cacheDir: path.join(dir, 'cache') });
  await holdfastStores(hf).store.upsert({
    key: 'thread-key',
    provider: 'bwrap',
    providerSandboxId: 'sb-1',
    threadId: 'thread-1',
    updatedAt: 1,
  });
  await hf.close();
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD, dir], { cwd: repo });
  const out = JSON.parse(stdout) as {
    before: { version: number; providerSandboxId: string };
    after: { version: number; latestRunId: string };
    alias: boolean;
  };
  expect(out.before).toMatchObject({ version: 1, providerSandboxId: 'sb-1' });
  expect(out.after).toMatchObject({ version: 2, latestRunId: 'run-from-child' });
  expect(out.alias).toBe(true);
}, 60_000);
