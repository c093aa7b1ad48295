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
  const userId = async (name: string): Promise<string> => {
    const user = await svc.hf.meta.users.findActive(svc.hf.tenant.id, name);
    if (user === undefined) throw new Error(`no live user ${name}`);
    return user.id;
  };
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
    const rexUser = await svc.hf.users.add({ tenant: 'default', name: 'rex', role: 'member' });
    const created = await svc.hf.tokens.createForUser({ tenant: 'default', user: 'rex' });
    expect(created).toMatchObject({ tenant: 'default', user: 'rex', admin: false, runId: null });
    const rex = await principal(created.token);
    expect(rex).toEqual({
      kind: 'user',
      tokenId: created.id,
      tenantId: svc.hf.tenant.id,
      tenantName: 'default',
      userId: rexUser.id,
      userName: 'rex',
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
    // Ada binds her own folder: the request is made with her token. The same request twice with one Idempotency-Key: the replay holds no secret.
    const adaToken = (await svc.hf.tokens.createForUser({ tenant: 'default', user: 'ada' })).token;
    const adaId = await userId('ada');
    const send = () =>
      svc.app.request('/v1/runs', {
        method: 'POST',
        headers: { authorization: `Bearer ${adaToken}`, 'content-type': 'application/json', 'idempotency-key': key },
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
    // The binding holds ada's immutable id; the answer showed her name.
    expect(p).toMatchObject({ kind: 'run', runId: run.id, bindings: { ...BINDINGS, user: adaId }, tenantId: svc.hf.tenant.id });
    const asRun = p as Principal;
    expect(await may(asRun, 'task', 'task-7', 'write')).toBe(true);
    expect(await may(asRun, 'agent', 'agent-7', 'write')).toBe(true);
    expect(await may(asRun, 'agent', 'agent-8', 'write')).toBe(false);
    expect(await may(asRun, 'user', adaId)).toBe(true);
    expect(await may(asRun, 'user', 'ada')).toBe(false); // a name is no owner id
    expect(await may(asRun, 'user', await userId('vic'))).toBe(false);
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
      expect(await may(still, 'user', adaId)).toBe(false);
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
    // A service token may bind no user, existing or not (the answer says nothing about who exists); the operator naming nobody: NOT_FOUND.
    const unknown = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'nobody' } });
    expect([unknown.status, unknown.body.error.code, unknown.body.error.data?.field]).toEqual([403, 'FORBIDDEN', 'bindings.user']);
    await expect(svc.hf.runs.create({ deploymentId, bindings: { user: 'nobody' } })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      data: { field: 'bindings.user' },
    });
    expect((await svc.hf.runs.list()).length).toBe(before);
  });

  it('a run bound to a user loses that collection when the user is revoked, and keeps its shared bindings', async () => {
    await svc.hf.users.add({ tenant: 'default', name: 'tess', role: 'viewer' });
    const run = await svc.hf.runs.create({ deploymentId, bindings: { user: 'tess', project: 'proj-t' } });
    const p = (await principal(run.runToken ?? '')) as Principal;
    const tessId = await userId('tess');
    expect(run.bindings?.user).toBe(tessId);
    expect(await may(p, 'user', tessId, 'write')).toBe(true);
    await svc.hf.users.revoke({ tenant: 'default', name: 'tess' });
    expect(await may(p, 'user', tessId)).toBe(false);
    // A new tess is another user: the old run's binding does not follow the name.
    const newTess = await svc.hf.users.add({ tenant: 'default', name: 'tess', role: 'member' });
    expect(await may(p, 'user', newTess.id)).toBe(false);
    expect(await may(p, 'user', tessId)).toBe(false);
    expect(await may(p, 'project', 'proj-t', 'write')).toBe(true);
  });

  describe("binding a run to a user needs that user's consent", () => {
    /** What must stay unchanged when a bind is refused: no run, no token. */
    const counts = async () => ({ runs: (await svc.hf.runs.list()).length, tokens: (await svc.hf.tokens.list()).length });
    const refused = async (token: string, bindings: Record<string, string>, field: string) => {
      const before = await counts();
      const answer = await svc.api('POST', '/v1/runs', { deploymentId, bindings }, token);
      expect([answer.status, answer.body.error?.code, answer.body.error?.data?.field]).toEqual([403, 'FORBIDDEN', field]);
      expect(answer.body.runToken).toBeUndefined();
      expect(await counts()).toEqual(before);
    };
    let alexToken = '';
    let bobToken = '';
    beforeAll(async () => {
      await svc.hf.users.add({ tenant: 'default', name: 'alex', role: 'member' });
      await svc.hf.users.add({ tenant: 'default', name: 'bob', role: 'member' });
      alexToken = (await svc.hf.tokens.createForUser({ tenant: 'default', user: 'alex' })).token;
      bobToken = (await svc.hf.tokens.createForUser({ tenant: 'default', user: 'bob' })).token;
    });

    it('a service token binding alex is FORBIDDEN, admin or not, and creates no run and mints no token', async () => {
      await refused(svc.token, { user: 'alex' }, 'bindings.user');
      await refused(svc.token, { user: 'alex', task: 'task-7' }, 'bindings.user');
      await refused(svc.adminToken, { user: 'alex' }, 'bindings.user');
      // By a channel too.
      const channel = await svc.api('PUT', '/v1/channels/consent', { deploymentId }, svc.adminToken);
      expect(channel.status).toBeLessThan(300);
      const before = await counts();
      const byChannel = await svc.api('POST', '/v1/runs', { channel: 'consent', bindings: { user: 'alex' } });
      expect([byChannel.status, byChannel.body.error?.code]).toEqual([403, 'FORBIDDEN']);
      expect(await counts()).toEqual(before);
    });

    it("alex's token binding alex is allowed: its run token reaches alex's folder (the answer names alex)", async () => {
      const answer = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'alex', project: 'proj-a' } }, alexToken);
      expect(answer.status).toBe(201);
      expect(answer.body.bindings).toEqual({ user: 'alex', project: 'proj-a' });
      const alexId = await userId('alex');
      const run = (await principal(answer.body.runToken)) as Principal;
      expect(run).toMatchObject({ kind: 'run', bindings: { user: alexId, project: 'proj-a' } });
      expect(await may(run, 'user', alexId, 'write')).toBe(true);
      expect(await may(run, 'user', await userId('bob'))).toBe(false);
      const shown = await svc.api('GET', `/v1/runs/${answer.body.id}`);
      expect(shown.body.bindings).toEqual({ user: 'alex', project: 'proj-a' });
      // A user token creates runs and nothing else: every other /v1 route is still 404 to it.
      for (const [method, route] of [
        ['GET', `/v1/runs/${answer.body.id}`],
        ['GET', '/v1/runs'],
        ['POST', `/v1/runs/${answer.body.id}/end`],
        ['POST', `/v1/runs/${answer.body.id}/turns`],
      ] as const) {
        const other = await svc.api(method, route, method === 'POST' ? { argv: ['true'] } : undefined, alexToken);
        expect([other.status, other.body.error?.code], route).toEqual([404, 'NOT_FOUND']);
      }
      // A run token cannot create runs at all.
      const byRun = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'alex' } }, answer.body.runToken);
      expect([byRun.status, byRun.body.error?.code]).toEqual([404, 'NOT_FOUND']);
    });

    it("bob's token binding alex is FORBIDDEN; so is a viewer's run binding a shared folder it could only read", async () => {
      await refused(bobToken, { user: 'alex' }, 'bindings.user');
      await refused(bobToken, { user: 'nobody' }, 'bindings.user');
      const vicToken = (await svc.hf.tokens.createForUser({ tenant: 'default', user: 'vic' })).token;
      await refused(vicToken, { user: 'vic', project: 'proj-7' }, 'bindings.project');
      await refused(vicToken, { user: 'alex' }, 'bindings.user');
      const own = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'vic' } }, vicToken);
      expect([own.status, own.body.bindings]).toEqual([201, { user: 'vic' }]);
    });

    it("a revoked alex's token binds nothing, and the alex added after cannot be bound with it", async () => {
      const oldToken = (await svc.hf.tokens.createForUser({ tenant: 'default', user: 'alex' })).token;
      await svc.hf.users.revoke({ tenant: 'default', name: 'alex' });
      await svc.hf.users.add({ tenant: 'default', name: 'alex', role: 'viewer' });
      const before = await counts();
      const answer = await svc.api('POST', '/v1/runs', { deploymentId, bindings: { user: 'alex' } }, oldToken);
      expect([answer.status, answer.body.error?.code]).toEqual([401, 'UNAUTHORIZED']);
      expect(await counts()).toEqual(before);
    });
  });

  it("another tenant's tokens reach nothing of this tenant, and its runs cannot bind this tenant's users", async () => {
    const other = await svc.hf.tokens.create({ tenant: 'globex', name: 'svc', admin: true });
    const p = (await principal(other.token)) as Principal;
    expect(await may(p, 'task', 'task-7')).toBe(false);
    const globex = await svc.hf.forTenant('globex');
    await expect(globex.runs.create({ deploymentId, bindings: { user: 'ada' } })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
