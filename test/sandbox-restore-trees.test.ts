import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreSandbox } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import type { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import type { OpenedBackends } from './support/backends.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { type CraftedObject, commitCrafted, dirEntry, fileEntry, rawChunk, rawTree, symlinkEntry } from './support/crafted-trees.js';
import { codeOf } from './support/error-code.js';
import { runNode } from './support/sandbox-processes.js';

/** Every entry under /workspace (type, mode, link target), as JSON. */
const MANIFEST = `
const fs = require('fs'), path = require('path');
const out = {};
(function walk(dir, rel) {
  for (const name of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, name), r = rel ? rel + '/' + name : name, st = fs.lstatSync(p);
    out[r] = st.isSymbolicLink() ? 'link:' + fs.readlinkSync(p) : (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) walk(p, r);
  }
})('/workspace', '');
process.stdout.write(JSON.stringify(out));
`;

/** Restore through the in-sandbox agent takes the same validated tree and limits as a local restore. */
describe('restore of a crafted tree through the in-sandbox agent (bwrap)', () => {
  let b: OpenedBackends;
  let provider: BwrapSandboxProvider;
  let sandbox: SandboxHandle;
  let before: string;
  const chunk = rawChunk('payload\n');

  beforeAll(async () => {
    ({ b, provider } = await openBwrapBackends());
    sandbox = await provider.create();
    await runNode(sandbox, `require('fs').writeFileSync('/workspace/keep.txt', 'mine')`);
    before = await runNode(sandbox, MANIFEST);
  }, 60_000);
  afterAll(async () => {
    if (sandbox !== undefined) await provider.destroy(sandbox.id);
    await b?.cleanup();
  });

  async function restoreCrafted(workspace: string, objects: readonly CraftedObject[], root: CraftedObject): Promise<string> {
    await commitCrafted(b, workspace, [chunk, ...objects], root);
    const code = await codeOf(restoreSandbox(b.snapshots, { sandbox: sandbox.id, workspace, replace: true }));
    expect(await runNode(sandbox, MANIFEST)).toBe(before);
    return code;
  }

  it('refuses a symlink chain out of the workspace and a setuid file (INTEGRITY)', async () => {
    const chain = rawTree([symlinkEntry('up', '..'), symlinkEntry('up2', 'up/..')]);
    expect(await restoreCrafted('chain', [chain], rawTree([dirEntry('d', chain)]))).toBe('INTEGRITY');
    expect(await restoreCrafted('setuid', [], rawTree([fileEntry('su', chunk, 0o4755)]))).toBe('INTEGRITY');
  });

  it('refuses a fan-out through shared subtrees (LIMIT_EXCEEDED)', async () => {
    const objects: CraftedObject[] = [];
    let level = rawTree([fileEntry('f0', chunk), fileEntry('f1', chunk)]);
    for (let i = 0; i < 16; i += 1) {
      objects.push(level);
      level = rawTree([dirEntry('a', level), dirEntry('b', level)]);
    }
    expect(await restoreCrafted('fan-out', objects, level)).toBe('LIMIT_EXCEEDED');
  });
});
