/**
 * What a real `holdfast serve` (the compiled CLI, bwrap sandboxes) records when a turn does not
 * finish because the server shuts down, and when an automatic upgrade cannot provision its
 * new sandbox: the turn fails with `INTERRUPTED` and its client hears so, the run's events say
 * why, and the next turn starts from the last ready checkpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBwrapInstalled } from './support/sandbox-processes.js';
import { type CliStore, openCliStore, type ServeProcess } from './support/serve-process.js';

/** The shutdown deadline the server under test runs with: short, so the turn outlives it. */
const SHUTDOWN_DEADLINE_MS = 1500;
/** How long the interrupted turn's command would run: far past the deadline. */
const LONG_TURN_SECONDS = 100;
/** Bound on waiting for the long turn to start running. */
const TURN_START_WAIT_MS = 30_000;

// biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
type Json = any;

describe('holdfast serve: turns cut by shutdown, upgrades that cannot provision', () => {
  let store: CliStore;
  let token: string;
  const servers: ServeProcess[] = [];

  const call = async (server: ServeProcess, method: string, url: string, body?: unknown): Promise<{ status: number; body: Json }> => {
    const response = await fetch(`${server.url}${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: JSON.parse(await response.text()) };
  };
  const ok = async (server: ServeProcess, method: string, url: string, body?: unknown): Promise<Json> => {
    const answer = await call(server, method, url, body);
    expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
    return answer.body;
  };
  const serve = async (): Promise<ServeProcess> => {
    const server = await store.serve(['--shutdown-deadline-ms', String(SHUTDOWN_DEADLINE_MS)]);
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    expectBwrapInstalled();
    store = openCliStore('hf-serve-shutdown-');
    token = (await store.holdfast(['token', 'create', '--name', 'shutdown-test'])).trim();
  }, 60_000);
  afterAll(async () => {
    for (const server of servers) await server.stop();
    store?.cleanup();
  });

  it('SIGTERM during a long turn: the turn fails INTERRUPTED (503 to its client), its events say the server shut down, and the next turn starts from the last ready checkpoint', async () => {
    const first = await serve();
    const deployment = await ok(first, 'POST', '/v1/deployments', { provider: 'bwrap' });
    const runId = (await ok(first, 'POST', '/v1/runs', { deploymentId: deployment.id })).id as string;
    const done = await ok(first, 'POST', `/v1/runs/${runId}/turns`, { argv: ['sh', '-c', 'echo one > one.txt'] });
    expect(done.turn.status).toBe('completed');

    const long = call(first, 'POST', `/v1/runs/${runId}/turns`, {
      argv: ['sh', '-c', `echo two > two.txt && touch started && sleep ${LONG_TURN_SECONDS}`],
    });
    const waitUntil = Date.now() + TURN_START_WAIT_MS;
    for (;;) {
      const turns = (await ok(first, 'GET', `/v1/runs/${runId}/turns`)).turns as Json[];
      if (turns.length === 2 && turns[0].status === 'running') break;
      if (Date.now() > waitUntil) throw new Error(`the long turn never started: ${JSON.stringify(turns)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // The command has had time to write two.txt before the signal.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const stopped = first.stop();
    const answer = await long;
    await stopped;
    expect(answer.status, JSON.stringify(answer.body)).toBe(503);
    expect(answer.body.error.code).toBe('INTERRUPTED');
    expect(answer.body.error.data).toMatchObject({ reason: 'shutdown_deadline', deadlineMs: SHUTDOWN_DEADLINE_MS });

    // The sandbox goes while no server runs: the next turn must rebuild it from the head.
    const { sandbox } = await runWith(runId);
    await store.holdfast(['sandbox', 'destroy', '--provider', 'bwrap', sandbox.id]);

    const second = await serve();
    const turns = (await ok(second, 'GET', `/v1/runs/${runId}/turns`)).turns as Json[];
    expect(turns.map((t) => t.status)).toEqual(['failed', 'completed']);
    expect(turns[0].error).toMatchObject({ code: 'INTERRUPTED', data: { reason: 'shutdown_deadline', deadlineMs: SHUTDOWN_DEADLINE_MS } });
    expect(turns[0].result ?? null).toBeNull();
    const events = (await ok(second, 'GET', `/v1/runs/${runId}/events`)).events as Json[];
    const interrupted = events.filter((e) => e.kind === 'turn' && e.step === 'interrupted');
    expect(interrupted).toHaveLength(1);
    expect(interrupted[0]).toMatchObject({
      status: 'failed',
      data: { turn: turns[0].id, error: { code: 'INTERRUPTED', data: { reason: 'shutdown_deadline' } } },
    });

    // The last ready checkpoint is the interrupted turn's final save; the next turn is restored from it.
    const checkpoints = (await ok(second, 'GET', `/v1/runs/${runId}/checkpoints`)).checkpoints as Json[];
    const lastReady = checkpoints.find((c) => c.status === 'ready');
    expect(lastReady).toMatchObject({ reason: 'final' });
    const next = await ok(second, 'POST', `/v1/runs/${runId}/turns`, { argv: ['sh', '-c', 'cat one.txt two.txt && ls'] });
    expect(next.turn.status).toBe('completed');
    expect(next.stdout).toBe('one\ntwo\none.txt\nstarted\ntwo.txt\n');
    const restores = ((await ok(second, 'GET', `/v1/runs/${runId}/events`)).events as Json[]).filter(
      (e) => e.kind === 'recovery' && e.step === 'restore',
    );
    expect(restores.at(-1)).toMatchObject({ status: 'ok', data: { checkpointId: lastReady.id } });
  }, 120_000);

  it('an upgrade whose new sandbox cannot be created leaves the run on its deployment, and its events name the reason', async () => {
    const server = await serve();
    const v1 = (await ok(server, 'POST', '/v1/deployments', { provider: 'bwrap', setup: [['sh', '-c', 'echo v1 > /home/agent/v']] })).id;
    await ok(server, 'PUT', '/v1/channels/main', { deploymentId: v1 });
    const runId = (await ok(server, 'POST', '/v1/runs', { channel: 'main' })).id as string;
    await ok(server, 'POST', `/v1/runs/${runId}/turns`, { argv: ['true'] });
    // bwrap sandboxes have no images: every sandbox of v2 is refused by the provider.
    const v2 = (await ok(server, 'POST', '/v1/deployments', { provider: 'bwrap', image: 'debian:stable' })).id;
    await ok(server, 'PUT', '/v1/channels/main', { deploymentId: v2 });
    const stayed = await ok(server, 'POST', `/v1/runs/${runId}/turns`, { argv: ['cat', '/home/agent/v'] });
    expect(stayed.stdout).toBe('v1\n');
    expect((await ok(server, 'GET', `/v1/runs/${runId}`)).deploymentId).toBe(v1);
    const upgrade = ((await ok(server, 'GET', `/v1/runs/${runId}/events`)).events as Json[]).filter((e) => e.kind === 'upgrade');
    expect(upgrade.map((e) => `${e.step}:${e.status}`)).toEqual(['save:ok', 'create_sandbox:failed', 'abandoned:failed']);
    expect(upgrade.at(-1).data).toMatchObject({ from: v1, to: v2, error: { code: 'INVALID_INPUT' } });
  }, 120_000);

  /** The run as the store holds it, read with the CLI while no server runs. */
  async function runWith(runId: string): Promise<Json> {
    return JSON.parse(await store.holdfast(['--json', 'run', 'show', runId])).run;
  }
});
