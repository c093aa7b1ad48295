import type { Context, Handler } from 'hono';
import type { z } from 'zod';
import { InputError } from '../errors.js';
import type { Holdfast, TenantServices } from '../index.js';
import type { AppEnv } from './app-env.js';
import type { RouteDoc } from './openapi.js';

/** Largest JSON request body accepted. */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;

/** One route: its documentation (also the validation schemas) and its handler. */
export interface RouteDef {
  readonly doc: RouteDoc;
  readonly handler: Handler<AppEnv>;
}

/** What route handlers share. */
export interface RouteServices {
  readonly hf: Holdfast;
}

/** The services of the authenticated principal's tenant. */
export function tenantServices(hf: Holdfast, c: Context<AppEnv>): Promise<TenantServices> {
  return hf.forTenant(c.get('principal').tenantName);
}

/**
 * Reads and validates a JSON body: a body that is not JSON, larger than
 * {@link MAX_JSON_BODY_BYTES}, or that does not match `schema` is `INVALID_INPUT` (400).
 */
export async function readJson<S extends z.ZodType>(c: Context<AppEnv>, schema: S): Promise<z.output<S>> {
  const declared = Number(c.req.header('content-length') ?? 0);
  if (declared > MAX_JSON_BODY_BYTES) throw tooLarge();
  const text = await c.req.text();
  if (Buffer.byteLength(text) > MAX_JSON_BODY_BYTES) throw tooLarge();
  let value: unknown;
  try {
    value = text === '' ? {} : JSON.parse(text);
  } catch (cause) {
    throw new InputError('INVALID_INPUT', 'the request body is not valid JSON', { cause });
  }
  return schema.parse(value);
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
