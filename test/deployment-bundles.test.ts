import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLE_WORKSPACE, type Holdfast, openHoldfast } from '../src/index.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { pemBlock } from './support/secret-samples.js';

/** Writes `files` (path -> content) under a fresh directory of `root`. */
function makeDir(root: string, name: string, files: Record<string, string>): string {
  const dir = path.join(root, name);
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), content);
  }
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Every file under `dir` (relative path -> content). */
function readTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const abs = path.join(entry.parentPath, entry.name);
    out[path.relative(dir, abs)] = fs.readFileSync(abs, 'utf8');
  }
  return out;
}

describe.each(BACKENDS)('deployment bundles through the library: $name', (backend) => {
  let opened: OpenedBackends;
  let hf: Holdfast;

  beforeAll(async () => {
    opened = await backend.open();
    hf = await openHoldfast({ blobs: opened.blobs, meta: opened.meta, cacheDir: path.join(opened.dir, 'hf-cache') });
  });
  afterAll(async () => {
    await hf.close();
    await opened.cleanup();
  });

  it('the same directory twice is the same bundle and the same deployment id; a different one is another', async () => {
    const files = { 'agent.mjs': 'console.log(1)\n', 'skills/a.md': '# a\n', 'node_modules/x/index.js': 'module.exports = 1\n' };
    const first = await hf.bundles.capture(makeDir(opened.dir, 'same-1', files));
    const second = await hf.bundles.capture(makeDir(opened.dir, 'same-2', files));
    expect(second).toEqual(first);
    // Nothing is left out of a bundle: node_modules is part of it.
    expect(first.files).toBe(3);
    expect(first.bytes).toBe(Object.values(files).reduce((n, c) => n + Buffer.byteLength(c), 0));
    const a = await hf.deployments.create({ provider: 'bwrap', bundle: first });
    const b = await hf.deployments.create({ provider: 'bwrap', bundle: second.rootTree });
    expect(b.id).toBe(a.id);
    expect(b.created).toBe(false);
    expect((await hf.deployments.get(a.id)).spec.bundle).toEqual(first);
    const plain = await hf.deployments.create({ provider: 'bwrap' });
    expect(plain.id).not.toBe(a.id);
    expect((await hf.deployments.get(plain.id)).spec).toMatchObject({ bundle: null, bundlePath: null });
    const other = await hf.bundles.capture(makeDir(opened.dir, 'other', { ...files, 'agent.mjs': 'console.log(2)\n' }));
    expect(other.rootTree).not.toBe(first.rootTree);
    expect((await hf.deployments.create({ provider: 'bwrap', bundle: other })).id).not.toBe(a.id);
    // Files and bytes come from the capture, never from the caller.
    const forged = await hf.deployments.create({ provider: 'bwrap', bundle: { ...first, files: 99 } });
    expect(forged.id).toBe(a.id);
  });

  it('a bundle holding a private key, a credential path or a special file is refused with its finding, and nothing is captured', async () => {
    const before = await hf.snapshots.log(BUNDLE_WORKSPACE);
    const keyDir = makeDir(opened.dir, 'with-key', { 'agent.mjs': 'ok\n', 'keys/deploy.pem': pemBlock('OPENSSH PRIVATE KEY') });
    const refused = await hf.bundles.capture(keyDir).catch((e: unknown) => e as { code: string; data: Record<string, unknown> });
    expect(refused).toMatchObject({ code: 'SECRET_EXCLUDED', data: { path: 'keys/deploy.pem', reason: 'secret-content' } });
    expect((refused as unknown as { data: { rule: string } }).data.rule).toMatch(/\S/);
    const envDir = makeDir(opened.dir, 'with-env', { 'agent.mjs': 'ok\n', '.env': 'A=1\n' });
    expect(await hf.bundles.capture(envDir).catch((e: unknown) => e)).toMatchObject({
      code: 'SECRET_EXCLUDED',
      data: { path: '.env', reason: 'secret-path' },
    });
    const fifoDir = makeDir(opened.dir, 'with-escape', { 'agent.mjs': 'ok\n' });
    fs.symlinkSync('/etc/passwd', path.join(fifoDir, 'passwd'));
    expect(await hf.bundles.capture(fifoDir).catch((e: unknown) => e)).toMatchObject({
      code: 'INVALID_INPUT',
      data: { path: 'passwd', reason: 'symlink-escape' },
    });
    const after = await hf.snapshots.log(BUNDLE_WORKSPACE);
    expect(after.filter((c) => c.status === 'ready').length).toBe(before.filter((c) => c.status === 'ready').length);
    expect(after.filter((c) => c.status === 'failed').map((c) => c.error?.code)).toEqual(
      expect.arrayContaining(['SECRET_EXCLUDED', 'INVALID_INPUT']),
    );
  });

  it('a bundle must be captured by this tenant; the bundle workspace takes no workspace checkpoint', async () => {
    const captured = await hf.bundles.capture(makeDir(opened.dir, 'tenant-a', { 'a.txt': 'tenant a\n' }));
    const other = await hf.forTenant('bundles-other');
    expect(await codeOf(other.deployments.create({ provider: 'bwrap', bundle: captured }))).toBe('NOT_FOUND');
    expect(await codeOf(hf.deployments.create({ provider: 'bwrap', bundle: 'f'.repeat(64) }))).toBe('NOT_FOUND');
    expect(await codeOf(hf.deployments.create({ provider: 'bwrap', bundle: 'nope' }))).toBe('INVALID_INPUT');
    // A workspace checkpoint's tree is not a bundle, even with the same tenant.
    const ws = await hf.snapshots.checkpoint({ dir: makeDir(opened.dir, 'plain-ws', { 'b.txt': 'b\n' }), workspace: 'plain' });
    expect(await codeOf(hf.deployments.create({ provider: 'bwrap', bundle: ws.checkpoint.rootTree as string }))).toBe('NOT_FOUND');
    expect(
      await codeOf(hf.snapshots.checkpoint({ dir: makeDir(opened.dir, 'sneak', { 'c.txt': 'c\n' }), workspace: BUNDLE_WORKSPACE })),
    ).toBe('INVALID_INPUT');
  });

  it('bundles survive retention and GC (keep-last 0, no grace) and the GC sweep', async () => {
    const kept = { 'agent.mjs': 'export const kept = true;\n', 'big.bin': 'x'.repeat(300_000) };
    const bundle = await hf.bundles.capture(makeDir(opened.dir, 'kept', kept));
    for (let i = 0; i < 3; i += 1) await hf.bundles.capture(makeDir(opened.dir, `later-${i}`, { 'n.txt': `${i}\n` }));
    await hf.deployments.create({ provider: 'bwrap', bundle });
    const retention = { keepLast: 0, keepDaily: 0 };
    await hf.snapshots.gc({ retention, graceMs: 0 });
    await hf.snapshots.gc({ retention, graceMs: 0, now: Date.now() + 2 * 24 * 3600 * 1000 });
    await hf.sweepGarbage();
    const checkpoint = (await hf.snapshots.log(BUNDLE_WORKSPACE)).find((c) => c.status === 'ready' && c.rootTree === bundle.rootTree);
    expect(checkpoint).toBeDefined();
    const out = path.join(opened.dir, 'kept-restored');
    await hf.snapshots.restore({ workspace: BUNDLE_WORKSPACE, checkpoint: checkpoint?.id as string, dir: out });
    expect(readTree(out)).toEqual(kept);
    expect(await hf.bundles.find(bundle.rootTree)).toEqual(bundle);
  });
});
