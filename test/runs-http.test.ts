import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { busyboxImage } from './support/docker-images.js';
import { openTestService, type TestProviderName, type TestService } from './support/service.js';

/** Writes a small tree: text, an executable, random binary, a symlink, an empty directory. */
const WRITE = [
  'sh',
  '-c',
  `mkdir -p src/lib empty/inner data &&
   printf 'hello\\n' > src/hello.txt && printf 'export const x = 1;\\n' > src/lib/x.ts &&
   printf '#!/bin/sh\\necho run\\n' > run.sh && chmod 755 run.sh &&
   head -c 300000 /dev/urandom > data/big.bin && ln -s src/hello.txt link`,
];
/**
 * Every entry with type and mode, every symlink's target, then every file's SHA-256: equal
 * manifests mean equal workspaces. POSIX sh, find, stat and sort only (no `find -printf`),
 * so busybox images answer it as GNU userlands do.
 */
const MANIFEST = [
  'sh',
  '-c',
  `find . -mindepth 1 | LC_ALL=C sort | while read -r f; do stat -c '%A %n' "$f"; done &&
   find . -type l | LC_ALL=C sort | while read -r f; do echo "$f -> $(readlink "$f")"; done &&
   find . -type f | LC_ALL=C sort | while read -r f; do sha256sum "$f"; done`,
];

/** One service under test with the request helpers every case uses. */
interface Fixture {
  readonly svc: TestService;
  deploy(spec: Record<string, unknown>): Promise<string>;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  turn(runId: string, argv: string[]): Promise<any>;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  getRun(runId: string): Promise<any>;
  stepsOf(runId: string, kind: string): Promise<{ kind: string; step: string; status: string; id: number }[]>;
}

/** Opens a service on `backend` and `provider` for the enclosing describe; closes it after. */
function useService(backend: BackendCase, provider: TestProviderName): () => Fixture {
  let fixture: Fixture | undefined;
  beforeAll(async () => {
    const svc = await openTestService(backend, { provider, scopePrefix: 'runs-http' });
    fixture = {
      svc,
      async deploy(spec) {
        const answer = await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase, ...spec });
        expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
        return answer.body.id as string;
      },
      async turn(runId, argv) {
        const answer = await svc.api('POST', `/v1/runs/${runId}/turns`, { argv });
        expect(answer.status, JSON.stringify(answer.body)).toBe(200);
        expect(answer.body.exit.code, answer.body.stderr).toBe(0);
        return answer.body;
      },
      getRun: async (runId) => (await svc.api('GET', `/v1/runs/${runId}`)).body,
      stepsOf: async (runId, kind) =>
        (
          (await svc.api('GET', `/v1/runs/${runId}/events`)).body.events as { kind: string; step: string; status: string; id: number }[]
        ).filter((e) => e.kind === kind),
    };
  });
  afterAll(() => fixture?.svc.close());
  return () => {
    if (fixture === undefined) throw new Error('the test service did not open (see beforeAll)');
    return fixture;
  };
}

/**
 * The cases issue 11 requires on every provider: a turn, a sandbox destroyed behind Holdfast's
 * back and recovered by the next turn, and upgrades through a channel.
 */
function lifecycleCases(fixture: () => Fixture): void {
  it('a turn completes with a ready head checkpoint; a sandbox destroyed behind our back is rebuilt byte-equal by the next turn', async () => {
    const { svc, deploy, turn, getRun, stepsOf } = fixture();
    const deploymentId = await deploy({ setup: [['sh', '-c', 'echo setup-ran > /home/agent/setup.txt']] });
    const created = await svc.api('POST', '/v1/runs', { deploymentId });
    expect(created.status).toBe(201);
    const runId = created.body.id as string;

    const first = await turn(runId, WRITE);
    expect(first.turn).toMatchObject({ status: 'completed', seq: 1, checkpointId: first.checkpoint.id });
    expect(first.checkpoint.status).toBe('ready');
    const workspace = await svc.hf.meta.workspaces.get(created.body.workspaceId);
    expect(workspace.headCheckpointId).toBe(first.checkpoint.id);

    const before = (await turn(runId, MANIFEST)).stdout as string;
    expect(before).toContain('data/big.bin');
    const lost = (await getRun(runId)).sandbox.id as string;
    await svc.outside.destroy(lost);

    const recovered = await turn(runId, ['sh', '-c', `${MANIFEST[2]} && cat /home/agent/setup.txt >&2`]);
    expect(recovered.stdout).toBe(before);
    expect(recovered.stderr).toBe('setup-ran\n');
    const run = await getRun(runId);
    expect(run.sandbox.id).not.toBe(lost);
    const steps = await stepsOf(runId, 'recovery');
    expect(steps.map((s) => `${s.step}:${s.status}`)).toEqual([
      'detect_missing:ok',
      'create_sandbox:ok',
      'restore:ok',
      'setup:ok',
      'validate:ok',
      'commit:ok',
    ]);
  });

  it('a new deployment on the channel moves the run before its next turn; a failing one leaves it on the old sandbox until a retry works', async () => {
    const { svc, deploy, turn, getRun, stepsOf } = fixture();
    const setupWriting = (name: string) => ['sh', '-c', `echo ${name} > /home/agent/deployment`];
    const v1 = await deploy({ setup: [setupWriting('v1')] });
    expect((await svc.api('PUT', '/v1/channels/main', { deploymentId: v1 })).body.version).toBe(1);
    const runId = (await svc.api('POST', '/v1/runs', { channel: 'main' })).body.id as string;
    await turn(runId, WRITE);
    const manifest = (await turn(runId, MANIFEST)).stdout as string;
    const s1 = (await getRun(runId)).sandbox.id as string;

    const v2 = await deploy({ setup: [setupWriting('v2')] });
    await svc.api('PUT', '/v1/channels/main', { deploymentId: v2 });
    const moved = await turn(runId, ['sh', '-c', `cat /home/agent/deployment && ${MANIFEST[2]}`]);
    expect(moved.stdout).toBe(`v2\n${manifest}`);
    const onV2 = await getRun(runId);
    expect(onV2).toMatchObject({ deploymentId: v2 });
    expect(onV2.sandbox.id).not.toBe(s1);
    expect(await svc.outside.get(s1)).toBeUndefined();
    const upgrade = await stepsOf(runId, 'upgrade');
    expect(upgrade.map((s) => s.step)).toEqual(['save', 'create_sandbox', 'restore', 'setup', 'validate', 'commit', 'destroy_old_sandbox']);
    expect(upgrade.every((s) => s.status === 'ok')).toBe(true);

    // v3's setup fails until the workspace holds ready-v3: the run stays on v2 and keeps working.
    const v3 = await deploy({ setup: [['sh', '-c', 'test -f /workspace/ready-v3 && echo v3 > /home/agent/deployment']] });
    await svc.api('PUT', '/v1/channels/main', { deploymentId: v3 });
    const stayed = await turn(runId, ['sh', '-c', 'cat /home/agent/deployment && touch ready-v3']);
    expect(stayed.stdout).toBe('v2\n');
    const afterFailure = await getRun(runId);
    expect(afterFailure).toMatchObject({ deploymentId: v2, sandbox: { id: onV2.sandbox.id } });
    const failed = (await stepsOf(runId, 'upgrade')).slice(upgrade.length);
    expect(failed.map((s) => `${s.step}:${s.status}`)).toEqual([
      'save:ok',
      'create_sandbox:ok',
      'restore:ok',
      'setup:failed',
      'discard_sandbox:ok',
      'abandoned:failed',
    ]);
    expect((await svc.outside.list()).filter((s) => s.labels['holdfast.run'] === runId).map((s) => s.id)).toEqual([onV2.sandbox.id]);

    const retried = await turn(runId, ['cat', '/home/agent/deployment']);
    expect(retried.stdout).toBe('v3\n');
    expect(await getRun(runId)).toMatchObject({ deploymentId: v3 });

    // A manual deployment waits until asked.
    const v4 = await deploy({ setup: [setupWriting('v4')], workspaceUpgradePolicy: 'manual' });
    await svc.api('PUT', '/v1/channels/main', { deploymentId: v4 });
    expect((await turn(runId, ['cat', '/home/agent/deployment'])).stdout).toBe('v3\n');
    const asked = await svc.api('POST', `/v1/runs/${runId}/upgrade`, {});
    expect(asked.status, JSON.stringify(asked.body)).toBe(200);
    expect(asked.body.deploymentId).toBe(v4);
    expect((await turn(runId, ['cat', '/home/agent/deployment'])).stdout).toBe('v4\n');
  });
}

describe.each(BACKENDS)('runs over HTTP with bwrap sandboxes: $name', (backend) => {
  const fixture = useService(backend, 'bwrap');
  lifecycleCases(fixture);

  it('POST /v1/runs/:id/end saves what the sandbox holds (a final checkpoint), then destroys the sandbox; keepSandbox leaves it running', async () => {
    const { svc, deploy, turn, getRun, stepsOf } = fixture();
    const deploymentId = await deploy({});
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const first = await turn(run.id, WRITE);
    const sandboxId = (await getRun(run.id)).sandbox.id as string;
    // Something in the sandbox wrote after the last turn's checkpoint: ending must not lose it.
    const live = await svc.outside.get(sandboxId);
    expect((await live?.run(['sh', '-c', 'printf late > late.txt']))?.code).toBe(0);

    const ended = await svc.api('POST', `/v1/runs/${run.id}/end`);
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(ended.body).toMatchObject({ id: run.id, sandbox: null });
    expect(ended.body.endedAt).not.toBeNull();
    expect(await svc.outside.get(sandboxId)).toBeUndefined();
    const head = (await svc.hf.meta.workspaces.get(run.workspaceId)).headCheckpointId as string;
    expect(head).not.toBe(first.checkpoint.id);
    expect((await svc.hf.meta.checkpoints.get(head)).reason).toBe('final');
    const file = await svc.app.request(`/v1/checkpoints/${head}/file?path=late.txt`, { headers: { authorization: `Bearer ${svc.token}` } });
    expect(Buffer.from(await file.arrayBuffer()).toString()).toBe('late');
    expect((await stepsOf(run.id, 'end')).map((e) => `${e.step}:${e.status}`)).toEqual(['save:ok', 'destroy_sandbox:ok']);
    // Idempotent: a second end answers the first end.
    const again = await svc.api('POST', `/v1/runs/${run.id}/end`);
    expect(again.body.endedAt).toBe(ended.body.endedAt);

    const kept = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    await turn(kept.id, ['sh', '-c', 'echo kept > kept.txt']);
    const keptSandbox = (await getRun(kept.id)).sandbox.id as string;
    const endKept = await svc.api('POST', `/v1/runs/${kept.id}/end`, { keepSandbox: true });
    expect(endKept.status).toBe(200);
    expect(endKept.body.endedAt).not.toBeNull();
    expect((await svc.outside.get(keptSandbox))?.id).toBe(keptSandbox);
    expect((await svc.api('POST', `/v1/runs/${kept.id}/end`, { keepSandbox: 'yes' })).status).toBe(400);
    await svc.outside.destroy(keptSandbox);
  });

  it('blob-store faults during the turn checkpoint fail the turn with the store error, keep the head, and the next turn works', async () => {
    const { svc, deploy, turn } = fixture();
    const deploymentId = await deploy({});
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const good = await turn(run.id, WRITE);
    const remove = svc.faults.inject({ ops: ['put'], times: Number.POSITIVE_INFINITY, fault: { kind: 'error' } });
    let failed: Awaited<ReturnType<TestService['api']>>;
    try {
      failed = await svc.api('POST', `/v1/runs/${run.id}/turns`, { argv: ['sh', '-c', 'head -c 200000 /dev/urandom > new.bin'] });
    } finally {
      remove();
    }
    expect(failed.status).toBe(503);
    expect(failed.body.error.code).toBe('STORE_UNAVAILABLE');
    expect((await svc.hf.meta.workspaces.get(run.workspaceId)).headCheckpointId).toBe(good.checkpoint.id);
    const [latest] = (await svc.api('GET', `/v1/runs/${run.id}/checkpoints`)).body.checkpoints;
    expect(latest).toMatchObject({ status: 'failed', error: { code: 'STORE_UNAVAILABLE' } });
    const [failedTurn] = (await svc.api('GET', `/v1/runs/${run.id}/turns`)).body.turns;
    expect(failedTurn).toMatchObject({ status: 'failed', error: { code: 'STORE_UNAVAILABLE' } });

    const next = await turn(run.id, ['sh', '-c', 'sha256sum new.bin']);
    expect(next.turn.status).toBe('completed');
    expect((await svc.hf.meta.workspaces.get(run.workspaceId)).headCheckpointId).toBe(next.checkpoint.id);
    const listing = await svc.api('GET', `/v1/checkpoints/${next.checkpoint.id}/tree?path=`);
    expect(listing.body.entries.map((e: { name: string }) => e.name)).toContain('new.bin');
    const file = await svc.app.request(`/v1/checkpoints/${next.checkpoint.id}/file?path=src/hello.txt`, {
      headers: { authorization: `Bearer ${svc.token}` },
    });
    expect(file.status).toBe(200);
    expect(Buffer.from(await file.arrayBuffer()).toString()).toBe('hello\n');
  });

  it('tokens: none or a wrong one is 401; another tenant sees 404 for our run; only admins create tokens', async () => {
    const { svc, deploy } = fixture();
    const deploymentId = await deploy({});
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const missing = await svc.api('GET', `/v1/runs/${run.id}`, undefined, null);
    expect(missing.status).toBe(401);
    expect(missing.body.error.code).toBe('UNAUTHORIZED');
    expect((await svc.api('GET', `/v1/runs/${run.id}`, undefined, `${svc.token}x`)).status).toBe(401);
    expect((await svc.api('POST', '/v1/tokens', { tenant: 'other', name: 'x' })).status).toBe(403);
    const other = await svc.api('POST', '/v1/tokens', { tenant: 'other', name: 'x' }, svc.adminToken);
    expect(other.status).toBe(201);
    const theirs = await svc.api('GET', `/v1/runs/${run.id}`, undefined, other.body.token);
    expect(theirs.status).toBe(404);
    expect(theirs.body.error.code).toBe('NOT_FOUND');
    expect((await svc.api('POST', `/v1/runs/${run.id}/turns`, { argv: ['true'] }, other.body.token)).status).toBe(404);
    expect((await svc.api('GET', `/v1/deployments/${deploymentId}`, undefined, other.body.token)).status).toBe(404);
    expect((await svc.api('GET', '/v1/runs', undefined, other.body.token)).body.runs).toEqual([]);
    // Public routes.
    expect((await svc.api('GET', '/healthz', undefined, null)).status).toBe(200);
    expect((await svc.api('GET', '/readyz', undefined, null)).status).toBe(200);
    const openapi = await svc.api('GET', '/v1/openapi.json', undefined, null);
    expect(Object.keys(openapi.body.paths)).toContain('/v1/runs/{id}/turns');
    const metrics = await svc.api('GET', '/metrics', undefined, null);
    expect(metrics.body).toMatch(/^holdfast_turns_total\{outcome="completed"\} \d+$/m);
  });

  it('bad input is a 400 with INVALID_INPUT; credentials in a deployment are refused', async () => {
    const { svc } = fixture();
    const bad = await svc.api('POST', '/v1/deployments', { provider: 'bwrap', setup: 'npm ci' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_INPUT');
    const secret = await svc.api('POST', '/v1/deployments', {
      provider: 'bwrap',
      env: { GH: `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}` },
    });
    expect(secret.status).toBe(422);
    expect(secret.body.error.code).toBe('SECRET_EXCLUDED');
    expect((await svc.api('POST', '/v1/runs', { channel: 'nope' })).body.error.code).toBe('NOT_FOUND');
  });

  it('Idempotency-Key: a retried turn is answered from its receipt, not run twice; the same key for another request is refused', async () => {
    const { svc, deploy, turn } = fixture();
    const deploymentId = await deploy({});
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    const send = (argv: string[], key: string) =>
      svc.app.request(`/v1/runs/${run.id}/turns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ argv }),
      });
    const key = `turn-${run.id}`;
    const first = await send(['sh', '-c', 'echo x >> count.txt'], key);
    expect(first.status).toBe(200);
    const firstBody = await first.json();
    const again = await send(['sh', '-c', 'echo x >> count.txt'], key);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(firstBody);
    expect((await svc.api('GET', `/v1/runs/${run.id}/turns`)).body.turns).toHaveLength(1);
    const other = await send(['true'], key);
    expect(other.status).toBe(400);
    expect(((await other.json()) as { error: unknown }).error).toMatchObject({
      code: 'INVALID_INPUT',
      data: { reason: 'idempotency_key_reused' },
    });
    const count = await turn(run.id, ['cat', 'count.txt']);
    expect(count.stdout).toBe('x\n');
  });
});

/** Docker on the first backend pair: the provider, not the stores, is what differs. */
describe(`runs over HTTP with docker sandboxes (Node image): ${(BACKENDS[0] as BackendCase).name}`, () => {
  const fixture = useService(BACKENDS[0] as BackendCase, 'docker');
  lifecycleCases(fixture);

  it('a busybox-only image (shell route, whole-second touch): a destroyed sandbox is recovered, and the precision lost is in the run events', async () => {
    const { svc, deploy, turn, getRun } = fixture();
    const deploymentId = await deploy({ image: busyboxImage() });
    const run = (await svc.api('POST', '/v1/runs', { deploymentId })).body;
    await turn(run.id, ['sh', '-c', 'echo hi > a.txt && mkdir d && echo there > d/b.txt && chmod 751 d && ln -s a.txt l']);
    await svc.outside.destroy((await getRun(run.id)).sandbox.id as string);

    const second = await turn(run.id, ['sh', '-c', 'cat a.txt d/b.txt && readlink l && stat -c %a d']);
    expect(second.stdout).toBe('hi\nthere\na.txt\n751\n');
    const events = (await svc.api('GET', `/v1/runs/${run.id}/events`)).body.events as {
      kind: string;
      step: string;
      status: string;
      data: Record<string, unknown> | null;
    }[];
    const restore = events.find((e) => e.kind === 'recovery' && e.step === 'restore');
    expect(restore).toMatchObject({ status: 'ok', data: { mtimePrecisionMs: 1000 } });
    expect(restore?.data?.mtimesRounded).toBeGreaterThanOrEqual(1);
  }, 180_000);
});
