import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliStore, openCliStore, runHoldfast } from './support/serve-process.js';

/** `holdfast serve` (compiled) logs at the level `HOLDFAST_LOG_LEVEL` names, and refuses one it does not know. */
describe('serve: HOLDFAST_LOG_LEVEL', () => {
  let store: CliStore;
  beforeAll(() => {
    store = openCliStore('hf-serve-log-level-');
  });
  afterAll(() => store.cleanup());

  it('debug writes the probe requests that info leaves out, as JSON lines on stdout', async () => {
    const server = await store.serve([], { HOLDFAST_LOG_LEVEL: 'debug' });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.stop();
    }
    const records = server
      .log()
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records.find((r) => r.msg === 'request' && r.path === '/healthz')).toMatchObject({ level: 'debug', status: 200 });
    expect(records.find((r) => r.msg === 'listening')).toMatchObject({ level: 'info' });
  });

  it('an unknown level is INVALID_INPUT naming the variable, before anything listens', async () => {
    const run = await runHoldfast(['--json', 'serve', '--port', '0'], { ...store.env, HOLDFAST_LOG_LEVEL: 'loud' });
    expect(run.code).not.toBe(0);
    expect((JSON.parse(run.stderr) as { error: unknown }).error).toMatchObject({
      code: 'INVALID_INPUT',
      data: { variable: 'HOLDFAST_LOG_LEVEL', field: 'HOLDFAST_LOG_LEVEL' },
    });
  });
});
