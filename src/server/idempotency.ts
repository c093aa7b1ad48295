import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ConflictError, InputError } from '../errors.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { AppEnv } from './app-env.js';

/** Header naming a write's idempotency key. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** Header set on an answer replayed from a receipt. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** How long a receipt (and so a key) is kept. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/** Largest response stored for replay; larger ones are not retried safely and the key is released. */
export const MAX_IDEMPOTENT_RESPONSE_BYTES = 1024 * 1024;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** Answers a retry may change (server errors, conflicts such as a busy run, rate limits): never replayed. */
const RETRYABLE = (status: number): boolean => status >= 500 || status === 408 || status === 409 || status === 425 || status === 429;

/**
 * `Idempotency-Key` on writes (POST, PUT, DELETE): the first request with a key runs and its
 * JSON answer is kept for 24 h; a retry with the same key and the same request gets that answer
 * again (header `Idempotent-Replayed: true`) without running anything. The same key for a
 * different request is `INVALID_INPUT`; a retry while the first is still running is `CONFLICT`.
 * Answers a retry may change (5xx, 409 such as a busy run or a stale lease, 429) release the
 * key, so a retry runs again: such a request committed nothing.
 */
export function idempotency(meta: MetadataStore): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = c.req.header(IDEMPOTENCY_HEADER);
    if (key === undefined || c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    if (!KEY_PATTERN.test(key)) {
      throw new InputError('INVALID_INPUT', 'Idempotency-Key must be 1-255 printable ASCII characters', {
        data: { header: IDEMPOTENCY_HEADER },
      });
    }
    const { tenantId } = c.get('principal');
    const requestHash = createHash('sha256')
      .update(`${c.req.method}\0${c.req.path}\0`)
      .update(await c.req.text())
      .digest('hex');
    const found = await meta.idempotency.begin({ tenantId, key, requestHash, expireBeforeMs: Date.now() - IDEMPOTENCY_RETENTION_MS });
    if (found.kind === 'replay') {
      return new Response(found.response, {
        status: found.statusCode,
        headers: { 'content-type': 'application/json; charset=utf-8', [REPLAYED_HEADER]: 'true' },
      });
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
      await meta.idempotency.abandon(tenantId, key).catch(() => undefined);
      throw error;
    }
    const body = RETRYABLE(c.res.status) ? undefined : await storable(c.res);
    if (body === undefined) await meta.idempotency.abandon(tenantId, key);
    else await meta.idempotency.finish(tenantId, key, c.res.status, body);
  };
}

/** The answer's JSON text when it can be replayed, else `undefined`. */
async function storable(response: Response): Promise<string | undefined> {
  if (!(response.headers.get('content-type') ?? '').includes('application/json')) return undefined;
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_IDEMPOTENT_RESPONSE_BYTES) return undefined;
  const text = await response.clone().text();
  return Buffer.byteLength(text) > MAX_IDEMPOTENT_RESPONSE_BYTES ? undefined : text;
}
