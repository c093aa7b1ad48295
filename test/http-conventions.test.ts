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
    const answer = await svc.api('POST', '/v1/deployments', { provider: 'docker' });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'INVALID_INPUT', data: { provider: 'docker' } });
    expect((await svc.api('GET', '/v1/deployments')).body).toEqual(before);
  });

  it('a file download without its path is INVALID_INPUT naming the missing parameter', async () => {
    const answer = await svc.api('GET', '/v1/checkpoints/0b0a2f64-0000-4000-8000-000000000000/file');
    expect(answer.status).toBe(400);
    expect(answer.body.error.code).toBe('INVALID_INPUT');
    expect(answer.body.error.data.issues.map((i: { path: string[] }) => i.path)).toEqual([['path']]);
  });
});
