import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxImage, expectDockerInstalled, nodeImage } from '../../../test/support/docker-images.js';
import { codeOf } from '../../../test/support/error-code.js';
import { describeSandboxProviderContract } from '../sandbox.contract.js';
import { DockerSandboxProvider } from './docker.js';

/** A scope of its own per provider, so test files running at once never see each other's containers. */
const scope = (what: string): string => `test-${what}-${process.pid}-${randomBytes(3).toString('hex')}`;

describe('docker prerequisites', () => {
  it('docker answers and busybox-static is installed', () => {
    expectDockerInstalled();
  });
});

let contractScope = '';
describeSandboxProviderContract({
  name: 'docker',
  create: async () => {
    contractScope = scope('contract');
    const provider = new DockerSandboxProvider({ image: nodeImage(), scope: contractScope });
    return {
      provider,
      cleanup: async () => {
        for (const info of await provider.list()) await provider.destroy(info.id);
      },
    };
  },
  reopen: () => new DockerSandboxProvider({ scope: contractScope }),
  stop: async (id) => {
    execFileSync('docker', ['stop', '--time', '1', id], { stdio: 'ignore' });
  },
});

describe('DockerSandboxProvider', () => {
  let provider: DockerSandboxProvider;
  beforeAll(() => {
    provider = new DockerSandboxProvider({ image: busyboxImage(), scope: scope('own') });
  });
  afterAll(async () => {
    for (const info of (await provider?.list()) ?? []) await provider.destroy(info.id);
  });

  const inspect = (id: string) =>
    JSON.parse(execFileSync('docker', ['inspect', id], { encoding: 'utf8' }))[0] as {
      Config: { Labels: Record<string, string>; User: string };
      HostConfig: { NetworkMode: string; Memory: number; NanoCpus: number; PidsLimit: number; Binds: unknown; ReadonlyRootfs: boolean };
      Mounts: Array<{ Type: string; Destination: string; Name: string }>;
    };

  it('runs a busybox-only image as uid 1000, with no network, limits, labels and only its own volumes, removed with it', async () => {
    const sandbox = await provider.create({
      labels: { 'holdfast.run': 'run-1' },
      limits: { memoryBytes: 256 * 1024 * 1024, cpus: 0.5, pids: 64 },
    });
    const info = inspect(sandbox.id);
    expect(info.Config.Labels['holdfast.run']).toBe('run-1');
    expect(info.HostConfig).toMatchObject({
      NetworkMode: 'none',
      Memory: 256 * 1024 * 1024,
      NanoCpus: 5e8,
      PidsLimit: 64,
      Binds: null,
      ReadonlyRootfs: true,
    });
    expect(info.Mounts.map((m) => [m.Type, m.Destination]).sort()).toEqual([
      ['volume', '/home/agent'],
      ['volume', '/workspace'],
    ]);
    const who = await sandbox.run([
      'sh',
      '-c',
      'id -u; id -g; stat -c %u:%g /workspace "$HOME"; grep CapEff /proc/self/status; touch /etc/x 2>/dev/null || echo ro',
    ]);
    expect(who.stdout.toString().split('\n')).toEqual(['1000', '1000', '1000:1000', '1000:1000', 'CapEff:\t0000000000000000', 'ro', '']);
    const volumes = info.Mounts.map((m) => m.Name);
    await provider.destroy(sandbox.id);
    const left = execFileSync('docker', ['volume', 'ls', '-q'], { encoding: 'utf8' }).split('\n');
    expect(volumes.filter((v) => left.includes(v))).toEqual([]);
  });

  it('the pids limit holds against a fork bomb-ish loop, and the sandbox still works afterwards', async () => {
    const sandbox = await provider.create({ limits: { pids: 32 } });
    const result = await sandbox.run(['sh', '-c', 'for i in $(seq 1 100); do sleep 5 & done; wait'], { timeoutMs: 3000 });
    expect(result.stderr.toString()).not.toBe('');
    expect((await sandbox.run(['true'])).code).toBe(0);
    await provider.destroy(sandbox.id);
  }, 30_000);

  it('answers undefined for containers that are not its own, and never destroys them', async () => {
    const foreign = `sbx-${randomBytes(8).toString('hex')}`;
    execFileSync('docker', ['create', '--name', foreign, busyboxImage(), 'true'], { stdio: 'ignore' });
    try {
      expect(await provider.get(foreign)).toBeUndefined();
      await provider.destroy(foreign);
      expect(execFileSync('docker', ['inspect', '-f', '{{.Name}}', foreign], { encoding: 'utf8' }).trim()).toBe(`/${foreign}`);
      const other = await new DockerSandboxProvider({ image: busyboxImage(), scope: scope('other') }).create();
      expect(await provider.get(other.id)).toBeUndefined();
      expect((await provider.list()).some((s) => s.id === other.id)).toBe(false);
      execFileSync('docker', ['rm', '-f', '-v', other.id], { stdio: 'ignore' });
    } finally {
      execFileSync('docker', ['rm', '-f', foreign], { stdio: 'ignore' });
    }
  });

  it('a container removed behind its back: get is undefined, exec rejects exit with NOT_FOUND', async () => {
    const sandbox = await provider.create();
    execFileSync('docker', ['rm', '-f', '-v', sandbox.id], { stdio: 'ignore' });
    expect(await provider.get(sandbox.id)).toBeUndefined();
    expect(await codeOf(sandbox.run(['true']))).toBe('NOT_FOUND');
  });

  it('rejects bad specs with INVALID_INPUT and an unreachable daemon with STORE_UNAVAILABLE', async () => {
    expect(await codeOf(() => new DockerSandboxProvider({ scope: scope('none') }).create())).toBe('INVALID_INPUT');
    expect(await codeOf(() => provider.create({ image: 'holdfast-test/no-such-image:0' }))).toBe('INVALID_INPUT');
    expect(await codeOf(() => provider.create({ labels: { 'holdfast.sandbox': 'x' } }))).toBe('INVALID_INPUT');
    expect(await codeOf(() => provider.create({ limits: { pids: 0 } }))).toBe('INVALID_INPUT');
    const absent = new DockerSandboxProvider({ image: busyboxImage(), socketPath: '/nonexistent/docker.sock' });
    expect(await codeOf(() => absent.create())).toBe('STORE_UNAVAILABLE');
    expect(await codeOf(() => absent.list())).toBe('STORE_UNAVAILABLE');
  });
});
