/**
 * Bearer-token authentication over `auth/tokens.ts`: the token is hashed here and the hash
 * looked up.
 */
import type { MiddlewareHandler } from 'hono';
import { HoldfastError, NotFoundError } from '../errors.js';
import type { PrincipalKind } from '../tenants/folder-access.js';
import { hashToken, type Principal } from '../tenants/tokens.js';
import type { AppEnv } from './app-env.js';

export type { Principal } from '../tenants/tokens.js';

/**
 * Longest `Authorization` header considered; a real one is ~60 chars. Bounding it keeps
 * hashing and regex work per request constant whatever a client sends.
 */
export const MAX_AUTHORIZATION_HEADER_CHARS = 512;
/** `Bearer <token68>` (RFC 6750 §2.1); the scheme is case-insensitive (RFC 9110 §11.1). */
const BEARER_HEADER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * Looks a token hash up; `undefined` for unknown or revoked tokens. May throw (for example
 * `STORE_UNAVAILABLE`), which the error handler reports as such rather than as 401.
 */
export type VerifyTokenHash = (tokenHash: string) => Promise<Principal | undefined>;

/** What {@link bearerAuth} accepts. */
export interface BearerAuthOptions {
  /**
   * The principal kinds these routes serve; default only `service` (the `/v1` API). A token
   * of another kind is `NOT_FOUND` (404): user and run tokens reach work folders only, and
   * to them nothing else exists. Work-folder routes pass every kind (`PRINCIPAL_KINDS`) and
   * decide with `canAccessFolder`.
   */
  readonly kinds?: readonly PrincipalKind[];
}

/**
 * Middleware requiring `Authorization: Bearer <token>`. A missing, malformed, oversized or
 * unknown token throws `UNAUTHORIZED` (the error handler answers 401 with a
 * `WWW-Authenticate` challenge); a principal of a kind not in `options.kinds` throws
 * `NOT_FOUND`; otherwise the principal is stored as `c.get('principal')`.
 *
 * The token is never compared with a secret here: it is hashed and the hash is looked up.
 * A timing difference in that lookup reveals at most a prefix of a SHA-256 digest, which
 * says nothing useful about any token, so constant-time comparison is not needed.
 */
export function bearerAuth(verify: VerifyTokenHash, options: BearerAuthOptions = {}): MiddlewareHandler<AppEnv> {
  const kinds = new Set<PrincipalKind>(options.kinds ?? ['service']);
  return async (c, next) => {
    const header = c.req.header('authorization');
    if (header === undefined || header === '') {
      throw unauthorized('missing', 'missing Authorization header: send "Authorization: Bearer <token>"');
    }
    const token = header.length <= MAX_AUTHORIZATION_HEADER_CHARS ? BEARER_HEADER.exec(header)?.[1] : undefined;
    if (token === undefined) {
      throw unauthorized('malformed', 'malformed Authorization header: expected "Bearer <token>"');
    }
    const principal = await verify(hashToken(token));
    if (principal === undefined) {
      throw unauthorized('unknown', 'unknown or revoked token: ask a Holdfast admin for a valid token');
    }
    if (!kinds.has(principal.kind)) {
      throw new NotFoundError(`no route ${c.req.method} ${c.req.path} for this token`, { data: {} });
    }
    c.set('principal', principal);
    await next();
  };
}

function unauthorized(reason: 'missing' | 'malformed' | 'unknown', message: string): HoldfastError {
  return new HoldfastError('UNAUTHORIZED', message, { data: { reason } });
}
