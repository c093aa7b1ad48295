import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { BwrapSandboxProvider } from '../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { busyboxImage, expectDockerInstalled } from './support/docker-images.js';
import { codeOf } from './support/error-code.js';
import { expectBwrapInstalled } from './support/sandbox-processes.js';
import { withoutStdinProvider } from './support/shell-handles.js';

/**
 * Holdfast chooses how it reaches a sandbox from what the sandbox has (one probe, remembered)
 * and what its provider declares: a host path, the agent (Node and stdin), the shell with
 * stdin, the shell over arguments alone; none fits: STORE_UNAVAILABLE listing what is missing.
 */
describe('the route to a sandbox workspace', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-routes-'));
  let docker: DockerSandboxProvider;
  beforeAll(() => {
    expectBwrapInstalled();
    expectDockerInstalled();
    docker = new DockerSandboxProvider({ image: busyboxImage(), scope: `test-routes-${process.pid}-${randomBytes(3).toString('hex')}` });
  });
  afterAll(async () => {
    for (const info of (await docker?.list()) ?? []) await docker.destroy(info.id);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const routeOf = async (provider: SandboxProvider) => {
    const sandbox = await provider.create();
    try {
      const endpoints = new SandboxEndpoints(() => provider);
      return await endpoints.route(sandbox);
    } finally {
      await provider.destroy(sandbox.id);
    }
  };

  it('a host path, the agent, the shell with stdin and the shell over arguments, by what the sandbox has', async () => {
    expect(await routeOf(new LocalSandboxProvider({ root: path.join(dir, 'local') }))).toBe('local');
    const bwrap = new BwrapSandboxProvider({ root: path.join(dir, 'bwrap') });
    expect(await routeOf(bwrap)).toBe('agent');
    // Node is there, but a provider without stdin cannot feed the agent: the shell over arguments.
    expect(await routeOf(withoutStdinProvider(bwrap))).toBe('shell-args');
    expect(await routeOf(docker)).toBe('shell-stdin');
    expect(await routeOf(withoutStdinProvider(docker))).toBe('shell-args');
  }, 120_000);

  it('probes a sandbox once, and refuses a provider that cannot run commands', async () => {
    const bwrap = new BwrapSandboxProvider({ root: path.join(dir, 'bwrap-once') });
    const sandbox = await bwrap.create();
    let execs = 0;
    const counted = {
      ...sandbox,
      exec: (...args: Parameters<typeof sandbox.exec>) => {
        execs += 1;
        return sandbox.exec(...args);
      },
      run: (...args: Parameters<typeof sandbox.run>) => {
        execs += 1;
        return sandbox.run(...args);
      },
    };
    const endpoints = new SandboxEndpoints(() => bwrap);
    expect(await endpoints.route(counted)).toBe('agent');
    expect(await endpoints.route(counted)).toBe('agent');
    expect(execs).toBe(1);
    const noExec: SandboxProvider = {
      name: 'bwrap',
      capabilities: { ...bwrap.capabilities, exec: false },
      create: (spec) => bwrap.create(spec),
      get: (id) => bwrap.get(id),
      destroy: (id) => bwrap.destroy(id),
      list: () => bwrap.list(),
    };
    expect(await codeOf(new SandboxEndpoints(() => noExec).route(counted))).toBe('STORE_UNAVAILABLE');
    expect(execs).toBe(1); // refused before any probe
    await bwrap.destroy(sandbox.id);
  });
});
