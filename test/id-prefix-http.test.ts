import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../src/core/hash.js';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';
import { writeFile } from './support/trees.js';

/** Prefixes shared by ids this test chooses: 8 characters, so each is long enough to resolve. */
const SHARED = 'c0ffee00';
const RUN_SHARED = 'feed0000';

describe.each(BACKENDS)('ids over HTTP: exact, unique prefix, latest, within the tenant: $name', (backend) => {
  let svc: TestService;
  let real: string;
  let otherReal: string;
  let runA: string;
  let dir: string;
  beforeAll(async () => {
    svc = await openTestService(backend);
    const { hf } = svc;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-prefix-ws-'));
    writeFile(dir, 'a.txt', 'alpha\n');
    real = (await hf.snapshots.checkpoint({ dir, workspace: 'prefix-ws' })).checkpoint.id;
    const other = await hf.forTenant('prefix-other');
    writeFile(dir, 'b.txt', 'beta\n');
    otherReal = (await other.snapshots.checkpoint({ dir, workspace: 'other-ws' })).checkpoint.id;

    // Chosen ids: two of this tenant share SHARED; another tenant holds SHARED-… too.
    const ws = await hf.snapshots.workspace('crafted', true);
    const otherWs = await other.snapshots.workspace('crafted', true);
    for (const [workspaceId, id] of [
      [ws.id, `${SHARED}-aaaa`],
      [ws.id, `${SHARED}-bbbb`],
      [otherWs.id, `${SHARED}-cccc`],
      [otherWs.id, 'deadbeef-only-other'],
      [ws.id, 'abad1dea-mine'],
    ] as const) {
      await hf.meta.checkpoints.createPending({ id, workspaceId, reason: 'manual' });
    }
    // Runs with chosen ids: two of this tenant share RUN_SHARED, one of another tenant too.
    const deploymentId = sha256Hex('prefix-deployment');
    for (const tenant of [hf.tenant, other.tenant]) {
      await hf.meta.deployments.put({ tenantId: tenant.id, id: deploymentId, spec: JSON.stringify({ provider: 'bwrap' }) });
    }
    const makeRun = async (tenantId: string, id: string) => {
      const runWs = await hf.meta.workspaces.create({ tenantId, name: `run:${id}` });
      return (await hf.meta.runs.create({ id, tenantId, workspaceId: runWs.id, channel: null, deploymentId })).id;
    };
    runA = await makeRun(hf.tenant.id, `${RUN_SHARED}-1111`);
    await makeRun(hf.tenant.id, `${RUN_SHARED}-2222`);
    await makeRun(other.tenant.id, `${RUN_SHARED}-3333`);
    await makeRun(other.tenant.id, 'beefcafe-only-other');
  });
  afterAll(async () => {
    await svc?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const get = (url: string) => svc.api('GET', url);

  it('checkpoints: exact id and a unique prefix answer the same checkpoint; latest is the newest ready one', async () => {
    expect((await get(`/v1/checkpoints/${real}`)).body.id).toBe(real);
    const byPrefix = await get(`/v1/checkpoints/${real.slice(0, 8)}`);
    expect(byPrefix.status).toBe(200);
    expect(byPrefix.body.id).toBe(real);
    expect((await get('/v1/checkpoints/abad1dea')).body.id).toBe('abad1dea-mine');
    // Pending crafted checkpoints were created later, but latest is the newest *ready* one.
    expect((await get('/v1/checkpoints/latest')).body.id).toBe(real);
    const tree = await get(`/v1/checkpoints/${real.slice(0, 10)}/tree`);
    expect(tree.status).toBe(200);
    expect(tree.body.entries.map((e: { name: string }) => e.name)).toEqual(['a.txt']);
    const file = await svc.app.request(`/v1/checkpoints/latest/file?path=a.txt`, { headers: { authorization: `Bearer ${svc.token}` } });
    expect(Buffer.from(await file.arrayBuffer()).toString()).toBe('alpha\n');
  });

  it('checkpoints: too short is INVALID_INPUT, ambiguous is CONFLICT listing only this tenant\u2019s candidates', async () => {
    const short = await get(`/v1/checkpoints/${real.slice(0, 7)}`);
    expect(short.status).toBe(400);
    expect(short.body.error.code).toBe('INVALID_INPUT');
    const ambiguous = await get(`/v1/checkpoints/${SHARED}`);
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error).toMatchObject({ code: 'CONFLICT', data: { candidates: [`${SHARED}-aaaa`, `${SHARED}-bbbb`] } });
    expect(JSON.stringify(ambiguous.body)).not.toContain(`${SHARED}-cccc`);
    expect((await get(`/v1/checkpoints/${SHARED}-a`)).body.id).toBe(`${SHARED}-aaaa`);
  });

  it("checkpoints: another tenant's ids and prefixes are NOT_FOUND", async () => {
    for (const id of [otherReal, otherReal.slice(0, 8), 'deadbeef', 'deadbeef-only-other', `${SHARED}-c`]) {
      const answer = await get(`/v1/checkpoints/${id}`);
      expect(answer.status, id).toBe(404);
      expect(answer.body.error.code).toBe('NOT_FOUND');
      expect(JSON.stringify(answer.body)).not.toContain('cccc');
    }
    expect((await get(`/v1/checkpoints/${otherReal.slice(0, 8)}/tree`)).status).toBe(404);
  });

  it('runs: exact, prefix and latest; short, ambiguous and foreign ids answer 400, 409 and 404', async () => {
    expect((await get(`/v1/runs/${runA}`)).body.id).toBe(runA);
    expect((await get(`/v1/runs/${RUN_SHARED}-1`)).body.id).toBe(runA);
    expect((await get('/v1/runs/latest')).body.id).toBe(`${RUN_SHARED}-2222`);
    expect((await get(`/v1/runs/${RUN_SHARED}-1/turns`)).status).toBe(200);
    expect((await get('/v1/runs/feed000')).body.error.code).toBe('INVALID_INPUT');
    const ambiguous = await get(`/v1/runs/${RUN_SHARED}`);
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error.data.candidates).toEqual([`${RUN_SHARED}-1111`, `${RUN_SHARED}-2222`]);
    for (const id of ['beefcafe', 'beefcafe-only-other', `${RUN_SHARED}-3`]) {
      const answer = await get(`/v1/runs/${id}`);
      expect(answer.status, id).toBe(404);
      expect(answer.body.error.code).toBe('NOT_FOUND');
    }
    expect((await svc.api('GET', `/v1/runs/${RUN_SHARED}-3/checkpoints`)).status).toBe(404);
  });
});
