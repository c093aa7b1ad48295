import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ConflictError, InputError } from '../errors.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { AppEnv } from './app-env.js';

/** Header naming a write's idempotency key. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** Header set on an answer replayed from a receipt. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** Header set on a replayed success answer whose credential fields were not kept (they read `null`). */
export const REDACTED_HEADER = 'idempotent-redacted';
/** How long a receipt (and so a key) is kept. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/** Largest response stored for replay; larger ones are not retried safely and the key is released. */
export const MAX_IDEMPOTENT_RESPONSE_BYTES = 1024 * 1024;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** Answers a retry may change (server errors, conflicts such as a busy run, rate limits): never replayed. */
const RETRYABLE = (status: number): boolean => status >= 500 || status === 408 || status === 409 || status === 425 || status === 429;

/** What the middleware needs to know about the route it guards. */
export interface IdempotentRoute {
  /**
   * Top-level fields of the route's JSON answer that carry a credential (the secret of a new
   * token). The receipt keeps them as `null`, so no credential is ever stored, and a replay
   * says so with `Idempotent-Redacted: true`.
   */
  readonly credentialFields?: readonly string[];
}

/**
 * `Idempotency-Key` on writes (POST, PUT, DELETE): the first request of a principal with a key
 * runs and its JSON answer is kept for 24 h; a retry by the same principal with the same key
 * and request gets that answer again (header `Idempotent-Replayed: true`) without running
 * anything. Keys are per principal (token): another token's request with the same key runs as
 * its own request. Mount it after the route's authorization, so a replay is only ever given to
 * a caller the route itself would serve. The same key for a different request is
 * `INVALID_INPUT`; a retry while the first is still running is `CONFLICT`. Answers a retry may
 * change (5xx, 409 such as a busy run or a stale lease, 429) release the key, so a retry runs
 * again: such a request committed nothing. Credential fields ({@link IdempotentRoute}) are
 * stored as `null`: the secret is shown once, in the first answer only.
 */
export function idempotency(meta: MetadataStore, route: IdempotentRoute = {}): MiddlewareHandler<AppEnv> {
  const redacted = (route.credentialFields?.length ?? 0) > 0;
  return async (c, next) => {
    const key = c.req.header(IDEMPOTENCY_HEADER);
    if (key === undefined || c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    if (!KEY_PATTERN.test(key)) {
      throw new InputError('INVALID_INPUT', 'Idempotency-Key must be 1-255 printable ASCII characters', {
        data: { header: IDEMPOTENCY_HEADER },
      });
    }
    const principalId = c.get('principal').tokenId;
    const requestHash = createHash('sha256')
      .update(`${c.req.method}\0${c.req.path}\0`)
      .update(await c.req.text())
      .digest('hex');
    const found = await meta.idempotency.begin({ principalId, key, requestHash, expireBeforeMs: Date.now() - IDEMPOTENCY_RETENTION_MS });
    if (found.kind === 'replay') {
      const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', [REPLAYED_HEADER]: 'true' };
      if (redacted && found.statusCode < 300) headers[REDACTED_HEADER] = 'true';
      return new Response(found.response, { status: found.statusCode, headers });
    }
    if (found.kind === 'in_progress') {
      throw new ConflictError('CONFLICT', `a request with Idempotency-Key ${key} is still running; retry after it finished`, {
        data: { reason: 'idempotency_in_progress' },
      });
    }
    if (found.kind === 'mismatch') {
      throw new InputError('INVALID_INPUT', `Idempotency-Key ${key} was already used for a different request`, {
        data: { reason: 'idempotency_key_reused' },
      });
    }
    try {
      await next();
    } catch (error) {
      await meta.idempotency.abandon(principalId, key).catch(() => undefined);
      throw error;
    }
    const body = RETRYABLE(c.res.status) ? undefined : await storable(c.res, route.credentialFields ?? []);
    if (body === undefined) await meta.idempotency.abandon(principalId, key);
    else await meta.idempotency.finish(principalId, key, c.res.status, body);
  };
}

/**
 * The answer's JSON text as a receipt keeps it (credential fields set to `null`), or
 * `undefined` when it cannot be replayed: not JSON, too large, or a credential-carrying answer
 * that is not a JSON object (so its credential could not be removed).
 */
async function storable(response: Response, credentialFields: readonly string[]): Promise<string | undefined> {
  if (!(response.headers.get('content-type') ?? '').includes('application/json')) return undefined;
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_IDEMPOTENT_RESPONSE_BYTES) return undefined;
  const text = await response.clone().text();
  if (Buffer.byteLength(text) > MAX_IDEMPOTENT_RESPONSE_BYTES) return undefined;
  return credentialFields.length === 0 ? text : redact(text, credentialFields);
}

function redact(text: string, fields: readonly string[]): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const kept: Record<string, unknown> = { ...value };
  for (const field of fields) if (field in kept) kept[field] = null;
  return JSON.stringify(kept);
}
