import type { Context, Handler } from 'hono';
import type { z } from 'zod';
import { HoldfastError, InputError } from '../errors.js';
import type { Holdfast, TenantServices } from '../index.js';
import type { PrincipalKind } from '../tenants/folder-access.js';
import type { AppEnv } from './app-env.js';
import type { Principal } from './auth.js';
import type { IdempotentRoute } from './idempotency.js';
import type { RouteDoc } from './openapi.js';

/**
 * What {@link answerAs} takes: the schema's input, read-only all the way down (domain objects
 * are `readonly`; the check is that their shape is the documented one, not that they may change).
 */
export type Answer<T> = T extends readonly (infer U)[]
  ? readonly Answer<U>[]
  : T extends Record<string, unknown>
    ? { readonly [K in keyof T]: Answer<T[K]> }
    : T;

/** Schema issues reported when an answer does not match its schema. */
const MAX_ANSWER_ISSUES = 10;

/** Largest JSON request body accepted. */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;

/**
 * One route: its documentation (also the validation schemas), who may call it, and its
 * handler. `createApp` runs, in order: the body limit, `authorize`, the idempotency receipt (so a replay is
 * only given to a caller the route serves), then `handler`.
 */
export interface RouteDef extends IdempotentRoute {
  readonly doc: RouteDoc;
  /**
   * Throws (`FORBIDDEN`) when the authenticated principal may not call this route; runs
   * before anything else of the route, a replayed answer included. Default: every principal.
   */
  readonly authorize?: (principal: Principal) => void;
  /**
   * The principal kinds this `/v1` route serves; default only `service`. A token of another
   * kind is `NOT_FOUND` (404), before `authorize`: to it the route does not exist.
   */
  readonly principals?: readonly PrincipalKind[];
  /**
   * Largest request body this route reads, bounded while it streams; default
   * MAX_REQUEST_BODY_BYTES (`body-limit.ts`). Upload routes declare a larger one here.
   */
  readonly maxBodyBytes?: number;
  readonly handler: Handler<AppEnv>;
}

/** {@link RouteDef.authorize} for routes only admin tokens may call. */
export function requireAdmin(principal: Principal): void {
  if (principal.kind !== 'service' || !principal.admin)
    throw new HoldfastError('FORBIDDEN', 'only admin tokens may call this route: use an admin token', { data: {} });
}

/** What route handlers share. */
export interface RouteServices {
  readonly hf: Holdfast;
}

/** The services of the authenticated principal's tenant. */
export function tenantServices(hf: Holdfast, c: Context<AppEnv>): Promise<TenantServices> {
  return hf.forTenant(c.get('principal').tenantName);
}

/** `application/json` or a `+json` type such as `application/merge-patch+json`, with any parameters. */
const JSON_MEDIA_TYPE_RE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

/**
 * Reads and validates a JSON body: a non-empty body not declared as JSON (`Content-Type`) is
 * `UNSUPPORTED_MEDIA_TYPE` (415; `curl -d` sends form encoding unless told otherwise); a
 * body that is not JSON, larger than {@link MAX_JSON_BODY_BYTES}, or that does not match
 * `schema` is `INVALID_INPUT` (400). An empty body reads as `{}`.
 */
export async function readJson<S extends z.ZodType>(c: Context<AppEnv>, schema: S): Promise<z.output<S>> {
  const declared = Number(c.req.header('content-length') ?? 0);
  if (declared > MAX_JSON_BODY_BYTES) throw tooLarge();
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MAX_JSON_BODY_BYTES) throw tooLarge();
  const type = c.req.header('content-type') ?? '';
  if (text !== '' && !JSON_MEDIA_TYPE_RE.test(type)) {
    throw new HoldfastError(
      'UNSUPPORTED_MEDIA_TYPE',
      `the request body must be JSON: send Content-Type: application/json (got ${JSON.stringify(type.slice(0, 100))})`,
      {
        data: { contentType: type.slice(0, 100) },
      },
    );
  }
  let value: unknown;
  try {
    value = text === '' ? {} : JSON.parse(text);
  } catch (cause) {
    throw new InputError('INVALID_INPUT', 'the request body is not valid JSON', { cause });
  }
  return schema.parse(value);
}

/**
 * `value` as the documented response schema `schema` serializes it: what is not in the schema
 * is left out, so an answer is exactly what the OpenAPI document says. A value the schema
 * refuses is the server's fault, never the client's: `INTERNAL` (500), not the 400 a request
 * that fails its schema gets.
 */
export function answerAs<S extends z.ZodType>(schema: S, value: Answer<z.input<S>>): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.slice(0, MAX_ANSWER_ISSUES).map((issue) => ({ path: issue.path.map(String), code: issue.code }));
  throw new HoldfastError('INTERNAL', 'the answer does not match its documented schema: this is a server bug', {
    cause: parsed.error,
    data: { issues },
  });
}

/** Validates the query string against `schema`. */
export function readQuery<S extends z.ZodType>(c: Context<AppEnv>, schema: S): z.output<S> {
  return schema.parse(c.req.query());
}

function tooLarge(): InputError {
  return new InputError('LIMIT_EXCEEDED', `JSON bodies are limited to ${MAX_JSON_BODY_BYTES} bytes`, {
    data: { maxBytes: MAX_JSON_BODY_BYTES },
  });
}
