import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** Rows each listing holds before paging starts, and rows per page: several pages. */
const ROWS_BEFORE = 7;
const PAGE_ROWS = 3;

/**
 * Pages through `url` (its array under `field`), calling `insert` after every page: what a
 * client sees while others keep writing. Returns every id seen, in order, duplicates kept.
 */
async function pageThrough(
  svc: TestService,
  url: string,
  field: string,
  idOf: (row: Record<string, unknown>) => string,
  insert: () => Promise<void>,
  token = svc.token,
): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const sep = url.includes('?') ? '&' : '?';
    const query = `${sep}limit=${PAGE_ROWS}${cursor === null ? '' : `&cursor=${cursor}`}`;
    const answer = await svc.api('GET', url + query, undefined, token);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const rows = answer.body[field] as Record<string, unknown>[];
    expect(rows.length).toBeLessThanOrEqual(PAGE_ROWS);
    seen.push(...rows.map(idOf));
    cursor = answer.body.nextCursor as string | null;
    if (cursor === null) return seen;
    await insert();
  }
  throw new Error(`${url} never reached its last page`);
}

/** Every row that existed before paging appears exactly once; no row (new ones included) twice. */
function expectEachOnce(seen: readonly string[], before: readonly string[]): void {
  expect(new Set(seen).size).toBe(seen.length);
  for (const id of before) expect(seen.filter((s) => s === id)).toHaveLength(1);
}

for (const backend of BACKENDS) {
  describe(`keyset pages of the v1 lists under concurrent inserts (${backend.name})`, () => {
    let svc: TestService;
    let deploymentId: string;
    let created = 0;
    const deploy = async (): Promise<string> => {
      const answer = await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase, env: { N: String(created++) } });
      expect(answer.status).toBe(201);
      return answer.body.id as string;
    };
    const newRun = async (): Promise<{ id: string; workspaceId: string }> => {
      const answer = await svc.api('POST', '/v1/runs', { deploymentId });
      expect(answer.status).toBe(201);
      return answer.body;
    };

    beforeAll(async () => {
      svc = await openTestService(backend, { scopePrefix: 'list-pages' });
      deploymentId = await deploy();
    });
    afterAll(async () => {
      await svc?.close();
    });

    it('GET /v1/runs lists every run that existed once, while runs are created between pages', async () => {
      for (let i = 0; i < ROWS_BEFORE; i++) await newRun();
      const before = ((await svc.api('GET', '/v1/runs?limit=1000')).body.runs as { id: string }[]).map((r) => r.id);
      expect(before.length).toBeGreaterThanOrEqual(ROWS_BEFORE);
      let inserted = 0;
      const seen = await pageThrough(
        svc,
        '/v1/runs',
        'runs',
        (r) => String(r.id),
        async () => {
          await newRun();
          await newRun();
          inserted += 2;
        },
      );
      expectEachOnce(seen, before);
      // Without a cursor the answer is as before (the newest runs, default page size), `nextCursor` beside it.
      const all = await svc.api('GET', '/v1/runs');
      expect(all.body.runs).toHaveLength(before.length + inserted);
      expect(all.body.nextCursor).toBeNull();
    });

    it("a run's turns and checkpoints page the same way while rows are added", async () => {
      const run = await newRun();
      const { meta } = svc.hf;
      let seq = 0;
      const addTurn = async () => {
        seq += 1;
        await meta.turns.start({ runId: run.id, seq, epoch: 1, owner: 'test' });
      };
      const addCheckpoint = async () => {
        await meta.checkpoints.createPending({ workspaceId: run.workspaceId, reason: 'manual' });
      };
      for (let i = 0; i < ROWS_BEFORE; i++) {
        await addTurn();
        await addCheckpoint();
      }
      const turnsBefore = ((await svc.api('GET', `/v1/runs/${run.id}/turns`)).body.turns as { id: string }[]).map((t) => t.id);
      const checkpointsBefore = ((await svc.api('GET', `/v1/runs/${run.id}/checkpoints`)).body.checkpoints as { id: string }[]).map(
        (c) => c.id,
      );
      expect(turnsBefore).toHaveLength(ROWS_BEFORE);
      expect(checkpointsBefore).toHaveLength(ROWS_BEFORE);
      expectEachOnce(await pageThrough(svc, `/v1/runs/${run.id}/turns`, 'turns', (t) => String(t.id), addTurn), turnsBefore);
      const checkpoints = await pageThrough(svc, `/v1/runs/${run.id}/checkpoints`, 'checkpoints', (c) => String(c.id), addCheckpoint);
      expectEachOnce(checkpoints, checkpointsBefore);
    });

    it('deployments, channels and tokens page the same way while rows are added', async () => {
      for (let i = 0; i < ROWS_BEFORE; i++) await deploy();
      const deploymentsBefore = ((await svc.api('GET', '/v1/deployments')).body.deployments as { id: string }[]).map((d) => d.id);
      expectEachOnce(
        await pageThrough(
          svc,
          '/v1/deployments',
          'deployments',
          (d) => String(d.id),
          async () => void (await deploy()),
        ),
        deploymentsBefore,
      );

      // Channel names sort around the cursor: some new ones land on a later page, some before it.
      const names = ['c-b', 'c-d', 'c-f', 'c-h', 'c-j', 'c-l', 'c-n'];
      for (const name of names) expect((await svc.api('PUT', `/v1/channels/${name}`, { deploymentId })).status).toBe(200);
      const fresh = ['c-a', 'c-e', 'c-m', 'c-z', 'c-c', 'c-k', 'c-y'];
      const publish = async () => {
        const name = fresh.shift();
        if (name !== undefined) expect((await svc.api('PUT', `/v1/channels/${name}`, { deploymentId })).status).toBe(200);
      };
      const channels = await pageThrough(svc, '/v1/channels', 'channels', (c) => String(c.name), publish);
      expectEachOnce(channels, names);
      expect(channels).toEqual([...channels].sort());

      const tokensBefore = ((await svc.api('GET', '/v1/tokens', undefined, svc.adminToken)).body.tokens as { id: string }[]).map(
        (t) => t.id,
      );
      const addToken = async () => {
        const answer = await svc.api('POST', '/v1/tokens', { tenant: 'default', name: 'paging' }, svc.adminToken);
        expect(answer.status).toBe(201);
      };
      for (let i = 0; i < ROWS_BEFORE; i++) await addToken();
      const tokensAll = ((await svc.api('GET', '/v1/tokens', undefined, svc.adminToken)).body.tokens as { id: string }[]).map((t) => t.id);
      expect(tokensAll.length).toBe(tokensBefore.length + ROWS_BEFORE);
      expectEachOnce(await pageThrough(svc, '/v1/tokens', 'tokens', (t) => String(t.id), addToken, svc.adminToken), tokensAll);
      expect((await svc.api('GET', '/v1/tokens')).status).toBe(403);
    });

    it('a cursor the listing did not hand out is 400 INVALID_INPUT on every list', async () => {
      const run = await newRun();
      const forged = [
        'not base64 !',
        Buffer.from('{"createdAt":1}').toString('base64url'),
        Buffer.from('[1.5,"x"]').toString('base64url'),
        Buffer.from('["1","x"]').toString('base64url'),
        Buffer.from('nope').toString('base64url'),
      ];
      const lists = [
        ['/v1/runs', svc.token],
        [`/v1/runs/${run.id}/turns`, svc.token],
        [`/v1/runs/${run.id}/checkpoints`, svc.token],
        ['/v1/deployments', svc.token],
        ['/v1/tokens', svc.adminToken],
      ] as const;
      for (const [url, token] of lists) {
        for (const cursor of forged) {
          const answer = await svc.api('GET', `${url}?cursor=${encodeURIComponent(cursor)}`, undefined, token);
          expect([url, cursor, answer.status, answer.body.error?.code]).toEqual([url, cursor, 400, 'INVALID_INPUT']);
        }
      }
      // A channel name is a string key: a number where it goes is refused too.
      const channel = await svc.api('GET', `/v1/channels?cursor=${Buffer.from('[7]').toString('base64url')}`);
      expect([channel.status, channel.body.error.code]).toEqual([400, 'INVALID_INPUT']);
      expect((await svc.api('GET', '/v1/runs?limit=0')).status).toBe(400);
    });
  });
}
