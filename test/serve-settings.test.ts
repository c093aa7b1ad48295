/**
 * Settings of a real `holdfast serve` (the compiled CLI, bwrap sandboxes) and of its
 * deployments: the inspector can be turned off (`--no-inspector`, `HOLDFAST_INSPECTOR=off`),
 * a deployment's `workspaceRoot` is refused at creation when its provider cannot host it, and
 * a deployment's `cwd` starts turns in the workspace (default) or in the sandbox home.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBwrapInstalled } from './support/sandbox-processes.js';
import { type CliStore, openCliStore, runHoldfast, type ServeProcess } from './support/serve-process.js';

/** The inspector's paths: the redirect, the page, an asset. */
const INSPECTOR_PATHS = ['/ui', '/ui/', '/ui/app.js'] as const;

// biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
type Json = any;

describe('holdfast serve settings: the inspector switch, hostable workspace roots, where turns start', () => {
  let store: CliStore;
  let token: string;
  let server: ServeProcess;

  const call = async (method: string, url: string, body?: unknown): Promise<{ status: number; body: Json }> => {
    const response = await fetch(`${server.url}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: JSON.parse(await response.text()) };
  };

  beforeAll(async () => {
    expectBwrapInstalled();
    store = openCliStore('hf-serve-settings-');
    token = (await store.holdfast(['token', 'create', '--name', 'settings-test'])).trim();
    server = await store.serve();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    store?.cleanup();
  });

  it('the inspector is on by default; --no-inspector and HOLDFAST_INSPECTOR=off turn it off (404, and out of the OpenAPI document)', async () => {
    expect((await fetch(`${server.url}/ui/`)).status).toBe(200);
    for (const [args, env] of [
      [['--no-inspector'], {}],
      [[], { HOLDFAST_INSPECTOR: 'off' }],
    ] as const) {
      const off = await store.serve([...args], env);
      try {
        for (const p of INSPECTOR_PATHS) {
          const response = await fetch(`${off.url}${p}`, { redirect: 'manual' });
          expect(response.status, p).toBe(404);
          expect(((await response.json()) as Json).error.code).toBe('NOT_FOUND');
        }
        const doc = (await (await fetch(`${off.url}/v1/openapi.json`)).json()) as Json;
        expect(Object.keys(doc.paths).filter((p) => p.startsWith('/ui'))).toEqual([]);
        expect((await fetch(`${off.url}/healthz`)).status).toBe(200);
      } finally {
        await off.stop();
      }
    }
    const bad = await runHoldfast(['serve', '--port', '0'], { ...store.env, HOLDFAST_INSPECTOR: 'maybe' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('INVALID_INPUT');
  }, 60_000);

  it('a workspaceRoot the provider cannot host is refused at creation, naming the field; one inside its root works', async () => {
    for (const spec of [
      { provider: 'bwrap', workspaceRoot: '/srv/app' },
      { provider: 'bwrap', workspaceRoot: '/' },
      { provider: 'bwrap', workspaceRoot: '/workspace-other' },
      { provider: 'local', workspaceRoot: '/tmp/app' },
    ]) {
      const refused = await call('POST', '/v1/deployments', spec);
      expect(refused.status, JSON.stringify(spec)).toBe(400);
      expect(refused.body.error).toMatchObject({ code: 'INVALID_INPUT', data: { field: 'workspaceRoot' } });
    }
    expect((await call('GET', '/v1/deployments')).body.deployments).toEqual([]);
    const inside = await call('POST', '/v1/deployments', { provider: 'bwrap', workspaceRoot: '/workspace/app' });
    expect(inside.status, JSON.stringify(inside.body)).toBe(201);
    const runId = (await call('POST', '/v1/runs', { deploymentId: inside.body.id })).body.id as string;
    const turn = await call('POST', `/v1/runs/${runId}/turns`, { argv: ['pwd'] });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body.stdout).toBe('/workspace/app\n');
  }, 60_000);

  it("a deployment's cwd: turns start in the workspace by default and in the sandbox home with cwd home", async () => {
    const atHome = await call('POST', '/v1/deployments', { provider: 'bwrap', cwd: 'home' });
    expect(atHome.status, JSON.stringify(atHome.body)).toBe(201);
    expect(atHome.body.spec.cwd).toBe('home');
    const plain = await call('POST', '/v1/deployments', { provider: 'bwrap' });
    expect(plain.body.spec.cwd).toBe('workspace');
    const started = async (deploymentId: string): Promise<string> => {
      const runId = (await call('POST', '/v1/runs', { deploymentId })).body.id as string;
      const turn = await call('POST', `/v1/runs/${runId}/turns`, { argv: ['sh', '-c', 'pwd && test "$PWD" = "$HOME" && echo home'] });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
      return turn.body.stdout as string;
    };
    expect(await started(atHome.body.id)).toBe('/home/agent\nhome\n');
    expect(await started(plain.body.id)).toBe('/workspace\n');
    const refused = await call('POST', '/v1/deployments', { provider: 'bwrap', cwd: '/etc' });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('INVALID_INPUT');
    // The CLI takes it too, and shows it.
    const created = JSON.parse(await store.holdfast(['--json', 'deployment', 'create', '--provider', 'bwrap', '--cwd', 'home'])) as Json;
    expect(created.id).toBe(atHome.body.id);
  }, 60_000);
});
