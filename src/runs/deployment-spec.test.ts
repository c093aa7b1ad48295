import { describe, expect, it } from 'vitest';
import { deploymentId, normalizeDeploymentSpec } from './deployment-spec.js';

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
});
