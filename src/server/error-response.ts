/**
 * The one place where errors become HTTP responses (STYLE §11): domain code throws
 * `HoldfastError`s with stable codes and never imports HTTP; this file picks the status.
 */
import type { ErrorHandler, NotFoundHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import { type ErrorCode, fieldPath, isHoldfastError } from '../errors.js';
import type { AppEnv } from './app-env.js';
import type { Logger } from './logger.js';

/** HTTP status for every error code; a `Record` so a new code cannot be forgotten. */
const STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  NOT_FOUND: 404,
  ALREADY_EXISTS: 409,
  CONFLICT: 409,
  STALE_LEASE: 409,
  WORKSPACE_CHANGED: 409,
  // A git write was in progress (a `*.lock` under `.git`): the next save retries.
  REPOSITORY_BUSY: 409,
  // The checkout is not self-contained or not a plain checkout (alternates, a `.git` file, hard links, escaping symlinks).
  REPOSITORY_UNSUPPORTED: 422,
  INTEGRITY: 500,
  RESTORE_INCOMPLETE: 500,
  LIMIT_EXCEEDED: 413,
  INVALID_PATH: 400,
  INVALID_INPUT: 400,
  SECRET_EXCLUDED: 422,
  STORE_UNAVAILABLE: 503,
  // RFC 4918 Insufficient Storage: the request was fine, the server has no room to keep it.
  STORE_FULL: 507,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  // The path exists with other methods; the answer's `Allow` header lists them.
  METHOD_NOT_ALLOWED: 405,
  UNSUPPORTED_MEDIA_TYPE: 415,
  // A byte range past the end of a file; the answer's `Content-Range: bytes */SIZE` gives the size (RFC 9110 §15.5.17).
  RANGE_NOT_SATISFIABLE: 416,
  // The caller's setup step failed, not the server: the request was valid but not achievable.
  SETUP_FAILED: 422,
  TIMEOUT: 504,
  // 499 is nginx-only; a cancelled operation conflicts with the caller's expectation.
  CANCELLED: 409,
  // The server stopped the work (it shut down, its deadline passed) before it finished: try again on a live one.
  INTERRUPTED: 503,
  INTERNAL: 500,
};

/** Code reported for a Hono `HTTPException` (thrown by Hono itself, e.g. malformed JSON). */
const CODE_BY_HTTP_STATUS: Readonly<Record<number, ErrorCode>> = {
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  408: 'TIMEOUT',
  409: 'CONFLICT',
  413: 'LIMIT_EXCEEDED',
  416: 'RANGE_NOT_SATISFIABLE',
  503: 'STORE_UNAVAILABLE',
  504: 'TIMEOUT',
};

/** What a client sees for an unexpected error: its message may hold paths or secrets. */
export const INTERNAL_MESSAGE = 'internal error; see the server log';
/** Validation issues reported per response; a huge invalid array must not make a huge answer. */
export const MAX_REPORTED_ISSUES = 50;
/** Longest request path echoed back in a 404 body. */
const MAX_ECHOED_PATH_CHARS = 256;
/** Challenge sent with every 401 (RFC 6750 §3). */
export const BEARER_CHALLENGE = 'Bearer realm="holdfast"';

/** The JSON body of every error response. */
export interface ErrorResponseBody {
  error: { code: string; message: string; data?: unknown };
}

/** HTTP status for an error code. */
export function statusForCode(code: ErrorCode): number {
  return STATUS_BY_CODE[code];
}

/** Status and body for any thrown value; see {@link classify}. */
export function errorBody(error: unknown): { status: number; body: ErrorResponseBody } {
  const { status, body } = classify(error);
  return { status, body };
}

/**
 * Holdfast errors keep their code, message and data; zod errors become `INVALID_INPUT`
 * with `data.field` (the first issue's path) and `data.issues`; Hono `HTTPException`s keep their status; anything else is an
 * unexpected `INTERNAL` error whose message is withheld (`expected: false`).
 */
function classify(error: unknown): { status: number; body: ErrorResponseBody; expected: boolean } {
  if (isHoldfastError(error)) {
    return { status: statusForCode(error.code), body: { error: error.toJSON() }, expected: true };
  }
  if (error instanceof z.core.$ZodError) {
    const issues = error.issues.slice(0, MAX_REPORTED_ISSUES).map((issue) => ({
      path: issue.path.map((key) => (typeof key === 'symbol' ? String(key) : key)),
      code: issue.code,
      message: issue.message,
    }));
    const first = error.issues[0];
    // `field` names the first bad field as every entry names it (`setup[2]`, `limits.cpus`).
    const field =
      first === undefined ? undefined : fieldPath([...first.path, ...(first.code === 'unrecognized_keys' ? first.keys.slice(0, 1) : [])]);
    const data = { ...(field === undefined ? {} : { field }), issues, ...(error.issues.length > issues.length ? { truncated: true } : {}) };
    return { status: 400, body: { error: { code: 'INVALID_INPUT', message: 'invalid request', data } }, expected: true };
  }
  if (error instanceof HTTPException && error.status < 500) {
    const code = CODE_BY_HTTP_STATUS[error.status] ?? 'INVALID_INPUT';
    return { status: error.status, body: { error: { code, message: error.message || code } }, expected: true };
  }
  const status = error instanceof HTTPException ? error.status : 500;
  return { status, body: { error: { code: 'INTERNAL', message: INTERNAL_MESSAGE } }, expected: false };
}

/**
 * Hono `onError` handler. Unexpected errors are logged at error level with their stack;
 * expected 5xx errors (a store down, bytes corrupt) at warn, since operators must see them;
 * 4xx errors are left to the request log. 401 answers carry a bearer challenge.
 */
export function errorHandler(log: Logger): ErrorHandler<AppEnv> {
  return (error, c) => {
    const { status, body, expected } = classify(error);
    // The request's own logger carries its id; before requestLogger ran, the id is added here.
    const requestLog = c.get('log') ?? log.child({ requestId: c.get('requestId') });
    const fields = { error, method: c.req.method, path: c.req.path };
    if (!expected) requestLog.error('unhandled error', fields);
    else if (status >= 500) requestLog.warn('request failed', fields);
    if (status === 401) c.header('WWW-Authenticate', BEARER_CHALLENGE);
    return c.json(body, status as ContentfulStatusCode);
  };
}

/** Hono `notFound` handler: the standard error body with code `NOT_FOUND`. */
export const notFoundHandler: NotFoundHandler<AppEnv> = (c) => {
  const path = c.req.path.slice(0, MAX_ECHOED_PATH_CHARS);
  const body: ErrorResponseBody = { error: { code: 'NOT_FOUND', message: `no route for ${c.req.method} ${path}` } };
  return c.json(body, 404);
};

/** One registered route: its method (`get`, `post`, …) and its path pattern (`/v1/runs/:id`). */
export interface RouteKey {
  readonly method: string;
  readonly path: string;
}

/**
 * A `notFound` handler that knows the routes: a path that exists under other methods answers
 * 405 `METHOD_NOT_ALLOWED` with an `Allow` header (RFC 9110 §15.5.6; `HEAD` wherever `GET`
 * is, as Hono serves it), anything else 404 as {@link notFoundHandler}.
 */
export function routeNotFound(routes: readonly RouteKey[]): NotFoundHandler<AppEnv> {
  const patterns = routes.map((r) => ({ method: r.method.toUpperCase(), re: patternOf(r.path) }));
  return (c) => {
    const allowed = new Set(patterns.filter((p) => p.re.test(c.req.path)).map((p) => p.method));
    if (allowed.size === 0) return notFoundHandler(c);
    if (allowed.has('GET')) allowed.add('HEAD');
    const allow = [...allowed].sort().join(', ');
    const path = c.req.path.slice(0, MAX_ECHOED_PATH_CHARS);
    const body: ErrorResponseBody = {
      error: {
        code: 'METHOD_NOT_ALLOWED',
        message: `${c.req.method} is not allowed on ${path}: use ${allow}`,
        data: { allow: [...allowed].sort() },
      },
    };
    c.header('Allow', allow);
    return c.json(body, 405);
  };
}

/** A route path pattern as a regular expression: each `:param` matches one non-empty segment. */
function patternOf(route: string): RegExp {
  const source = route
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${source}/?$`);
}
