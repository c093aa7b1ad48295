import { createHash, randomBytes } from 'node:crypto';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { HoldfastError } from '../errors.js';
import { PRINCIPAL_KINDS } from '../tenants/folder-access.js';
import { generateToken, hashToken } from '../tenants/tokens.js';
import type { AppEnv } from './app-env.js';
import { bearerAuth, MAX_AUTHORIZATION_HEADER_CHARS, type Principal } from './auth.js';
import { errorHandler } from './error-response.js';
import { silentLogger } from './logger.js';

const PRINCIPAL: Principal = { kind: 'service', tokenId: 'tok1', tenantId: 'ten1', tenantName: 'acme', admin: false };

function app(tokens: ReadonlyMap<string, Principal>) {
  const seen: string[] = [];
  const hono = new Hono<AppEnv>();
  hono.onError(errorHandler(silentLogger));
  hono.use(
    '/v1/*',
    bearerAuth(async (tokenHash) => {
      seen.push(tokenHash);
      return tokens.get(tokenHash);
    }),
  );
  hono.get('/v1/me', (c) => c.json(c.get('principal')));
  return { hono, seen };
}

async function codeOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code;
}

describe('generateToken / hashToken', () => {
  it('generates distinct holdfast_ tokens: 43 random base62 characters and a 6-character checksum', () => {
    const a = generateToken();
    expect(a).toMatch(/^holdfast_[0-9A-Za-z]{49}$/);
    expect(generateToken()).not.toBe(a);
  });

  it('hashes to lowercase SHA-256 hex', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashToken('hf_x')).toBe(createHash('sha256').update('hf_x').digest('hex'));
  });
});

describe('bearerAuth', () => {
  const token = generateToken();
  const tokens = new Map([[hashToken(token), PRINCIPAL]]);

  it('accepts a known token with a case-insensitive scheme and sets the principal', async () => {
    const { hono, seen } = app(tokens);
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const res = await hono.request('/v1/me', { headers: { Authorization: `${scheme} ${token}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(PRINCIPAL);
    }
    expect(seen).toEqual([hashToken(token), hashToken(token), hashToken(token)]);
  });

  it('answers 401 UNAUTHORIZED with a challenge for missing, malformed, oversized or unknown tokens', async () => {
    const { hono, seen } = app(tokens);
    const headers: Array<Record<string, string>> = [
      {},
      { Authorization: '' },
      { Authorization: `Basic ${token}` },
      { Authorization: 'Bearer' },
      { Authorization: `Bearer ${token} extra` },
      { Authorization: `Bearer ${'a'.repeat(MAX_AUTHORIZATION_HEADER_CHARS)}` },
      { Authorization: `Bearer ${generateToken()}` },
    ];
    for (const h of headers) {
      const res = await hono.request('/v1/me', { headers: h });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="holdfast"');
      expect(await codeOf(res)).toBe('UNAUTHORIZED');
    }
    // Only the well-formed unknown token reached the lookup.
    expect(seen).toHaveLength(1);
  });

  it('accepts a token of the format before holdfast_ (hf_ + 43 base64url): only its hash is compared', async () => {
    const legacy = `h${'f'}_${randomBytes(32).toString('base64url')}`;
    const { hono, seen } = app(new Map([[hashToken(legacy), PRINCIPAL]]));
    const res = await hono.request('/v1/me', { headers: { Authorization: `Bearer ${legacy}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(PRINCIPAL);
    expect(seen).toEqual([hashToken(legacy)]);
  });

  it('passes lookup failures through instead of answering 401', async () => {
    const hono = new Hono<AppEnv>();
    hono.onError(errorHandler(silentLogger));
    hono.use(
      '*',
      bearerAuth(async () => {
        throw new HoldfastError('STORE_UNAVAILABLE', 'metadata down');
      }),
    );
    hono.get('/x', (c) => c.text('ok'));
    const res = await hono.request('/x', { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(503);
    expect(await codeOf(res)).toBe('STORE_UNAVAILABLE');
  });

  it('serves only service tokens by default: a user or run token is 404 NOT_FOUND; routes that ask for every kind accept them', async () => {
    const user: Principal = {
      kind: 'user',
      tokenId: 'tok2',
      tenantId: 'ten1',
      tenantName: 'acme',
      userId: 'ada',
      userName: 'ada',
      role: 'member',
    };
    const run: Principal = { kind: 'run', tokenId: 'tok3', tenantId: 'ten1', tenantName: 'acme', runId: 'r1', bindings: { task: 't1' } };
    const [userToken, runToken] = [generateToken(), generateToken()];
    const known = new Map<string, Principal>([
      [hashToken(token), PRINCIPAL],
      [hashToken(userToken), user],
      [hashToken(runToken), run],
    ]);
    const { hono } = app(known);
    hono.use(
      '/api/*',
      bearerAuth(async (hash) => known.get(hash), { kinds: PRINCIPAL_KINDS }),
    );
    hono.get('/api/me', (c) => c.json(c.get('principal')));
    for (const [bearer, principal] of [
      [userToken, user],
      [runToken, run],
    ] as const) {
      const refused = await hono.request('/v1/me', { headers: { Authorization: `Bearer ${bearer}` } });
      expect([refused.status, await codeOf(refused)]).toEqual([404, 'NOT_FOUND']);
      const served = await hono.request('/api/me', { headers: { Authorization: `Bearer ${bearer}` } });
      expect(await served.json()).toEqual(principal);
    }
    expect((await hono.request('/v1/me', { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
  });
});
