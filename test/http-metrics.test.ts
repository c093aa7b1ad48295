import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** `holdfast_http_requests_total` as it reads in /metrics, for one route, method and status. */
function requests(text: string, method: string, route: string, status: number): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`holdfast_http_requests_total{method="${method}",route="${route}",status="${status}"} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Answers a middleware gives before the route's handler are counted under the route they were for. */
describe('HTTP metrics label every answer with its route pattern', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
  });
  afterAll(async () => {
    await svc?.close();
  });

  const post = (url: string, body: string, headers: Record<string, string>) =>
    svc.app.request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  it('an idempotent replay and a refused reuse of the key count under the route, not /v1/*', async () => {
    const auth = { authorization: `Bearer ${svc.token}`, 'idempotency-key': 'metrics-label-1' };
    const body = JSON.stringify({ ...svc.deploymentBase, env: { LABEL: 'one' } });
    const first = await post('/v1/deployments', body, auth);
    expect(first.status).toBe(201);
    const replay = await post('/v1/deployments', body, auth);
    expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    const reused = await post('/v1/deployments', JSON.stringify({ ...svc.deploymentBase, env: { LABEL: 'two' } }), auth);
    expect(reused.status).toBe(400);
    // The route's own refusal (a non-admin on an admin route) and a missing token, each before the handler.
    const forbidden = await post('/v1/tokens', JSON.stringify({ tenant: 'default', name: 'x' }), {
      authorization: `Bearer ${svc.token}`,
      'idempotency-key': 'metrics-label-2',
    });
    expect(forbidden.status).toBe(403);
    expect((await post('/v1/runs/some-run/turns', '{"argv":["true"]}', {})).status).toBe(401);

    const text = await (await svc.app.request('/metrics')).text();
    expect(requests(text, 'POST', '/v1/deployments', 201)).toBe(2);
    expect(requests(text, 'POST', '/v1/deployments', 400)).toBe(1);
    expect(requests(text, 'POST', '/v1/tokens', 403)).toBe(1);
    expect(requests(text, 'POST', '/v1/runs/:id/turns', 401)).toBe(1);
    expect(text).toMatch(/^holdfast_http_request_duration_seconds_count\{method="POST",route="\/v1\/deployments"\} 3$/m);
    expect(text).not.toContain('route="/v1/*"');
  });

  it('/metrics carries the process and runtime metrics beside the service ones', async () => {
    const text = await (await svc.app.request('/metrics')).text();
    for (const name of ['process_resident_memory_bytes', 'process_cpu_seconds_total', 'process_start_time_seconds', 'process_open_fds']) {
      const value = new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
      expect(Number(value), name).toBeGreaterThan(0);
    }
    for (const name of ['nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes', 'holdfast_turns_active']) {
      expect(text).toMatch(new RegExp(`^${name} \\d`, 'm'));
    }
    expect(text).toMatch(/^# TYPE nodejs_gc_duration_seconds histogram$/m);
    // prom-client's `_total` gauges are left out (the format keeps `_total` for counters); their per-type gauges stay.
    expect(text).toMatch(/^# TYPE nodejs_active_handles gauge$/m);
    expect(text).not.toMatch(/^nodejs_active_(handles|requests|resources)_total/m);
  });
});
