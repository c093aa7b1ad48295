/**
 * OpenAPI 3.1 from the route table: the zod schemas that validate requests are also the
 * documentation, so the two cannot drift.
 */
import { z } from 'zod';
import { ERROR_CODES, HoldfastError } from '../errors.js';

/** One documented route. */
export interface RouteDoc {
  readonly method: 'get' | 'post' | 'put' | 'delete';
  /** Hono style, e.g. `/v1/runs/:id`; every `:param` becomes a required path parameter. */
  readonly path: string;
  readonly summary: string;
  readonly tags?: readonly string[];
  /** Request body schema, documented as the input the client sends (before transforms). */
  readonly body?: z.ZodType;
  /**
   * Content type of `body`; defaults to `application/json`. Given without `body`, the request
   * body is raw bytes of this type (an upload), documented as a binary string.
   */
  readonly consumes?: string;
  /**
   * Request headers the route reads (`Idempotency-Key`, `Range`, …); each property becomes a
   * header parameter, named as the property (header names are case-insensitive).
   */
  readonly headers?: z.ZodObject;
  /** Query string; each property becomes a query parameter. */
  readonly query?: z.ZodObject;
  /** Success body schema, documented as the output the server sends. */
  readonly response?: z.ZodType;
  /** Success status; defaults to 200. */
  readonly responseStatus?: number;
  /** Whether a bearer token is required; defaults to true. */
  readonly auth?: boolean;
  /** Content type of the success body (e.g. `application/octet-stream`); defaults to JSON. */
  readonly produces?: string;
  /** Headers of the success answer, by name, with what each says. */
  readonly responseHeaders?: Readonly<Record<string, string>>;
  /**
   * Further answers the route gives on purpose, by status: another success (206 Partial
   * Content) or an error status worth naming (413, 415, 416). Every error still has the error
   * body; a `headers` entry names the answer's headers as in {@link responseHeaders}.
   */
  readonly responses?: Readonly<Record<number, ResponseDoc>>;
}

/** One further documented answer of a route ({@link RouteDoc.responses}). */
export interface ResponseDoc {
  readonly description: string;
  /** The answer's media type when it is not an error body (e.g. `application/octet-stream` for a 206). */
  readonly produces?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** `info` of the document. */
export interface OpenApiInfo {
  readonly title: string;
  readonly version: string;
}

type Json = Record<string, unknown>;

const JSON_TYPE = 'application/json';
const SCHEMAS_PREFIX = '#/components/schemas/';
/** Hono path parameter with an optional `{regex}`; an optional `?` suffix is rejected. */
const PATH_PARAM = /:([A-Za-z0-9_]+)(\{[^}]*\})?(\?)?/g;

const ERROR_SCHEMA: Json = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string', enum: [...ERROR_CODES] }, message: { type: 'string' }, data: {} },
    },
  },
};

/** Builds the document. Throws `INVALID_INPUT` on a duplicate route or an undocumentable path. */
export function buildOpenApi(info: OpenApiInfo, routes: readonly RouteDoc[]): Json {
  const schemas: Record<string, Json> = { Error: ERROR_SCHEMA };
  const paths: Record<string, Record<string, Json>> = {};
  // OpenAPI treats /a/{id} and /a/{name} as the same path, so compare with names erased.
  const templates = new Map<string, string>();
  for (const route of routes) {
    const { path, params } = convertPath(route.path);
    const template = path.replace(/\{[^}]*\}/g, '{}');
    const known = templates.get(template) ?? path;
    if (known !== path) throw invalid(`paths ${known} and ${path} differ only in parameter names: use the same names`);
    templates.set(template, path);
    const operations = paths[path] ?? {};
    if (operations[route.method] !== undefined) throw invalid(`route ${route.method.toUpperCase()} ${route.path} is documented twice`);
    operations[route.method] = operation(route, params, schemas);
    paths[path] = operations;
  }
  return {
    openapi: '3.1.0',
    info: { title: info.title, version: info.version },
    paths,
    components: {
      schemas,
      responses: {
        Error: { description: 'Error', content: { [JSON_TYPE]: { schema: { $ref: `${SCHEMAS_PREFIX}Error` } } } },
      },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
  };
}

function operation(route: RouteDoc, pathParams: readonly string[], schemas: Record<string, Json>): Json {
  const hint = `${route.method}${route.path.replace(/[^A-Za-z0-9]+/g, '_')}`;
  const parameters: Json[] = pathParams.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
  if (route.query !== undefined) {
    const query = resolveRef(embed(route.query, 'input', `${hint}_query`, schemas), schemas);
    const required = Array.isArray(query.required) ? query.required : [];
    for (const [name, schema] of Object.entries((query.properties ?? {}) as Json)) {
      parameters.push({ name, in: 'query', required: required.includes(name), schema });
    }
  }
  if (route.headers !== undefined) {
    const headers = resolveRef(embed(route.headers, 'input', `${hint}_headers`, schemas), schemas);
    const required = Array.isArray(headers.required) ? headers.required : [];
    for (const [name, schema] of Object.entries((headers.properties ?? {}) as Json)) {
      const { description, ...rest } = schema as Json;
      const parameter: Json = { name, in: 'header', required: required.includes(name), schema: rest };
      if (typeof description === 'string') parameter.description = description;
      parameters.push(parameter);
    }
  }
  const op: Json = { summary: route.summary };
  if (route.tags !== undefined) op.tags = [...route.tags];
  if (parameters.length > 0) op.parameters = parameters;
  if (route.body !== undefined) {
    const schema = embed(route.body, 'input', `${hint}_body`, schemas);
    op.requestBody = { required: true, content: { [route.consumes ?? JSON_TYPE]: { schema } } };
  } else if (route.consumes !== undefined) {
    // OpenAPI 3.1 describes raw bytes by their media type; the schema says it is binary.
    op.requestBody = { required: true, content: { [route.consumes]: { schema: { type: 'string', contentMediaType: route.consumes } } } };
  }
  const success: Json = { description: 'Success' };
  if (route.response !== undefined) {
    success.content = { [route.produces ?? JSON_TYPE]: { schema: embed(route.response, 'output', `${hint}_response`, schemas) } };
  } else if (route.produces !== undefined) {
    // OpenAPI 3.1: a media type without a schema means "any bytes of this type".
    success.content = { [route.produces]: {} };
  }
  if (route.responseHeaders !== undefined) success.headers = headersDoc(route.responseHeaders);
  const errorRef = { $ref: '#/components/responses/Error' };
  const responses: Json = { [String(route.responseStatus ?? 200)]: success };
  for (const [status, doc] of Object.entries(route.responses ?? {})) responses[status] = furtherResponse(doc);
  op.responses = { ...responses, '4XX': errorRef, '5XX': errorRef };
  op.security = route.auth === false ? [] : [{ bearer: [] }];
  return op;
}

function headersDoc(headers: Readonly<Record<string, string>>): Json {
  return Object.fromEntries(Object.entries(headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }]));
}

function furtherResponse(doc: ResponseDoc): Json {
  const content = doc.produces === undefined ? { [JSON_TYPE]: { schema: { $ref: `${SCHEMAS_PREFIX}Error` } } } : { [doc.produces]: {} };
  return { description: doc.description, content, ...(doc.headers === undefined ? {} : { headers: headersDoc(doc.headers) }) };
}

function convertPath(honoPath: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = honoPath.replace(PATH_PARAM, (_match, name: string, _regex: string | undefined, optional: string | undefined) => {
    // OpenAPI path parameters are always required; document each variant as its own route.
    if (optional !== undefined) throw invalid(`optional path parameter :${name}? in ${honoPath} cannot be documented`);
    params.push(name);
    return `{${name}}`;
  });
  return { path, params };
}

/**
 * Converts a zod schema and moves its `$defs` into `components.schemas`, since a `#/$defs/…`
 * reference inside an OpenAPI document would resolve against the document root. A schema
 * that refers to itself as `#` is stored as a component named after the route.
 */
function embed(schema: z.ZodType, io: 'input' | 'output', hint: string, schemas: Record<string, Json>): Json {
  // Documentation must not stop the server from starting: unrepresentable parts become `{}`.
  const { $schema: _dialect, $defs, ...root } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
  const names = new Map<string, string>();
  for (const name of Object.keys(($defs ?? {}) as Json)) names.set(name, name.startsWith('__') ? `${hint}${name}` : name);
  const selfRef = JSON.stringify(root).includes('"$ref":"#"');
  const rewrite = (value: unknown): unknown => rewriteRefs(value, names, selfRef ? hint : undefined);
  for (const [name, def] of Object.entries(($defs ?? {}) as Json)) addSchema(schemas, names.get(name) ?? name, rewrite(def) as Json);
  if (!selfRef) return rewrite(root) as Json;
  addSchema(schemas, hint, rewrite(root) as Json);
  return { $ref: SCHEMAS_PREFIX + hint };
}

function rewriteRefs(value: unknown, names: ReadonlyMap<string, string>, selfName: string | undefined): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, names, selfName));
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, child] of Object.entries(value)) {
    if (key === '$ref' && typeof child === 'string') {
      const def = child.startsWith('#/$defs/') ? names.get(child.slice('#/$defs/'.length)) : undefined;
      out[key] = def !== undefined ? SCHEMAS_PREFIX + def : child === '#' && selfName !== undefined ? SCHEMAS_PREFIX + selfName : child;
    } else {
      out[key] = rewriteRefs(child, names, selfName);
    }
  }
  return out;
}

function addSchema(schemas: Record<string, Json>, name: string, schema: Json): void {
  const existing = schemas[name];
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(schema)) {
    throw invalid(`two different schemas are both named ${name}: give one a unique .meta({ id })`, { name });
  }
  schemas[name] = schema;
}

function resolveRef(schema: Json, schemas: Record<string, Json>): Json {
  const ref = schema.$ref;
  return typeof ref === 'string' && ref.startsWith(SCHEMAS_PREFIX) ? (schemas[ref.slice(SCHEMAS_PREFIX.length)] ?? schema) : schema;
}

function invalid(message: string, data: Record<string, unknown> = {}): HoldfastError {
  return new HoldfastError('INVALID_INPUT', `[openapi] ${message}`, { data });
}
