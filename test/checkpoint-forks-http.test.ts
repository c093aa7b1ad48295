import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** A GitHub token shape the built-in secret rules recognise (never a real token). */
const GITHUB_TOKEN = `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`;

describe('checkpoint labels, forks and restore by id over HTTP (local-disk + sqlite, bwrap)', () => {
  let svc: TestService;
  let deploymentId = '';

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as BackendCase, { scopePrefix: 'forks-http' });
    const deployed = await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase });
    expect(deployed.status, JSON.stringify(deployed.body)).toBe(201);
    deploymentId = deployed.body.id;
  });
  afterAll(() => svc?.close());

  it("a turn's checkpoint takes a label and meta; a fork starts a new run from it with the same files and no byte copied", async () => {
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const turn = await svc.api('POST', `/v1/runs/${run.id}/turns`, {
      argv: ['sh', '-c', 'echo forked-data > f.txt'],
      checkpoint: { label: 'wrote f', meta: { thread: 'th-1', n: 1 } },
    });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body.checkpoint).toMatchObject({ label: 'wrote f', meta: { thread: 'th-1', n: 1 }, forkedFrom: null });
    const source = turn.body.checkpoint;
    const packs = (await svc.hf.meta.objects.listPacks()).length;

    const fork = await svc.api('POST', '/v1/runs', { fromCheckpoint: source.id.slice(0, 10), meta: { origin: 'fork' } });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect(fork.body.deploymentId).toBe(deploymentId);
    expect(fork.body.checkpoint).toMatchObject({ rootTree: source.rootTree, forkedFrom: source.id, meta: { origin: 'fork' } });
    expect((await svc.hf.meta.objects.listPacks()).length).toBe(packs);
    const read = await svc.api('POST', `/v1/runs/${fork.body.id}/turns`, { argv: ['cat', 'f.txt'] });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.stdout).toBe('forked-data\n');
    // The source run is untouched by its fork's turns.
    const log = (await svc.api('GET', `/v1/runs/${run.id}/checkpoints`)).body.checkpoints;
    expect(log.map((c: { id: string }) => c.id)).toEqual([source.id]);

    const restored = await svc.api('POST', `/v1/checkpoints/${source.id}/restore`);
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    expect(restored.body.checkpointId).toBe(source.id);
    await svc.provider.destroy(restored.body.sandbox.id);
  }, 240_000);

  it('attack: another tenant can neither fork, restore nor read a checkpoint by id or prefix; each is 404 and creates nothing', async () => {
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const turn = await svc.api('POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo private > p.txt'] });
    const checkpointId = turn.body.checkpoint.id as string;
    const other = (await svc.api('POST', '/v1/tokens', { tenant: 'intruder', name: 'x' }, svc.adminToken)).body.token as string;
    for (const id of [checkpointId, checkpointId.slice(0, 10), 'latest']) {
      const fork = await svc.api('POST', '/v1/runs', { fromCheckpoint: id, deploymentId }, other);
      expect(fork.status, id).toBe(404);
      expect(fork.body.error.code).toBe('NOT_FOUND');
      const restore = await svc.api('POST', `/v1/checkpoints/${id}/restore`, undefined, other);
      expect(restore.status, id).toBe(404);
      expect(restore.body.error.code).toBe('NOT_FOUND');
    }
    expect((await svc.api('GET', '/v1/runs', undefined, other)).body.runs).toEqual([]);
  }, 240_000);

  it('attack: credentials, oversized and nested metadata are refused before the turn runs; the head stays', async () => {
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const bodies: Array<[number, string, unknown]> = [
      [422, 'SECRET_EXCLUDED', { label: `deploy with ${GITHUB_TOKEN}` }],
      [422, 'SECRET_EXCLUDED', { meta: { token: GITHUB_TOKEN } }],
      [413, 'LIMIT_EXCEEDED', { meta: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'v'.repeat(120)])) }],
      [400, 'INVALID_INPUT', { meta: { nested: { a: 1 } } }],
      [400, 'INVALID_INPUT', { label: 'x'.repeat(201) }],
      [400, 'INVALID_INPUT', { label: 'line\nbreak' }],
    ];
    for (const [status, code, checkpoint] of bodies) {
      const turn = await svc.api('POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'echo ran >> ran.txt'], checkpoint });
      expect({ status: turn.status, code: turn.body.error?.code }, JSON.stringify(checkpoint).slice(0, 60)).toEqual({ status, code });
      const manual = await svc.api('POST', `/v1/runs/${run.id}/checkpoints`, checkpoint);
      expect({ status: manual.status, code: manual.body.error?.code }).toEqual({ status, code });
      const fork = await svc.api('POST', '/v1/runs', { fromCheckpoint: 'latest', ...(checkpoint as object) });
      expect({ status: fork.status, code: fork.body.error?.code }).toEqual({ status, code });
    }
    expect((await svc.api('GET', `/v1/runs/${run.id}`)).body.turnCount).toBe(0);
    expect((await svc.api('GET', `/v1/runs/${run.id}/checkpoints`)).body.checkpoints).toEqual([]);
  }, 240_000);
});
