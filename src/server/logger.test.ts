import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { holdfastToken, legacyHoldfastToken } from '../../test/support/secret-samples.js';
import type { LogThreshold } from '../config.js';
import { HoldfastError } from '../errors.js';
import { withheldMarker } from '../rules/withhold-secrets.js';
import type { AppEnv } from './app-env.js';
import { createJsonLogger, REQUEST_ID_HEADER, requestLogger, silentLogger } from './logger.js';

const EPOCH_MS = Date.UTC(2025, 0, 2, 3, 4, 5, 6);
/** The withheld marker, whichever rule matched. */
const WITHHELD = new RegExp(
  `^${withheldMarker('RULE')
    .replace(/[[\]().]/g, '\\$&')
    .replace('RULE', '[a-z0-9-]+')}$`,
);

function capture(level: 'debug' | 'info' = 'debug') {
  const lines: string[] = [];
  const log = createJsonLogger({ write: (line) => lines.push(line), level, now: () => EPOCH_MS });
  const records = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return { log, lines, records };
}

describe('createJsonLogger', () => {
  it('writes one JSON object per line: level, time, the fields, msg (no pid or host name)', () => {
    const { log, lines } = capture();
    log.info('started', { port: 8080 });
    expect(lines).toEqual(['{"level":"info","time":"2025-01-02T03:04:05.006Z","port":8080,"msg":"started"}']);
  });

  it('writes at and above its level: trace through fatal, and nothing when silent', () => {
    const write = (level: LogThreshold) => {
      const lines: string[] = [];
      const log = createJsonLogger({ write: (line) => lines.push(line), level });
      for (const method of ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const) log[method](method);
      return lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
    };
    expect(write('trace')).toEqual(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
    expect(write('warn')).toEqual(['warn', 'error', 'fatal']);
    expect(write('fatal')).toEqual(['fatal']);
    expect(write('silent')).toEqual([]);
  });

  it('withholds a token in a nested field, an Error message, an Error cause and child fields', () => {
    const { log, lines } = capture();
    const token = holdfastToken();
    const cause = new TypeError(`fetch failed for https://x-access-token:${token}@git.example.com/repo.git`);
    log.child({ requestId: 'q1', clone: { url: `https://x-access-token:${token}@git.example.com` } }).warn(`clone with ${token}`, {
      deep: { a: [{ b: { c: `Authorization: Bearer ${token}` } }] },
      error: new Error(`refused ${token}`, { cause: new Error('wrapped', { cause }) }),
    });
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(line.includes(token)).toBe(false);
    const record = JSON.parse(line) as {
      msg: string;
      requestId: string;
      deep: { a: [{ b: { c: string } }] };
      error: { name: string; message: string; stack: string; cause: { message: string; cause: { name: string; message: string } } };
    };
    expect(record.requestId).toBe('q1');
    expect(record.msg).toMatch(WITHHELD);
    expect(record.deep.a[0].b.c).toMatch(WITHHELD);
    expect(record.error.message).toMatch(WITHHELD);
    expect(record.error.stack).toMatch(WITHHELD);
    expect(record.error.cause.message).toBe('wrapped');
    expect(record.error.cause.cause).toMatchObject({ name: 'TypeError', message: expect.stringMatching(WITHHELD) });
  });

  it('drops lines below the level and keeps reserved keys', () => {
    const { log, records } = capture('info');
    log.debug('noise');
    log.warn('slow', { msg: 'overwritten?', level: 'debug', ms: 5 });
    expect(records()).toEqual([{ time: '2025-01-02T03:04:05.006Z', level: 'warn', msg: 'slow', ms: 5 }]);
  });

  it('child loggers add their fields; the line fields win', () => {
    const { log, records } = capture();
    log.child({ component: 'gc', runId: 'r0' }).child({ runId: 'r1' }).error('failed', { runId: 'r2' });
    expect(records()[0]).toMatchObject({ component: 'gc', runId: 'r2', level: 'error' });
  });

  it('serialises errors, including HoldfastError, with name, code, message and stack', () => {
    const { log, records } = capture();
    const cause = new Error('ECONNRESET');
    log.error('store failed', { error: new HoldfastError('STORE_UNAVAILABLE', 'down', { cause }), nested: { e: new RangeError('r') } });
    const record = records()[0] as { error: Record<string, unknown>; nested: { e: Record<string, unknown> } };
    expect(record.error).toMatchObject({ name: 'HoldfastError', code: 'STORE_UNAVAILABLE', message: 'down' });
    expect(typeof record.error.stack).toBe('string');
    expect(record.error.cause).toMatchObject({ name: 'Error', message: 'ECONNRESET' });
    expect(record.nested.e).toMatchObject({ name: 'RangeError', message: 'r' });
  });

  it('withholds a credential in any field, message or error, Holdfast tokens of both formats included', () => {
    const { log, lines } = capture();
    const token = holdfastToken();
    const legacy = legacyHoldfastToken();
    const cause = new Error(`upstream said: Authorization: Bearer ${legacy}`);
    log.error('unhandled error', {
      error: new HoldfastError('INTERNAL', `token ${token} refused`, { cause, data: { header: `Bearer ${token}` } }),
      path: `/v1/runs/${token}`,
      nested: [{ argv: ['holdfast', 'run', '--token', legacy] }],
    });
    expect(lines).toHaveLength(1);
    const line = lines[0] as string;
    expect(line.includes(token)).toBe(false);
    expect(line.includes(legacy)).toBe(false);
    expect(JSON.parse(line)).toMatchObject({ msg: 'unhandled error', error: { code: 'INTERNAL' } });
  });

  it('never throws on unserialisable fields', () => {
    const { log, records } = capture();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => log.info('odd', { cyclic, big: 10n })).not.toThrow();
    log.info('big', { big: 10n });
    expect(records()[0]).toMatchObject({ msg: 'odd', level: 'info' });
    expect(records()[1]).toMatchObject({ big: '10' });
  });

  it('silentLogger accepts everything', () => {
    expect(() => silentLogger.child({ a: 1 }).error('x', { error: new Error('y') })).not.toThrow();
  });
});

describe('requestLogger', () => {
  function app(log: ReturnType<typeof capture>['log']) {
    const hono = new Hono<AppEnv>();
    hono.use('*', requestLogger(log));
    hono.use('/v1/*', async (c, next) => {
      c.set('principal', { kind: 'service', tokenId: 't1', tenantId: 'ten1', tenantName: 'acme', admin: false });
      await next();
    });
    hono.get('/v1/runs/:id', (c) => c.json({ id: c.req.param('id'), requestId: c.get('requestId') }));
    hono.get('/healthz', (c) => c.text('ok'));
    return hono;
  }

  it('logs method, path, route, status, duration, request id and tenant', async () => {
    const { log, records } = capture();
    const res = await app(log).request('/v1/runs/r42?token=secret');
    const requestId = res.headers.get(REQUEST_ID_HEADER);
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(((await res.json()) as { requestId: string }).requestId).toBe(requestId);
    const [record] = records();
    expect(record).toMatchObject({ level: 'info', msg: 'request', method: 'GET', path: '/v1/runs/r42', route: '/v1/runs/:id' });
    expect(record).toMatchObject({ status: 200, requestId, tenant: 'acme', tenantId: 'ten1' });
    expect(typeof record?.durationMs).toBe('number');
  });

  it('logs no token a client put into the path of a request', async () => {
    const { log, lines, records } = capture();
    const token = holdfastToken();
    await app(log).request(`/v1/runs/${token}`);
    await app(log).request(`/v1/nowhere/${token}`);
    expect(records()).toHaveLength(2);
    for (const line of lines) expect(line.includes(token)).toBe(false);
    expect(records()[0]).toMatchObject({ msg: 'request', route: '/v1/runs/:id', status: 200 });
  });

  it('echoes a plain client request id and replaces an unsafe one', async () => {
    const { log } = capture();
    const ok = await app(log).request('/healthz', { headers: { [REQUEST_ID_HEADER]: 'abc-123' } });
    expect(ok.headers.get(REQUEST_ID_HEADER)).toBe('abc-123');
    const unsafe = await app(log).request('/healthz', { headers: { [REQUEST_ID_HEADER]: 'a b"c' } });
    expect(unsafe.headers.get(REQUEST_ID_HEADER)).not.toBe('a b"c');
  });

  it('logs probe paths at debug and unauthenticated requests without a tenant', async () => {
    const { log, records } = capture();
    await app(log).request('/healthz');
    await app(log).request('/missing');
    expect(records().map((r) => [r.level, r.status, 'tenant' in r])).toEqual([
      ['debug', 200, false],
      ['info', 404, false],
    ]);
  });
});
