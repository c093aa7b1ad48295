import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { expectBwrapInstalled, runNode } from './support/sandbox-processes.js';

/**
 * A library user's injected providers are the ones every sandbox path uses: `hf.sandboxes`
 * (what the CLI's `--sandbox` calls) finds and reaches a sandbox only its injected provider
 * knows, where the shipped providers (rooted elsewhere) do not find it.
 */
describe('injected providers on the sandbox checkpoint and restore path', () => {
  let b: OpenedBackends;
  let hf: Holdfast;
  let custom: BwrapSandboxProvider;

  beforeAll(async () => {
    expectBwrapInstalled();
    b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    // The shipped providers look under HOLDFAST_SANDBOX_DIR; the injected one keeps its sandboxes elsewhere.
    process.env.HOLDFAST_SANDBOX_DIR = path.join(b.dir, 'shipped');
    custom = new BwrapSandboxProvider({ root: path.join(b.dir, 'injected', 'bwrap') });
    hf = await openHoldfast({ blobs: b.blobs, meta: b.meta, cacheDir: path.join(b.dir, 'cache'), providers: () => custom });
  }, 60_000);
  afterAll(async () => {
    await hf?.close();
    await b?.cleanup();
  });

  it('checkpoints and restores a sandbox only the injected provider knows', async () => {
    const source = await custom.create();
    await runNode(source, "require('fs').writeFileSync('/workspace/hello.txt', 'from the injected provider\\n')");
    const saved = await hf.sandboxes.checkpoint({ sandbox: source.id, workspace: 'injected' });
    expect(saved.stats.files).toBe(1);
    const target = await custom.create();
    const receipt = await hf.sandboxes.restore({ sandbox: target.id, workspace: 'injected' });
    expect(receipt).toMatchObject({ files: 1, verified: true, target: `sandbox ${target.id}:/workspace` });
    expect(await runNode(target, "process.stdout.write(require('fs').readFileSync('/workspace/hello.txt', 'utf8'))")).toBe(
      'from the injected provider\n',
    );
    // The shipped providers do not know it: the injected lookup is what found it.
    expect(fs.existsSync(path.join(b.dir, 'shipped'))).toBe(false);
    const shipped = await openHoldfast({ blobs: b.blobs, meta: b.meta, cacheDir: path.join(b.dir, 'cache-2') });
    try {
      expect(await codeOf(shipped.sandboxes.checkpoint({ sandbox: source.id, workspace: 'injected' }))).toBe('NOT_FOUND');
    } finally {
      await shipped.close();
    }
    await custom.destroy(source.id);
    await custom.destroy(target.id);
  });
});
