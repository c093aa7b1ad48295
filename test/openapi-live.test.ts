/**
 * The OpenAPI document against the server's real answers: a real app (SQLite, local disk,
 * bwrap sandboxes) is driven through every documented operation, happy path and a
 * representative error, and every answer is checked against the document with Ajv
 * (`support/openapi-validator.ts`): status, media type, body and declared headers. The last
 * tests fail when an operation was documented but not exercised (or never answered an error
 * it documents), or when the app mounts a route the document does not have.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { type CheckedAnswer, OpenApiValidator } from './support/openapi-validator.js';
import { openTestService, type TestService } from './support/service.js';

interface Call {
  readonly body?: unknown;
  readonly raw?: { readonly bytes: Uint8Array | string; readonly type: string };
  readonly headers?: Record<string, string>;
  /** Default: the tenant's service token; `null`: none. */
  readonly token?: string | null;
}

describe('every documented operation answers as the OpenAPI document says (local-disk + sqlite, bwrap)', () => {
  let svc: TestService;
  let validator: OpenApiValidator;
  /** `operationId` -> the statuses it answered. */
  const exercised = new Map<string, Set<number>>();

  /** Sends a request and checks the answer against the document; returns what the test goes on with. */
  async function call(method: string, url: string, options: Call = {}): Promise<CheckedAnswer> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? svc.token : options.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: RequestInit['body'];
    if (options.raw !== undefined) {
      headers['content-type'] ??= options.raw.type;
      body = options.raw.bytes as RequestInit['body'];
    } else if (options.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = JSON.stringify(options.body);
    }
    const response = await svc.app.request(url, { method, headers, ...(body === undefined ? {} : { body }) });
    const checked = await validator.check(method, url, response);
    const statuses = exercised.get(checked.operationId) ?? new Set<number>();
    statuses.add(checked.status);
    exercised.set(checked.operationId, statuses);
    return checked;
  }

  /** {@link call}, expecting `status` (and, for an error, `code`). */
  async function expectAnswer(status: number, method: string, url: string, options: Call = {}, code?: string): Promise<CheckedAnswer> {
    const answer = await call(method, url, options);
    expect({ status: answer.status, code: answer.body?.error?.code }).toEqual({ status, code });
    return answer;
  }

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
    const doc = await svc.app.request('/v1/openapi.json');
    validator = new OpenApiValidator((await doc.json()) as Record<string, unknown>);
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('ops: health, readiness (and a store that does not answer), metrics, this document, the inspector page', async () => {
    await expectAnswer(200, 'GET', '/healthz', { token: null });
    await expectAnswer(200, 'GET', '/readyz', { token: null });
    const restore = svc.faults.inject({ ops: ['stat'], fault: { kind: 'error' } });
    await expectAnswer(503, 'GET', '/readyz', { token: null }, 'STORE_UNAVAILABLE');
    restore();
    const metrics = await expectAnswer(200, 'GET', '/metrics', { token: null });
    expect(metrics.body).toContain('holdfast_turns_active');
    await expectAnswer(200, 'GET', '/v1/openapi.json', { token: null });
    const redirect = await expectAnswer(308, 'GET', '/ui', { token: null });
    expect(redirect.headers.get('location')).toBe('/ui/');
    const page = await expectAnswer(200, 'GET', '/ui/index.html', { token: null });
    const etag = page.headers.get('etag') ?? '';
    await expectAnswer(304, 'GET', '/ui/index.html', { token: null, headers: { 'if-none-match': etag } });
    await expectAnswer(404, 'GET', '/ui/nothing.js', { token: null }, 'NOT_FOUND');
  });

  it('a method a documented path lacks is the 405 component, with Allow', async () => {
    const response = await svc.app.request('/v1/runs', { method: 'DELETE', headers: { authorization: `Bearer ${svc.token}` } });
    const checked = await validator.checkComponent('MethodNotAllowed', response);
    expect(checked).toMatchObject({ status: 405, body: { error: { code: 'METHOD_NOT_ALLOWED' } } });
    expect(checked.headers.get('allow')).toBe('GET, HEAD, POST');
  });

  it('auth: tokens (admin only), who a token is', async () => {
    const created = await expectAnswer(201, 'POST', '/v1/tokens', { token: svc.adminToken, body: { tenant: 'other', name: 'ci' } });
    expect(typeof created.body.token).toBe('string');
    await expectAnswer(403, 'POST', '/v1/tokens', { body: { tenant: 'other', name: 'ci' } }, 'FORBIDDEN');
    await expectAnswer(200, 'GET', '/v1/tokens?limit=2', { token: svc.adminToken });
    await expectAnswer(403, 'GET', '/v1/tokens', {}, 'FORBIDDEN');
    await expectAnswer(200, 'GET', '/api/whoami');
    const anonymous = await expectAnswer(401, 'GET', '/api/whoami', { token: null }, 'UNAUTHORIZED');
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer /);
  });

  let deploymentId = '';
  let otherDeploymentId = '';
  let runId = '';
  let endedRunId = '';
  let turnCheckpointId = '';

  it('deployments, bundles and channels', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-openapi-bundle-'));
    try {
      await fs.mkdir(path.join(dir, 'bundle'));
      await fs.writeFile(path.join(dir, 'bundle', 'prompt.md'), 'be brief\n');
      await tar.c({ cwd: path.join(dir, 'bundle'), file: path.join(dir, 'bundle.tar'), portable: true }, ['.']);
      const bytes = await fs.readFile(path.join(dir, 'bundle.tar'));
      const bundle = await expectAnswer(201, 'POST', '/v1/bundles', { raw: { bytes, type: 'application/x-tar' } });
      await expectAnswer(415, 'POST', '/v1/bundles', { raw: { bytes, type: 'application/json' } }, 'UNSUPPORTED_MEDIA_TYPE');
      const spec = { ...svc.deploymentBase, bundle: bundle.body, env: { MODE: 'one' } };
      deploymentId = (await expectAnswer(201, 'POST', '/v1/deployments', { body: spec })).body.id;
      await expectAnswer(200, 'POST', '/v1/deployments', { body: spec });
      otherDeploymentId = (await expectAnswer(201, 'POST', '/v1/deployments', { body: { ...svc.deploymentBase, env: { MODE: 'two' } } }))
        .body.id;
      await expectAnswer(400, 'POST', '/v1/deployments', { body: { ...svc.deploymentBase, setup: 'npm ci' } }, 'INVALID_INPUT');
      await expectAnswer(
        415,
        'POST',
        '/v1/deployments',
        { raw: { bytes: 'provider=bwrap', type: 'application/x-www-form-urlencoded' } },
        'UNSUPPORTED_MEDIA_TYPE',
      );
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    await expectAnswer(200, 'GET', '/v1/deployments?limit=1');
    await expectAnswer(400, 'GET', '/v1/deployments?limit=0', {}, 'INVALID_INPUT');
    await expectAnswer(200, 'GET', `/v1/deployments/${deploymentId}`);
    await expectAnswer(404, 'GET', `/v1/deployments/${'0'.repeat(64)}`, {}, 'NOT_FOUND');
    await expectAnswer(200, 'PUT', '/v1/channels/main', { body: { deploymentId } });
    await expectAnswer(404, 'PUT', '/v1/channels/main', { body: { deploymentId: 'f'.repeat(64) } }, 'NOT_FOUND');
    await expectAnswer(200, 'GET', '/v1/channels');
    await expectAnswer(400, 'GET', '/v1/channels?cursor=', {}, 'INVALID_INPUT');
    await expectAnswer(200, 'GET', '/v1/channels/main');
    await expectAnswer(404, 'GET', '/v1/channels/nope', {}, 'NOT_FOUND');
  });

  it('runs and turns, with an idempotent replay and a reused key', async () => {
    const created = await expectAnswer(201, 'POST', '/v1/runs', { body: { deploymentId, bindings: { task: 'openapi' } } });
    runId = created.body.id;
    expect(typeof created.body.runToken).toBe('string');
    await expectAnswer(404, 'POST', '/v1/runs', { body: { channel: 'nope' } }, 'NOT_FOUND');
    const turn = { argv: ['sh', '-c', 'echo hello > a.txt; mkdir -p d; echo out; echo err >&2'] };
    const headers = { 'idempotency-key': `turn-${runId}` };
    const first = await expectAnswer(200, 'POST', `/v1/runs/${runId}/turns`, { body: turn, headers });
    expect(first.body).toMatchObject({ stdout: 'out\n', stderr: 'err\n', turn: { runId, status: 'completed' } });
    turnCheckpointId = first.body.checkpoint.id;
    const replay = await expectAnswer(200, 'POST', `/v1/runs/${runId}/turns`, { body: turn, headers });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    await expectAnswer(400, 'POST', `/v1/runs/${runId}/turns`, { body: { argv: ['true'] }, headers }, 'INVALID_INPUT');
    await expectAnswer(200, 'GET', '/v1/runs?limit=5');
    await expectAnswer(400, 'GET', '/v1/runs?limit=x', {}, 'INVALID_INPUT');
    await expectAnswer(200, 'GET', `/v1/runs/${runId}`);
    await expectAnswer(404, 'GET', '/v1/runs/no-such-run', {}, 'NOT_FOUND');
    const events = await expectAnswer(200, 'GET', `/v1/runs/${runId}/events`);
    expect(events.body.events.length).toBeGreaterThan(0);
    await expectAnswer(400, 'GET', `/v1/runs/${runId}/events?limit=0`, {}, 'INVALID_INPUT');
    await expectAnswer(200, 'GET', `/v1/runs/${runId}/turns`);
    await expectAnswer(404, 'GET', '/v1/runs/no-such-run/turns', {}, 'NOT_FOUND');

    const upgraded = await expectAnswer(200, 'POST', `/v1/runs/${runId}/upgrade`, { body: { deploymentId: otherDeploymentId } });
    expect(upgraded.body.deploymentId).toBe(otherDeploymentId);
    await expectAnswer(404, 'POST', `/v1/runs/${runId}/upgrade`, { body: { deploymentId: 'e'.repeat(64) } }, 'NOT_FOUND');

    const ended = await expectAnswer(201, 'POST', '/v1/runs', { body: { channel: 'main' } });
    endedRunId = ended.body.id;
    await expectAnswer(200, 'POST', `/v1/runs/${endedRunId}/end`);
    await expectAnswer(404, 'POST', '/v1/runs/no-such-run/end', {}, 'NOT_FOUND');
    await expectAnswer(409, 'POST', `/v1/runs/${endedRunId}/turns`, { body: { argv: ['true'] } }, 'CONFLICT');
  });

  it('lease resolution: a run whose release needs recovery, and one that does not', async () => {
    await expectAnswer(409, 'POST', `/v1/runs/${runId}/lease/resolve`, {}, 'CONFLICT');
    // What a release that did not finish leaves: the lease held, then marked for recovery by its holder.
    const claimed = await svc.hf.meta.runs.claim(runId, 'openapi-test', 60_000);
    if (claimed === undefined) throw new Error('the run lease could not be claimed');
    await svc.hf.meta.runs.requireRecovery(runId, claimed.lease.epoch, { code: 'TIMEOUT', message: 'the release did not finish' });
    const resolved = await expectAnswer(200, 'POST', `/v1/runs/${runId}/lease/resolve`);
    expect(resolved.body.lease.state).toBe('free');
  });

  it('checkpoints: take one, list, get, browse, download, diff; restore one into a new sandbox', async () => {
    const manual = await expectAnswer(201, 'POST', `/v1/runs/${runId}/checkpoints`, { body: { label: 'by hand', meta: { step: 1 } } });
    expect(manual.body).toMatchObject({ status: 'ready', reason: 'manual', stats: { files: 1 }, label: 'by hand', meta: { step: 1 } });
    await expectAnswer(
      422,
      'POST',
      `/v1/runs/${runId}/checkpoints`,
      { body: { label: `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}` } },
      'SECRET_EXCLUDED',
    );
    await expectAnswer(409, 'POST', `/v1/runs/${endedRunId}/checkpoints`, {}, 'CONFLICT');
    await expectAnswer(200, 'GET', `/v1/runs/${runId}/checkpoints?limit=10`);
    await expectAnswer(404, 'GET', '/v1/runs/no-such-run/checkpoints', {}, 'NOT_FOUND');
    await expectAnswer(200, 'GET', `/v1/checkpoints/${turnCheckpointId}`);
    await expectAnswer(404, 'GET', '/v1/checkpoints/no-such-checkpoint', {}, 'NOT_FOUND');
    const root = await expectAnswer(200, 'GET', `/v1/checkpoints/${turnCheckpointId}/tree`);
    expect(root.body.entries.map((e: { name: string }) => e.name)).toEqual(['a.txt', 'd']);
    await expectAnswer(200, 'GET', `/v1/checkpoints/${turnCheckpointId}/tree?path=a.txt`);
    await expectAnswer(404, 'GET', `/v1/checkpoints/${turnCheckpointId}/tree?path=missing`, {}, 'NOT_FOUND');
    const file = await expectAnswer(200, 'GET', `/v1/checkpoints/${turnCheckpointId}/file?path=a.txt`);
    expect(Buffer.from(file.body).toString()).toBe('hello\n');
    await expectAnswer(400, 'GET', `/v1/checkpoints/${turnCheckpointId}/file`, {}, 'INVALID_INPUT');
    const diff = await expectAnswer(200, 'GET', `/v1/checkpoints/${manual.body.id}/diff?against=${turnCheckpointId}`);
    expect(diff.body).toMatchObject({ baseId: turnCheckpointId, truncated: false });
    await expectAnswer(404, 'GET', '/v1/checkpoints/no-such-checkpoint/diff', {}, 'NOT_FOUND');
    const restored = await expectAnswer(201, 'POST', `/v1/runs/${runId}/restore`, { body: { checkpointId: turnCheckpointId } });
    expect(restored.body.checkpointId).toBe(turnCheckpointId);
    await expectAnswer(400, 'POST', `/v1/runs/${runId}/restore`, { body: { checkpointId: '' } }, 'INVALID_INPUT');
    const byId = await expectAnswer(201, 'POST', `/v1/checkpoints/${turnCheckpointId.slice(0, 12)}/restore`);
    expect(byId.body.checkpointId).toBe(turnCheckpointId);
    await expectAnswer(404, 'POST', '/v1/checkpoints/no-such-checkpoint/restore', {}, 'NOT_FOUND');
    const forked = await expectAnswer(201, 'POST', '/v1/runs', { body: { fromCheckpoint: turnCheckpointId, label: 'fork' } });
    expect(forked.body.checkpoint).toMatchObject({ forkedFrom: turnCheckpointId, label: 'fork', status: 'ready' });
  });

  it('work folders: upload, list, download (whole, a range, past the end), operations, sync state, refresh, purge', async () => {
    const base = `/api/companies/${svc.hf.tenant.name}/work-folders/task/openapi`;
    const upload = (key: string, type = 'application/octet-stream') => ({
      raw: { bytes: 'note one\n', type },
      headers: { 'idempotency-key': key, 'x-file-content-type': 'text/plain' },
    });
    await expectAnswer(200, 'PUT', `${base}/content?path=notes.txt`, upload('up-1'));
    await expectAnswer(415, 'PUT', `${base}/content?path=notes.txt`, upload('up-2', 'application/json'), 'UNSUPPORTED_MEDIA_TYPE');
    const listing = await expectAnswer(200, 'GET', base);
    // The collection with a trailing slash is the same listing (it answered 405 naming GET as allowed).
    const slashed = await svc.app.request(`${base}/`, { headers: { authorization: `Bearer ${svc.token}` } });
    expect(slashed.status).toBe(200);
    expect(await slashed.json()).toEqual(listing.body);
    // …and asks the folder policy the same: another tenant's collection is the same denial.
    const foreign = await svc.app.request('/api/companies/someone-else/work-folders/task/openapi/', {
      headers: { authorization: `Bearer ${svc.token}` },
    });
    expect({ status: foreign.status, code: ((await foreign.json()) as { error: { code: string } }).error.code }).toEqual({
      status: 404,
      code: 'NOT_FOUND',
    });
    await expectAnswer(200, 'GET', `${base}?trash=true`);
    await expectAnswer(400, 'GET', `${base}?trash=yes`, {}, 'INVALID_INPUT');
    await expectAnswer(404, 'GET', `/api/companies/someone-else/work-folders/task/openapi`, {}, 'NOT_FOUND');
    const whole = await expectAnswer(200, 'GET', `${base}/content?path=notes.txt`);
    expect(whole.body).toBe('note one\n');
    const part = await expectAnswer(206, 'GET', `${base}/content?path=notes.txt`, { headers: { range: 'bytes=0-3' } });
    expect(part.body).toBe('note');
    await expectAnswer(416, 'GET', `${base}/content?path=notes.txt`, { headers: { range: 'bytes=100-' } }, 'RANGE_NOT_SATISFIABLE');
    const op = { headers: { 'idempotency-key': 'mkdir-1' }, body: { action: 'mkdir', path: 'drafts' } };
    await expectAnswer(200, 'POST', `${base}/operations`, op);
    await expectAnswer(400, 'POST', `${base}/operations`, { ...op, body: { action: 'chmod' } }, 'INVALID_INPUT');
    const sync = await expectAnswer(200, 'GET', `${base}/sync`);
    expect(sync.body.sandboxes.length).toBeGreaterThan(0);
    await expectAnswer(404, 'GET', `/api/companies/${svc.hf.tenant.name}/work-folders/nowhere/openapi/sync`, {}, 'NOT_FOUND');
    await expectAnswer(202, 'POST', `${base}/refresh`, { body: { runId } });
    await expectAnswer(400, 'POST', `${base}/refresh`, { body: { runId, extra: 1 } }, 'INVALID_INPUT');
    // A collection no sandbox synced: purging one a sandbox synced is refused by its sync state rows today.
    const spare = `/api/companies/${svc.hf.tenant.name}/work-folders/task/openapi-spare`;
    await expectAnswer(200, 'PUT', `${spare}/content?path=notes.txt`, upload('up-spare'));
    await expectAnswer(401, 'DELETE', spare, { token: null }, 'UNAUTHORIZED');
    const purged = await expectAnswer(200, 'DELETE', spare);
    expect(purged.body.purged).toBe(1);
  });

  it('exercised every documented operation, and an error of each that documents one', () => {
    const documented = validator.operations.map((op) => op.operationId).sort();
    expect([...exercised.keys()].sort()).toEqual(documented);
    const withoutError = validator.operations
      .filter((op) => Object.keys(op.responses).some((s) => s.startsWith('4')))
      .filter((op) => ![...(exercised.get(op.operationId) ?? [])].some((s) => s >= 400 && s < 500))
      .map((op) => op.operationId);
    expect(withoutError).toEqual([]);
  });

  it('documents every route the app mounts', () => {
    const mounted = new Set(
      svc.app.routes
        .filter((r) => r.method !== 'ALL')
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)(\{[^}]*\})?/g, '{$1}')}`),
    );
    const documented = new Set(validator.operations.map((op) => `${op.method} ${op.path}`));
    // A work-folder collection is also served with a trailing slash, which OpenAPI paths do not take.
    const undocumented = [...mounted].filter((route) => !documented.has(route));
    expect(undocumented).toEqual([
      'get /api/companies/{companyId}/work-folders/{scope}/{ownerId}/',
      'delete /api/companies/{companyId}/work-folders/{scope}/{ownerId}/',
    ]);
    expect([...documented].filter((route) => !mounted.has(route))).toEqual([]);
  });
});
