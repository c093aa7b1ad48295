import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installBundle } from '../src/deployments/deployment-bundle.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { ObjectReader } from '../src/objects/object-reader.js';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import type { SandboxHandle, SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { walkReachable } from '../src/snapshot/reachability.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { nodeImage } from './support/docker-images.js';
import { codeOf } from './support/error-code.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const sh = (script: string, ...args: string[]) => ['sh', '-c', script, 'sh', ...args];

/** Each entry of the installed bundle: `mode type size path`, sorted (busybox and coreutils `stat` agree on this format). */
const LIST_SCRIPT = 'cd "$1" && find . -mindepth 1 | sort | while read -r p; do stat -c "%a %F %s $p" "$p"; done';

interface ProviderCase {
  readonly name: string;
  readonly open: (dir: string) => SandboxProvider;
  readonly image?: () => string;
}

const PROVIDERS: readonly ProviderCase[] = [
  { name: 'local', open: (dir) => new LocalSandboxProvider({ root: path.join(dir, 'local') }) },
  {
    name: 'bwrap',
    open: (dir) => {
      expectBwrapInstalled();
      return new BwrapSandboxProvider({ root: path.join(dir, 'bwrap') });
    },
  },
  {
    name: 'docker',
    open: (dir) =>
      new DockerSandboxProvider({ image: nodeImage(), scope: `bundles-${path.basename(dir).replace(/[^A-Za-z0-9._-]/g, '')}` }),
  },
];

/** Writes a bundle directory: `files` (path -> [content, mode]), plus an empty directory and a symlink. */
function bundleDir(root: string, name: string, files: Record<string, [string, number]>): string {
  const dir = path.join(root, name);
  for (const [rel, [content, mode]] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), content, { mode });
    fs.chmodSync(path.join(dir, rel), mode);
  }
  fs.mkdirSync(path.join(dir, 'empty'), { recursive: true });
  return dir;
}

describe.each(PROVIDERS)('installBundle into $name sandboxes', (providerCase) => {
  let opened: OpenedBackends;
  let hf: Holdfast;
  let provider: SandboxProvider;
  let endpoints: SandboxEndpoints;
  const sandboxes: SandboxHandle[] = [];

  const first = {
    'bin/agent.sh': ['#!/bin/sh\necho bundle-one-marker-7f3a\n', 0o755],
    'skills/review.md': ['# review skill, bundle one, 51c0\n', 0o644],
  } as Record<string, [string, number]>;
  const second = { 'prompts/system.txt': ['bundle two, 9e21\n', 0o640] } as Record<string, [string, number]>;

  beforeAll(async () => {
    opened = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    provider = providerCase.open(opened.dir);
    hf = await openHoldfast({
      blobs: opened.blobs,
      meta: opened.meta,
      cacheDir: path.join(opened.dir, 'hf-cache'),
      providers: () => provider,
    });
    endpoints = new SandboxEndpoints(() => provider);
  });
  afterAll(async () => {
    for (const s of sandboxes) await provider.destroy(s.id).catch(() => undefined);
    await endpoints.close();
    await hf.close();
    await opened.cleanup();
  });

  const deploymentWith = async (files: Record<string, [string, number]>, name: string, extra: { bundlePath?: string } = {}) => {
    const dir = bundleDir(opened.dir, `${providerCase.name}-${name}`, files);
    fs.symlinkSync('skills/review.md', path.join(dir, 'latest'));
    const bundle = await hf.bundles.capture(dir);
    return hf.deployments.create({ provider: providerCase.name, bundle, ...extra });
  };
  const list = async (sandbox: SandboxHandle, dir: string) => {
    const result = await sandbox.run(sh(LIST_SCRIPT, dir));
    expect(result.stderr.toString()).toBe('');
    return result.stdout.toString().trim().split('\n');
  };
  const cat = async (sandbox: SandboxHandle, file: string) => (await sandbox.run(['cat', file])).stdout.toString();

  it('lands at the bundle path with exact bytes and modes, read-only; an agent edit and another bundle are replaced entirely', async () => {
    const one = await deploymentWith(first, 'one');
    const two = await deploymentWith(second, 'two');
    const sandbox = await provider.create({});
    sandboxes.push(sandbox);

    const installed = await installBundle(endpoints, hf.snapshots, sandbox, one);
    const dir = path.posix.join(sandbox.agentHome, '.deployment');
    expect(installed?.dir).toBe(dir);
    expect(installed?.env).toEqual({ HOLDFAST_BUNDLE_DIR: dir });
    expect(installed?.receipt.rootTree).toBe(one.spec.bundle?.rootTree);
    expect(await list(sandbox, dir)).toEqual([
      expect.stringMatching(/^555 directory \d+ \.\/bin$/),
      `555 regular file ${Buffer.byteLength(first['bin/agent.sh']?.[0] ?? '')} ./bin/agent.sh`,
      expect.stringMatching(/^555 directory \d+ \.\/empty$/),
      expect.stringMatching(/^777 symbolic link \d+ \.\/latest$/),
      expect.stringMatching(/^555 directory \d+ \.\/skills$/),
      `444 regular file ${Buffer.byteLength(first['skills/review.md']?.[0] ?? '')} ./skills/review.md`,
    ]);
    expect((await sandbox.run([`${dir}/bin/agent.sh`])).stdout.toString()).toBe('bundle-one-marker-7f3a\n');
    expect(await cat(sandbox, `${dir}/skills/review.md`)).toBe(first['skills/review.md']?.[0]);
    expect((await sandbox.run(['readlink', `${dir}/latest`])).stdout.toString()).toBe('skills/review.md\n');

    // The agent makes the bundle its own and edits it; the next install puts the deployment's bytes back.
    const edit = await sandbox.run(
      sh('chmod -R u+w "$1" && printf evil > "$1/skills/review.md" && echo x > "$1/stray" && rm "$1/bin/agent.sh"', dir),
    );
    expect(edit.code).toBe(0);
    await installBundle(endpoints, hf.snapshots, sandbox, one);
    expect(await cat(sandbox, `${dir}/skills/review.md`)).toBe(first['skills/review.md']?.[0]);
    expect((await sandbox.run(['test', '-e', `${dir}/stray`])).code).not.toBe(0);
    expect(await cat(sandbox, `${dir}/bin/agent.sh`)).toBe(first['bin/agent.sh']?.[0]);

    // A symlink put where the bundle goes is removed, never followed.
    await sandbox.run(sh('chmod -R u+w "$1" && rm -rf "$1" && mkdir -p "$2" && ln -s "$2" "$1"', dir, `${sandbox.workspaceRoot}/lure`));
    await installBundle(endpoints, hf.snapshots, sandbox, two);
    expect(await list(sandbox, dir)).toEqual([
      expect.stringMatching(/^555 directory \d+ \.\/empty$/),
      expect.stringMatching(/^777 symbolic link \d+ \.\/latest$/),
      expect.stringMatching(/^555 directory \d+ \.\/prompts$/),
      `440 regular file ${Buffer.byteLength(second['prompts/system.txt']?.[0] ?? '')} ./prompts/system.txt`,
    ]);
    expect((await sandbox.run(['ls', '-A', `${sandbox.workspaceRoot}/lure`])).stdout.toString()).toBe('');
  });

  it('a relative bundlePath lands under the home; the bundle never enters a workspace checkpoint', async () => {
    const one = await deploymentWith(first, 'placed', { bundlePath: 'tools/src' });
    const sandbox = await provider.create({});
    sandboxes.push(sandbox);
    const installed = await installBundle(endpoints, hf.snapshots, sandbox, one);
    expect(installed?.dir).toBe(path.posix.join(sandbox.agentHome, 'tools/src'));
    await sandbox.run(sh('echo workspace file > "$1/notes.txt"', sandbox.workspaceRoot));
    const { checkpoint } = await endpoints.checkpoint(hf.snapshots, sandbox, { workspace: `ws-${providerCase.name}` });
    const reader = new ObjectReader(opened.blobs, opened.meta);
    const workspace = await walkReachable(reader, [checkpoint.rootTree as string]);
    const bundle = await walkReachable(reader, [one.spec.bundle?.rootTree as string]);
    expect(workspace.trees.has(one.spec.bundle?.rootTree as string)).toBe(false);
    expect([...bundle.data].filter((id) => workspace.data.has(id))).toEqual([]);
    expect(checkpoint.stats?.files).toBe(1);
  });

  it('refuses a bundle path over the workspace, and a deployment without a bundle installs nothing', async () => {
    const sandbox = await provider.create({});
    sandboxes.push(sandbox);
    const over = await deploymentWith(first, 'over', { bundlePath: sandbox.workspaceRoot });
    expect(await codeOf(installBundle(endpoints, hf.snapshots, sandbox, over))).toBe('INVALID_INPUT');
    const plain = await hf.deployments.create({ provider: providerCase.name });
    expect(await installBundle(endpoints, hf.snapshots, sandbox, plain)).toBeNull();
  });
});
