import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canAccessFolder, type Principal } from '../src/index.js';
import { folderAccessLookups } from '../src/tenants/folder-access.js';
import { hashToken } from '../src/tenants/tokens.js';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

const BINDINGS = { task: 'task-7', agent: 'agent-7', user: 'ada', project: 'proj-7' };

describe.each(BACKENDS)('users, user tokens, run tokens and their principals: $name', (backend) => {
  let svc: TestService;
  let deploymentId: string;
  const principal = (token: string): Promise<Principal | undefined> => svc.hf.tokens.principal(hashToken(token));
  const may = (p: Principal, scope: 'task' | 'agent' | 'user' | 'project', ownerId: string, action: 'read' | 'write' = 'read') =>
    canAccessFolder(p, { tenantId: svc.hf.tenant.id, scope, ownerId }, action, folderAccessLookups(svc.hf.meta));

  beforeAll(async () => {
    svc = await openTestService(backend, { scopePrefix: 'principals' });
    const deployment = await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase });
    expect(deployment.status).toBe(201);
    deploymentId = deployment.body.id;
    await svc.hf.users.add({ tenant: 'default', name: 'ada', role: 'member' });
    await svc.hf.users.add({ tenant: 'default', name: 'vic', role: 'viewer' });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('service tokens keep resolving as before: kind service with the admin flag', async () => {
    expect(await principal(svc.token)).toMatchObject({ kind: 'service', tenantId: svc.hf.tenant.id, tenantName: 'default', admin: false });
    expect(await principal(svc.adminToken)).toMatchObject({ kind: 'service', admin: true });
  });

  it("a user token resolves to the user with their role; a revoked user's token resolves to nothing at once", async () => {
    await svc.hf.users.add({ tenant: 'default', name: 'rex', role: 'member' });
    const created = await svc.hf.tokens.createForUser({ tenant: 'default', user: 'rex' });
    expect(created).toMatchObject({ tenant: 'default', user: 'rex', admin: false, runId: null });
    const rex = await principal(created.token);
    expect(rex).toEqual({
      kind: 'user',
      tokenId: created.id,
      tenantId: svc.hf.tenant.id,
      tenantName: 'default',
      userId: 'rex',
      role: 'member',
    });
    expect(await may(rex as Principal, 'project', 'p1', 'write')).toBe(true);
    // User tokens serve work folders only: every /v1 route is 404 to them.
    expect((await svc.api('GET', '/v1/runs', undefined, created.token)).body.error.code).toBe('NOT_FOUND');
    await svc.hf.users.revoke({ tenant: 'default', name: 'rex' });
    expect(await principal(created.token)).toBeUndefined();
    expect(await may(rex as Principal, 'project', 'p1')).toBe(false); // even a principal resolved before the revocation
    const after = await svc.api('GET', '/v1/runs', undefined, created.token);
    expect([after.status, after.body.error.code]).toEqual([401, 'UNAUTHORIZED']);
    await expect(svc.hf.tokens.createForUser({ tenant: 'default', user: 'rex' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(svc.hf.tokens.createForUser({ tenant: 'nowhere', user: 'ada' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('POST /v1/runs with bindings answers a run token once; it resolves to a run principal with those bindings', async () => {
    const key = `bind-${backend.name.replace(/[^a-z0-9]+/g, '-')}`;
    // The same request twice with one Idempotency-Key: the replay holds no secret.
    const send = () =>
      svc.app.request('/v1/runs', {
        method: 'POST',
        headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ deploymentId, bindings: BINDINGS }),
      });
    const first = await send();
    expect(first.status).toBe(201);
    const run = (await first.json()) as { id: string; bindings: unknown; endedAt: unknown; runToken: string };
    expect(run).toMatchObject({ bindings: BINDINGS, endedAt: null });
    expect(run.runToken).toMatch(/^holdfast_[0-9A-Za-z]{49}$/);
    const replay = await send();
    expect(replay.headers.get('idempotent-redacted')).toBe('true');
    expect(await replay.json()).toMatchObject({ id: run.id, runToken: null });

    const p = await principal(run.runToken);
    expect(p).toMatchObject({ kind: 'run', runId: run.id, bindings: BINDINGS, tenantId: svc.hf.tenant.id });
    const asRun = p as Principal;
    expect(await may(asRun, 'task', 'task-7', 'write')).toBe(true);
    expect(await may(asRun, 'agent', 'agent-7', 'write')).toBe(true);
    expect(await may(asRun, 'agent', 'agent-8', 'write')).toBe(false);
    expect(await may(asRun, 'user', 'ada')).toBe(true);
    expect(await may(asRun, 'user', 'vic')).toBe(false);
    expect((await svc.api('GET', `/v1/runs/${run.id}`, undefined, run.runToken)).status).toBe(404);

    // Another token for the sandbox's environment, then the run ends: both reach nothing, 404 everywhere.
    const second = await svc.hf.runs.issueRunToken(run.id);
    expect(await principal(second.token)).toMatchObject({ kind: 'run', runId: run.id });
    const ended = await svc.api('POST', `/v1/runs/${run.id}/end`);
    expect(ended.status).toBe(200);
    expect(ended.body.endedAt).toEqual(expect.any(Number));
    for (const token of [run.runToken, second.token]) {
      const still = (await principal(token)) as Principal;
      expect(still).toMatchObject({ kind: 'run' });
      expect(await may(still, 'task', 'task-7')).toBe(false);
      expect(await may(still, 'user', 'ada')).toBe(false);
      expect((await svc.api('GET', '/v1/runs', undefined, token)).status).toBe(404);
    }
    expect((await svc.api('POST', `/v1/runs/${run.id}/end`)).body.endedAt).toBe(ended.body.endedAt);
    await expect(svc.hf.runs.issueRunToken(run.id)).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(svc.hf.runs.command(run.id, { argv: ['true'] })).rejects.toMatchObject({ code: 'CONFLICT', data: { reason: 'ended' } });
  });

  it('a run without bindings has no run token; bad or unknown bindings are refused before anything is created', async () => {
    const plain = await svc.api('POST', '/v1/runs', { deploymentId });
    expect(plain.status).toBe(201);
    expect(plain.body).toMatchObject({ bindings: null, runToken: null });
    await expect(svc.hf.runs.issueRunToken(plain.body.id)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const before = (await svc.hf.runs.list()).length;
    for (const bindings of [{ team: 'x' }, { task: '../etc' }, { agent: '' }, { user: 'a'.repeat(129) }]) {
      const answer = await svc.api('POST', '/v1/runs', { deploymentId, bindings });
      expect([answer.status, answer.body.error.code]).toEqual([400, 'INVALID_INPUT']);
    }
    const unknown = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'nobody' } });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await svc.hf.runs.list()).length).toBe(before);
  });

  it('a run bound to a user loses that collection when the user is revoked, and keeps its shared bindings', async () => {
    await svc.hf.users.add({ tenant: 'default', name: 'tess', role: 'viewer' });
    const run = await svc.hf.runs.create({ deploymentId, bindings: { user: 'tess', project: 'proj-t' } });
    const p = (await principal(run.runToken ?? '')) as Principal;
    expect(await may(p, 'user', 'tess', 'write')).toBe(true);
    await svc.hf.users.revoke({ tenant: 'default', name: 'tess' });
    expect(await may(p, 'user', 'tess')).toBe(false);
    expect(await may(p, 'project', 'proj-t', 'write')).toBe(true);
  });

  it("another tenant's tokens reach nothing of this tenant, and its runs cannot bind this tenant's users", async () => {
    const other = await svc.hf.tokens.create({ tenant: 'globex', name: 'svc', admin: true });
    const p = (await principal(other.token)) as Principal;
    expect(await may(p, 'task', 'task-7')).toBe(false);
    const globex = await svc.hf.forTenant('globex');
    await expect(globex.runs.create({ deploymentId, bindings: { user: 'ada' } })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
