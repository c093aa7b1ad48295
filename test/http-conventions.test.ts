import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** HTTP conventions a client relies on: 405 with `Allow` for a known path, 415 for a body that is not declared JSON. */
describe('HTTP conventions', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
  });
  afterAll(async () => {
    await svc?.close();
  });

  const send = (method: string, url: string, headers: Record<string, string> = {}, body?: string) =>
    svc.app.request(url, {
      method,
      headers: { authorization: `Bearer ${svc.token}`, ...headers },
      ...(body === undefined ? {} : { body }),
    });

  it('a known path under another method answers 405 with Allow; an unknown path still 404', async () => {
    const wrong = await send('DELETE', '/v1/deployments');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('METHOD_NOT_ALLOWED');
    const param = await send('PUT', '/v1/runs/0b0a2f64-0000-4000-8000-000000000000');
    expect(param.status).toBe(405);
    expect(param.headers.get('allow')?.split(', ')).toContain('GET');
    const health = await svc.app.request('/healthz', { method: 'POST' });
    expect(health.status).toBe(405);
    expect(health.headers.get('allow')).toBe('GET, HEAD');
    const unknown = await send('GET', '/v1/nothing-here');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
  });

  it('a body that is not declared JSON is 415 and creates nothing; JSON types with parameters are accepted', async () => {
    const before = (await svc.api('GET', '/v1/deployments')).body;
    for (const type of ['application/x-www-form-urlencoded', 'text/plain;charset=UTF-8', '']) {
      const headers: Record<string, string> = type === '' ? {} : { 'content-type': type };
      const answer = await send('POST', '/v1/deployments', headers, '{"provider":"bwrap"}');
      expect(answer.status, type).toBe(415);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    expect((await svc.api('GET', '/v1/deployments')).body).toEqual(before);
    const ok = await send('POST', '/v1/deployments', { 'content-type': 'application/json; charset=utf-8' }, '{"provider":"bwrap"}');
    expect(ok.status).toBeLessThan(300);
  });

  it('a deployment naming a provider the service cannot open is refused at creation, and nothing is stored', async () => {
    const before = (await svc.api('GET', '/v1/deployments')).body;
    const answer = await svc.api('POST', '/v1/deployments', { provider: 'no-such-provider' });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'INVALID_INPUT', data: { provider: 'no-such-provider' } });
    expect((await svc.api('GET', '/v1/deployments')).body).toEqual(before);
  });

  it('a file download without its path is INVALID_INPUT naming the missing parameter', async () => {
    const answer = await svc.api('GET', '/v1/checkpoints/0b0a2f64-0000-4000-8000-000000000000/file');
    expect(answer.status).toBe(400);
    expect(answer.body.error.code).toBe('INVALID_INPUT');
    expect(answer.body.error.data.issues.map((i: { path: string[] }) => i.path)).toEqual([['path']]);
  });

  it("Idempotency-Key: the same body re-serialised is the same request, and the replay has the first answer's media type", async () => {
    const key = 'same-body-other-whitespace';
    const headers = { 'content-type': 'application/json', 'idempotency-key': key };
    const first = await send('POST', '/v1/deployments', headers, '{"provider":"bwrap","env":{"A":"1","B":"2"}}');
    expect(first.status).toBeLessThan(300);
    const again = await send('POST', '/v1/deployments', headers, '{ "env": { "B": "2", "A": "1" },\n  "provider": "bwrap" }');
    expect(again.status).toBe(first.status);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(await again.json()).toEqual(await first.json());
    const other = await send('POST', '/v1/deployments', headers, '{"provider":"bwrap","env":{"A":"1"}}');
    expect(other.status).toBe(400);
  });

  it('Idempotency-Key: a retry while the first request runs is 409 with Retry-After', async () => {
    const deploymentId = (await svc.api('POST', '/v1/deployments', { provider: 'bwrap' })).body.id as string;
    const runId = (await svc.api('POST', '/v1/runs', { deploymentId })).body.id as string;
    const headers = { 'content-type': 'application/json', 'idempotency-key': 'slow-turn' };
    const body = JSON.stringify({ argv: ['sh', '-c', 'sleep 2'] });
    const slow = send('POST', `/v1/runs/${runId}/turns`, headers, body);
    let busy: Response | undefined;
    // The first request's receipt is written before its turn starts; poll until the retry meets it.
    for (let i = 0; i < 50 && busy === undefined; i += 1) {
      await new Promise((r) => setTimeout(r, 50));
      const retry = await send('POST', `/v1/runs/${runId}/turns`, headers, body);
      if (retry.status === 409) busy = retry;
    }
    expect(busy, 'no retry met the first request while it ran').toBeDefined();
    const refused = busy as Response;
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: { data: { reason: string } } }).error.data.reason).toBe('idempotency_in_progress');
    expect((await slow).status).toBeLessThan(300);
  }, 60_000);
});
