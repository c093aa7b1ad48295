import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpointSandbox, restoreSandbox } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import type { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import type { Snapshots } from '../src/snapshot/snapshots.js';
import type { OpenedBackends } from './support/backends.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { runNode } from './support/sandbox-processes.js';

/** Fills /workspace inside the sandbox: many small files, one 50 MB file, modes, links, empty dirs. */
const FILL = `
const fs = require('fs'), crypto = require('crypto');
const w = '/workspace';
for (let d = 0; d < 50; d++) {
  fs.mkdirSync(w + '/src/d' + d, { recursive: true });
  for (let f = 0; f < 100; f++) fs.writeFileSync(w + '/src/d' + d + '/f' + f + '.txt', 'file ' + d + '/' + f + '\\n'.repeat(f));
}
const big = Buffer.alloc(50 * 1024 * 1024);
for (let i = 0; i < big.length; i += 32) crypto.createHash('sha256').update(String(i)).digest().copy(big, i);
fs.writeFileSync(w + '/big.bin', big);
fs.writeFileSync(w + '/run.sh', '#!/bin/sh\\necho hi\\n'); fs.chmodSync(w + '/run.sh', 0o755);
fs.writeFileSync(w + '/private.txt', 'p'); fs.chmodSync(w + '/private.txt', 0o600);
fs.symlinkSync('run.sh', w + '/link'); fs.symlinkSync('../big.bin', w + '/src/up');
fs.mkdirSync(w + '/empty/deeper', { recursive: true });
fs.writeFileSync(w + '/.env', 'TOKEN=never-stored\\n');
const old = new Date('2024-03-04T05:06:07.089Z');
for (const p of ['/run.sh', '/big.bin', '/private.txt']) fs.utimesSync(w + p, old, old);
`;

/** Prints every entry under /workspace (type, mode, mtime, sha256 or link target) as JSON. */
const MANIFEST = `
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const out = {};
(function walk(dir, rel) {
  for (const name of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, name), r = rel ? rel + '/' + name : name, st = fs.lstatSync(p);
    if (st.isDirectory()) { out[r] = { type: 'dir', mode: st.mode & 0o7777 }; walk(p, r); }
    else if (st.isSymbolicLink()) out[r] = { type: 'symlink', target: fs.readlinkSync(p) };
    else out[r] = { type: 'file', mode: st.mode & 0o7777, mtimeMs: Math.floor(st.mtimeMs), sha256: crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex') };
  }
})('/workspace', '');
process.stdout.write(JSON.stringify(out));
`;

describe('checkpoint and restore through the in-sandbox agent (bwrap)', () => {
  let b: OpenedBackends;
  let snapshots: Snapshots;
  let provider: BwrapSandboxProvider;

  beforeAll(async () => {
    ({ b, provider } = await openBwrapBackends());
    ({ snapshots } = b);
  }, 60_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('a workspace survives its sandbox: every hash, mode and link comes back in a new one', async () => {
    const first = await provider.create();
    await runNode(first, FILL);
    const before = JSON.parse(await runNode(first, MANIFEST)) as Record<string, unknown>;
    delete before['.env'];
    expect(Object.keys(before).length).toBeGreaterThan(5000);

    const saved = await checkpointSandbox(snapshots, { sandbox: first.id, workspace: 'agent-run' });
    expect(saved.stats).toMatchObject({ files: 5003, symlinks: 2 });
    expect(saved.excluded.map((e) => [e.path, e.reason])).toEqual([['.env', 'secret-path']]);
    // The agent's stat cache makes the next checkpoint of an unchanged sandbox read nothing.
    const again = await checkpointSandbox(snapshots, { sandbox: first.id, workspace: 'agent-run' });
    expect(again.stats).toMatchObject({ filesHashed: 0, objectsWritten: 0, blobWrites: 0 });

    await provider.destroy(first.id);
    expect(await provider.get(first.id)).toBeUndefined();

    const second = await provider.create();
    const receipt = await restoreSandbox(snapshots, { sandbox: second.id, workspace: 'agent-run' });
    expect(receipt).toMatchObject({ files: 5003, symlinks: 2, verified: true });
    const after = JSON.parse(await runNode(second, MANIFEST)) as Record<string, unknown>;
    expect(after).toEqual(before);

    // Restored through the agent, the new sandbox's next checkpoint is a no-change one too.
    const third = await checkpointSandbox(snapshots, { sandbox: second.id, workspace: 'agent-run' });
    expect(third.stats).toMatchObject({ filesHashed: 0, objectsWritten: 0 });
    expect(third.checkpoint.rootTree).toBe(saved.checkpoint.rootTree);

    // A non-empty sandbox workspace is not replaced by accident.
    await expect(restoreSandbox(snapshots, { sandbox: second.id, workspace: 'agent-run' })).rejects.toMatchObject({ code: 'CONFLICT' });
    await provider.destroy(second.id);
  }, 300_000);

  it('restoring the same checkpoint again puts back what was changed since, however often', async () => {
    const sandbox = await provider.create();
    const run = (script: string) => sandbox.run(['sh', '-c', script], { cwd: sandbox.workspaceRoot });
    await run('mkdir -p d && echo original > d/a.txt && echo kept > b.txt');
    const saved = await checkpointSandbox(snapshots, { sandbox: sandbox.id, workspace: 'agent-twice' });
    for (let round = 0; round < 3; round += 1) {
      await run('echo edited > d/a.txt && rm b.txt && echo stray > stray.txt');
      const receipt = await restoreSandbox(snapshots, {
        sandbox: sandbox.id,
        workspace: 'agent-twice',
        checkpoint: saved.checkpoint.id,
        replace: true,
      });
      expect(receipt.rootTree).toBe(saved.checkpoint.rootTree);
      const listed = await run('cat d/a.txt b.txt; ls');
      expect(listed.stdout.toString()).toBe('original\nkept\nb.txt\nd\n');
    }
    await provider.destroy(sandbox.id);
  });

  it('an unknown sandbox is NOT_FOUND', async () => {
    await expect(checkpointSandbox(snapshots, { sandbox: 'sbx-0000000000000000', workspace: 'nope' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });
});
