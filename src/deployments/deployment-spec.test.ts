import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../core/hash.js';
import { bundleDirIn } from './bundle-record.js';
import { canonicalSpecJson, deploymentId, normalizeDeploymentSpec, parseStoredSpec } from './deployment-spec.js';

describe('deployment specs', () => {
  it('fill defaults, and the id depends on content only (not on env key order)', () => {
    const a = normalizeDeploymentSpec({ provider: 'bwrap', env: { B: '2', A: '1' } });
    const b = normalizeDeploymentSpec({ provider: 'bwrap', env: { A: '1', B: '2' }, setup: [], workspaceUpgradePolicy: 'automatic' });
    expect(a).toEqual({
      provider: 'bwrap',
      image: null,
      setup: [],
      env: { A: '1', B: '2' },
      workspaceRoot: null,
      workspaceUpgradePolicy: 'automatic',
      validate: null,
      limits: null,
      bundle: null,
      bundlePath: null,
      cwd: 'workspace',
    });
    expect(deploymentId(a)).toBe(deploymentId(b));
    expect(deploymentId(a)).toMatch(/^[0-9a-f]{64}$/);
    const other = normalizeDeploymentSpec({ provider: 'bwrap', env: { A: '1', B: '2' }, setup: [['make']] });
    expect(deploymentId(other)).not.toBe(deploymentId(a));
    expect(deploymentId(normalizeDeploymentSpec({ provider: 'bwrap', workspaceUpgradePolicy: 'manual' }))).not.toBe(
      deploymentId(normalizeDeploymentSpec({ provider: 'bwrap' })),
    );
  });

  it('limits: part of the id only when set (older ids stay), checked as positive numbers', () => {
    const plain = normalizeDeploymentSpec({ provider: 'docker' });
    expect(deploymentId(plain)).toBe(deploymentId(normalizeDeploymentSpec({ provider: 'docker', limits: null })));
    const bounded = normalizeDeploymentSpec({ provider: 'docker', limits: { pids: 64, memoryBytes: 1 << 28 } });
    expect(bounded.limits).toEqual({ pids: 64, memoryBytes: 1 << 28 });
    expect(deploymentId(bounded)).not.toBe(deploymentId(plain));
    expect(deploymentId(bounded)).toBe(
      deploymentId(normalizeDeploymentSpec({ provider: 'docker', limits: { memoryBytes: 1 << 28, pids: 64 } })),
    );
    for (const limits of [{ pids: 0 }, { pids: 1.5 }, { cpus: -1 }, { disk: 1 }, [], 'x']) {
      expect(() => normalizeDeploymentSpec({ provider: 'docker', limits } as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_INPUT' }),
      );
    }
  });

  it('refuse bad input with stable codes', () => {
    const bad = (input: unknown) => () => normalizeDeploymentSpec(input as never);
    expect(bad({ provider: 'Bad Name' })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', data: { field: 'provider' } }));
    expect(bad({ provider: 'bwrap', setup: 'npm ci' })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(bad({ provider: 'bwrap', setup: [[]] })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT', data: { field: 'setup[0]' } }),
    );
    expect(bad({ provider: 'bwrap', setup: Array.from({ length: 33 }, () => ['true']) })).toThrow(
      expect.objectContaining({ code: 'LIMIT_EXCEEDED' }),
    );
    expect(bad({ provider: 'bwrap', workspaceRoot: '/workspace/../etc' })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT', data: { field: 'workspaceRoot' } }),
    );
    expect(bad({ provider: 'bwrap', workspaceRoot: 'relative' })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(bad({ provider: 'bwrap', workspaceUpgradePolicy: 'sometimes' })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(bad({ provider: 'bwrap', env: { 'BAD-NAME': 'x' } })).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });

  it('never store credentials: an env value that looks like a key is SECRET_EXCLUDED', () => {
    const token = `ghp_${'A1b2C3d4E5'.repeat(4).slice(0, 36)}`;
    expect(() => normalizeDeploymentSpec({ provider: 'bwrap', env: { GITHUB_TOKEN: token } })).toThrow(
      expect.objectContaining({ code: 'SECRET_EXCLUDED', data: expect.objectContaining({ name: 'GITHUB_TOKEN', rule: 'github-token' }) }),
    );
    expect(normalizeDeploymentSpec({ provider: 'bwrap', env: { NODE_ENV: 'production' } }).env).toEqual({ NODE_ENV: 'production' });
  });

  it('nor in a setup or validate argument or the image: a token pasted into a clone URL is SECRET_EXCLUDED, naming the field', () => {
    const token = `ghp_${'A1b2C3d4E5'.repeat(4).slice(0, 36)}`;
    const url = `https://x-access-token:${token}@github.com/acme/app.git`;
    const cases: Array<[Parameters<typeof normalizeDeploymentSpec>[0], string]> = [
      [{ provider: 'bwrap', setup: [['true'], ['git', 'clone', url]] }, 'setup[1]'],
      [{ provider: 'bwrap', validate: ['sh', '-c', `curl -H "Authorization: token ${token}" https://api.github.com`] }, 'validate'],
      [{ provider: 'bwrap', image: `registry.example/app:${token}` }, 'image'],
    ];
    for (const [spec, field] of cases) {
      expect(() => normalizeDeploymentSpec(spec)).toThrow(
        expect.objectContaining({ code: 'SECRET_EXCLUDED', data: expect.objectContaining({ field }) }),
      );
    }
    expect(normalizeDeploymentSpec({ provider: 'bwrap', setup: [['git', 'clone', 'https://github.com/acme/app.git']] }).setup).toHaveLength(
      1,
    );
  });

  it('cwd: workspace by default and outside the id, home part of it, anything else refused naming cwd', () => {
    const legacy =
      '{"provider":"bwrap","image":null,"setup":[],"env":{},"workspaceRoot":null,"workspaceUpgradePolicy":"automatic","validate":null}';
    expect(deploymentId(normalizeDeploymentSpec({ provider: 'bwrap', cwd: 'workspace' }))).toBe(sha256Hex(legacy));
    expect(parseStoredSpec(legacy).cwd).toBe('workspace');
    const home = normalizeDeploymentSpec({ provider: 'bwrap', cwd: 'home' });
    expect(home.cwd).toBe('home');
    expect(deploymentId(home)).not.toBe(sha256Hex(legacy));
    expect(parseStoredSpec(canonicalSpecJson(home))).toEqual(home);
    for (const cwd of ['/tmp', 'HOME', '', 1, {}]) {
      expect(() => normalizeDeploymentSpec({ provider: 'bwrap', cwd: cwd as 'home' })).toThrow(
        expect.objectContaining({ code: 'INVALID_INPUT', data: { field: 'cwd' } }),
      );
    }
  });

  it('bundles: part of the id only when set, so a spec from before bundles keeps its id', () => {
    const legacy =
      '{"provider":"bwrap","image":null,"setup":[],"env":{},"workspaceRoot":null,"workspaceUpgradePolicy":"automatic","validate":null}';
    expect(deploymentId(normalizeDeploymentSpec({ provider: 'bwrap' }))).toBe(sha256Hex(legacy));
    expect(deploymentId(normalizeDeploymentSpec({ provider: 'bwrap', bundle: null, bundlePath: null }))).toBe(sha256Hex(legacy));
    expect(parseStoredSpec(legacy)).toEqual(normalizeDeploymentSpec({ provider: 'bwrap' }));
    const bundle = { rootTree: 'a'.repeat(64), files: 3, bytes: 10 };
    const bundled = normalizeDeploymentSpec({ provider: 'bwrap', bundle });
    expect(deploymentId(bundled)).not.toBe(sha256Hex(legacy));
    expect(parseStoredSpec(canonicalSpecJson(bundled))).toEqual(bundled);
    const other = normalizeDeploymentSpec({ provider: 'bwrap', bundle: { ...bundle, rootTree: 'b'.repeat(64) } });
    expect(deploymentId(other)).not.toBe(deploymentId(bundled));
    const placed = normalizeDeploymentSpec({ provider: 'bwrap', bundle, bundlePath: 'agent-src/' });
    expect(placed.bundlePath).toBe('agent-src');
    expect(deploymentId(placed)).not.toBe(deploymentId(bundled));
  });

  it('bundles: malformed records and paths that could reach the workspace or Holdfast’s own directories are refused', () => {
    const bundle = { rootTree: 'a'.repeat(64), files: 1, bytes: 1 };
    const refused = [
      { bundle: { rootTree: 'A'.repeat(64), files: 1, bytes: 1 } },
      { bundle: { rootTree: 'a'.repeat(64), files: -1, bytes: 1 } },
      { bundle: 'a'.repeat(64) },
      { bundlePath: 'x' },
      { bundle, bundlePath: '../x' },
      { bundle, bundlePath: 'a/./b' },
      { bundle, bundlePath: '/' },
      { bundle, bundlePath: '' },
      { bundle, bundlePath: '.holdfast/x' },
      { bundle, bundlePath: 'task' },
      { bundle, bundlePath: 'a\nb' },
      { bundle, bundlePath: '/srv/app', workspaceRoot: '/srv' },
      { bundle, bundlePath: '/srv', workspaceRoot: '/srv/app' },
      { bundle, bundlePath: '/srv/app/b', workspaceRoot: '/srv/app' },
    ];
    for (const input of refused) {
      expect(() => normalizeDeploymentSpec({ provider: 'bwrap', ...input } as never), JSON.stringify(input)).toThrow(
        expect.objectContaining({ code: 'INVALID_INPUT' }),
      );
    }
    expect(normalizeDeploymentSpec({ provider: 'bwrap', bundle, bundlePath: '/opt/agent', workspaceRoot: '/srv/app' }).bundlePath).toBe(
      '/opt/agent',
    );
  });

  it('bundle directory in a sandbox: default under the home, never over the workspace or the home', () => {
    const sandbox = { workspaceRoot: '/workspace', agentHome: '/home/agent' };
    expect(bundleDirIn(null, sandbox)).toBe('/home/agent/.deployment');
    expect(bundleDirIn('skills/v1', sandbox)).toBe('/home/agent/skills/v1');
    expect(bundleDirIn('/opt/agent', sandbox)).toBe('/opt/agent');
    for (const p of ['/workspace', '/workspace/x', '/', '/home', '/home/agent', '/home/agent/.holdfast', '/home/agent/user/x']) {
      expect(() => bundleDirIn(p, sandbox), p).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });
});
