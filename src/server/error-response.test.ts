import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERROR_CODES, HoldfastError, NotFoundError, StoreError } from '../errors.js';
import type { AppEnv } from './app-env.js';
import { BEARER_CHALLENGE, errorBody, errorHandler, INTERNAL_MESSAGE, notFoundHandler, statusForCode } from './error-response.js';
import { createJsonLogger } from './logger.js';

function appWith(thrown: unknown, lines: string[] = []): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.onError(errorHandler(createJsonLogger({ write: (line) => lines.push(line), level: 'debug' })));
  app.notFound(notFoundHandler);
  app.get('/boom', () => {
    throw thrown;
  });
  return app;
}

describe('statusForCode', () => {
  it('maps every code to an HTTP error status', () => {
    for (const code of ERROR_CODES) {
      const status = statusForCode(code);
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(600);
    }
    expect(statusForCode('NOT_FOUND')).toBe(404);
    expect(statusForCode('STALE_LEASE')).toBe(409);
    expect(statusForCode('LIMIT_EXCEEDED')).toBe(413);
    expect(statusForCode('SECRET_EXCLUDED')).toBe(422);
    expect(statusForCode('STORE_UNAVAILABLE')).toBe(503);
    expect(statusForCode('TIMEOUT')).toBe(504);
    expect(statusForCode('CANCELLED')).toBe(409);
    expect(statusForCode('INTERRUPTED')).toBe(503);
    expect(statusForCode('INTEGRITY')).toBe(500);
  });
});

describe('errorBody', () => {
  it('keeps a HoldfastError code, message and data', () => {
    const error = new HoldfastError('CONFLICT', 'lease held', { data: { runId: 'r1' } });
    expect(errorBody(error)).toEqual({ status: 409, body: { error: { code: 'CONFLICT', message: 'lease held', data: { runId: 'r1' } } } });
  });

  it('hides the message of unknown errors', () => {
    const { status, body } = errorBody(new Error('password=hunter2 at /srv/secret'));
    expect(status).toBe(500);
    expect(body.error.code).toBe('INTERNAL');
    expect(body.error.message).toBe(INTERNAL_MESSAGE);
    expect(JSON.stringify(body)).not.toContain('hunter2');
    expect(errorBody('a string').status).toBe(500);
  });

  it('turns zod errors into INVALID_INPUT with the issue paths', () => {
    const result = z.object({ name: z.string(), tags: z.array(z.string()) }).safeParse({ tags: ['a', 3] });
    const { status, body } = errorBody(result.error);
    expect(status).toBe(400);
    expect(body.error.code).toBe('INVALID_INPUT');
    const issues = (body.error.data as { issues: Array<{ path: unknown[]; code: string }> }).issues;
    expect(issues.map((issue) => issue.path)).toEqual([['name'], ['tags', 1]]);
    expect(issues.every((issue) => issue.code === 'invalid_type')).toBe(true);
  });

  it('names the first bad field as data.field, list indexes in brackets and an unknown key included', () => {
    const schema = z.strictObject({ setup: z.array(z.array(z.string())), limits: z.strictObject({ pids: z.number() }).optional() });
    const field = (input: unknown) => (errorBody(schema.safeParse(input).error).body.error.data as { field: string }).field;
    expect(field({ setup: [['a'], ['b', 'c', 3]] })).toBe('setup[1][2]');
    expect(field({ setup: [], limits: { pids: 1, disk: 2 } })).toBe('limits.disk');
    expect(field({ setup: 'x' })).toBe('setup');
  });

  it('keeps the status of a Hono HTTPException', () => {
    expect(errorBody(new HTTPException(400, { message: 'Malformed JSON' }))).toMatchObject({
      status: 400,
      body: { error: { code: 'INVALID_INPUT' } },
    });
    expect(errorBody(new HTTPException(413)).body.error.code).toBe('LIMIT_EXCEEDED');
    expect(errorBody(new HTTPException(502, { message: 'upstream secret' })).body.error).toEqual({
      code: 'INTERNAL',
      message: INTERNAL_MESSAGE,
    });
  });
});

describe('errorHandler', () => {
  it('answers with the mapped status and JSON body', async () => {
    const res = await appWith(new NotFoundError('no run r1', { data: { runId: 'r1' } })).request('/boom');
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'no run r1', data: { runId: 'r1' } } });
  });

  it('adds a bearer challenge to 401 answers only', async () => {
    const res = await appWith(new HoldfastError('UNAUTHORIZED', 'no token')).request('/boom');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(BEARER_CHALLENGE);
    const forbidden = await appWith(new HoldfastError('FORBIDDEN', 'not yours')).request('/boom');
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('www-authenticate')).toBeNull();
  });

  it('logs unknown errors at error level with their stack', async () => {
    const lines: string[] = [];
    const res = await appWith(new TypeError('x is undefined'), lines).request('/boom');
    expect(res.status).toBe(500);
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] ?? '{}');
    expect(line.level).toBe('error');
    expect(line.error.name).toBe('TypeError');
    expect(typeof line.error.stack).toBe('string');
    expect(line.path).toBe('/boom');
  });

  it('logs expected server-side failures at warn and client errors not at all', async () => {
    const lines: string[] = [];
    await appWith(new StoreError('[s3] down', { transient: true }), lines).request('/boom');
    await appWith(new HoldfastError('INVALID_INPUT', 'bad'), lines).request('/boom');
    expect(lines.map((line) => JSON.parse(line).level)).toEqual(['warn']);
  });
});

describe('notFoundHandler', () => {
  it('answers 404 NOT_FOUND for unknown routes', async () => {
    const res = await appWith(new Error('unused')).request('/nope', { method: 'DELETE' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
  });
});
