import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ConflictError, InputError } from '../errors.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import { withholdSecrets } from '../rules/withhold-secrets.js';
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
/** Seconds a client is told to wait (`Retry-After`) while the first request with its key runs. */
const IN_PROGRESS_RETRY_AFTER_S = 1;
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
 * stored as `null`, and any other string of the answer that holds a credential (a turn's
 * output, say) is stored as a withheld marker: a secret is shown once, in the first answer
 * only, and a replay that lacks one says so with `Idempotent-Redacted: true`.
 */
export function idempotency(meta: MetadataStore, route: IdempotentRoute = {}): MiddlewareHandler<AppEnv> {
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
      .update(requestIdentity(await c.req.text()))
      .digest('hex');
    const found = await meta.idempotency.begin({ principalId, key, requestHash, expireBeforeMs: Date.now() - IDEMPOTENCY_RETENTION_MS });
    if (found.kind === 'replay') {
      const receipt = JSON.parse(found.response) as Receipt;
      const headers: Record<string, string> = { 'content-type': receipt.contentType ?? 'application/json', [REPLAYED_HEADER]: 'true' };
      if (receipt.redacted) headers[REDACTED_HEADER] = 'true';
      return new Response(JSON.stringify(receipt.body), { status: found.statusCode, headers });
    }
    if (found.kind === 'in_progress') {
      c.header('Retry-After', String(IN_PROGRESS_RETRY_AFTER_S));
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

/** What a receipt stores: the answer's JSON, whether anything was taken out of it, and its media type. */
interface Receipt {
  readonly redacted: boolean;
  readonly body: unknown;
  /** The first answer's `Content-Type`, so a replay is byte-for-byte the same kind of answer (absent in older receipts). */
  readonly contentType?: string;
}

/**
 * What identifies a request body: its JSON value in canonical form (keys sorted, no
 * whitespace), so a retry that re-serialises the same body differently is the same request;
 * a body that is not JSON counts by its exact text.
 */
function requestIdentity(text: string): string {
  if (text === '') return '';
  try {
    return canonicalJson(JSON.parse(text));
  } catch {
    return `\0raw\0${text}`;
  }
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The receipt of an answer (credential fields set to `null`, every other string that holds a
 * credential withheld), as JSON text, or `undefined` when the answer cannot be replayed: not
 * JSON, or too large.
 */
async function storable(response: Response, credentialFields: readonly string[]): Promise<string | undefined> {
  if (!(response.headers.get('content-type') ?? '').includes('application/json')) return undefined;
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_IDEMPOTENT_RESPONSE_BYTES) return undefined;
  const text = await response.clone().text();
  if (Buffer.byteLength(text) > MAX_IDEMPOTENT_RESPONSE_BYTES) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  let nulled = false;
  if (credentialFields.length > 0 && body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const kept: Record<string, unknown> = { ...body };
    for (const field of credentialFields) {
      if (field in kept && kept[field] !== null) {
        kept[field] = null;
        nulled = true;
      }
    }
    body = kept;
  }
  const { value, withheld } = withholdSecrets(body);
  const contentType = response.headers.get('content-type') ?? 'application/json';
  const receipt: Receipt = { redacted: nulled || withheld.length > 0, body: value, contentType };
  return JSON.stringify(receipt);
}
