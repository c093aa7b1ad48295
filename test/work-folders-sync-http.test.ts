import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** `GET …/sync` and `POST …/refresh` over the HTTP app, with a real run in a bwrap sandbox. */
describe.each(BACKENDS)('work-folder sync state and refresh over HTTP ($name)', (backend: BackendCase) => {
  let svc: TestService;
  const base = (scope: string, owner: string) => `/api/companies/${svc.hf.tenant.name}/work-folders/${scope}/${owner}`;

  beforeAll(async () => {
    svc = await openTestService(backend);
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('never saved, then saved with finalCheckpointAt; refresh is 202, 404 for a run not bound to the collection, 409 once the run ended', async () => {
    const task = `task-${crypto.randomUUID()}`;
    const deployment = await svc.api('POST', '/v1/deployments', { provider: svc.provider.name });
    const run = await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id, bindings: { task } });
    expect(run.status).toBe(201);
    const empty = await svc.api('GET', `${base('task', task)}/sync`);
    expect(empty).toMatchObject({ status: 200, body: { sandboxes: [] } });

    const turn = await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv: ['sh', '-c', 'echo hi > "$HOLDFAST_TASK_DIR/a.txt"'] });
    expect(turn.status).toBe(200);
    const saved = await svc.api('GET', `${base('task', task)}/sync`);
    expect(saved.status).toBe(200);
    expect(saved.body.sandboxes).toHaveLength(1);
    expect(saved.body.sandboxes[0]).toMatchObject({
      runId: run.body.id,
      state: 'saved',
      active: true,
      error: null,
      refresh: { state: 'none' },
    });
    expect(saved.body.sandboxes[0].finalCheckpointAt).toBe(saved.body.sandboxes[0].lastSavedAt);

    const refresh = await svc.api('POST', `${base('task', task)}/refresh`, { runId: run.body.id });
    expect(refresh).toMatchObject({ status: 202, body: { queued: true } });
    const queued = await svc.api('GET', `${base('task', task)}/sync`);
    expect(queued.body.sandboxes[0].refresh.state).toBe('queued');

    const unbound = await svc.api('POST', `${base('task', `other-${crypto.randomUUID()}`)}/refresh`, { runId: run.body.id });
    expect(unbound).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const badBody = await svc.api('POST', `${base('task', task)}/refresh`, { runId: run.body.id, extra: 1 });
    expect(badBody).toMatchObject({ status: 400, body: { error: { code: 'INVALID_INPUT' } } });

    expect((await svc.api('POST', `/v1/runs/${run.body.id}/end`)).status).toBe(200);
    const ended = await svc.api('POST', `${base('task', task)}/refresh`, { runId: run.body.id });
    expect(ended).toMatchObject({ status: 409, body: { error: { code: 'CONFLICT', data: { reason: 'ended' } } } });
    const after = await svc.api('GET', `${base('task', task)}/sync`);
    expect(after.body.sandboxes[0]).toMatchObject({ state: 'saved', active: false });
  });

  it('purging a collection a sandbox synced drops its sync states; the sandbox, still holding the files, saves them again', async () => {
    const task = `task-${crypto.randomUUID()}`;
    const deployment = await svc.api('POST', '/v1/deployments', { provider: svc.provider.name });
    const run = await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id, bindings: { task } });
    const turn = await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv: ['sh', '-c', 'echo kept > "$HOLDFAST_TASK_DIR/a.txt"'] });
    expect(turn.status).toBe(200);
    const purged = await svc.api('DELETE', base('task', task));
    expect(purged).toMatchObject({ status: 200, body: { purged: 1 } });
    expect((await svc.api('GET', `${base('task', task)}/sync`)).body).toEqual({ sandboxes: [] });
    expect((await svc.api('GET', base('task', task))).body.files).toEqual([]);
    expect((await svc.api('POST', `/v1/runs/${run.body.id}/turns`, { argv: ['true'] })).status).toBe(200);
    const files = (await svc.api('GET', base('task', task))).body.files as Array<{ path: string; sha256: string }>;
    expect(files.map((f) => f.path)).toEqual(['a.txt']);
    const [state] = (await svc.api('GET', `${base('task', task)}/sync`)).body.sandboxes;
    expect(state).toMatchObject({ runId: run.body.id, state: 'saved' });
  });

  it("a user collection's sync state is as private as its files: a service token gets 404", async () => {
    const answer = await svc.api('GET', `${base('user', 'somebody')}/sync`);
    expect(answer).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const refresh = await svc.api('POST', `${base('user', 'somebody')}/refresh`, { runId: 'x' });
    expect(refresh).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });
});
