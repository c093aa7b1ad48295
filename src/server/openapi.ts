/**
 * OpenAPI 3.1 from the route table: the zod schemas that validate requests, and that the
 * handlers parse their answers with, are also the documentation, so the two cannot drift.
 * Every operation lists each status it gives on purpose, errors included (by the error codes
 * the route gives, mapped by `error-response.ts`), with the headers of each answer.
 */
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode, type HoldfastError, InputError } from '../errors.js';
import { statusForCode } from './error-response.js';

/** One documented route. */
export interface RouteDoc {
  readonly method: 'get' | 'post' | 'put' | 'delete';
  /** Hono style, e.g. `/v1/runs/:id`; every `:param` becomes a required path parameter. */
  readonly path: string;
  /** Unique across the document, camelCase (`createRun`): what generated clients name the call. */
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  /**
   * Schemas of the path parameters by name (an enum, a pattern), documented as their input; a
   * `:param` without one is any string (or its route regex). A property no `:param` names is refused.
   */
  readonly params?: z.ZodObject;
  /** Request body schema, documented as the input the client sends (before transforms). */
  readonly body?: z.ZodType;
  /**
   * Content type of `body`; defaults to `application/json`. Given without `body`, the request
   * body is raw bytes of this type (an upload), documented as a binary string.
   */
  readonly consumes?: string;
  /**
   * Request headers the route reads (`X-File-SHA256`, `Range`, …); each property becomes a
   * header parameter, named as the property: spell each as the document does everywhere else
   * (one spelling per header across the document). `Content-Type`, `Accept` and `Authorization`
   * are refused: OpenAPI ignores such parameters (the body's media type is `consumes`, the token
   * the security scheme).
   */
  readonly headers?: z.ZodObject;
  /** Query string; each property becomes a query parameter. */
  readonly query?: z.ZodObject;
  /** Success body schema, documented as the output the server sends (the handler parses its answer with it). */
  readonly response?: z.ZodType;
  /** Success status; defaults to 200. */
  readonly responseStatus?: number;
  /** Whether a bearer token is required; defaults to true. */
  readonly auth?: boolean;
  /**
   * Content type of the success body (e.g. `application/octet-stream`); defaults to JSON. A
   * non-JSON answer without `response` is any bytes of that type.
   */
  readonly produces?: string;
  /** Headers of the success answer, by name. */
  readonly responseHeaders?: Readonly<Record<string, HeaderDoc>>;
  /**
   * Further answers the route gives on purpose, by status: another success (206 Partial
   * Content, 304, a 200 beside a 201) or, for an error status, what it means on this route
   * and the headers it carries (the status must be one of the route's error codes).
   */
  readonly responses?: Readonly<Record<number, ResponseDoc>>;
  /**
   * Error codes this route gives on purpose beyond those every route of its kind gives
   * (`INTERNAL`; `UNAUTHORIZED`, `NOT_FOUND` and `STORE_UNAVAILABLE` behind a token;
   * `INVALID_INPUT` with a body or a query, and behind a token with path or header parameters;
   * `LIMIT_EXCEEDED` and `UNSUPPORTED_MEDIA_TYPE` with a body).
   * Each becomes its status (`error-response.ts`) with the error body, its code listed.
   */
  readonly errors?: readonly ErrorCode[];
  /**
   * The route keeps `Idempotency-Key` receipts (`idempotency.ts`): the optional request
   * header, the replay headers of the success answer and the in-flight 409 with
   * `Retry-After` are documented. Set by `createApp` for the routes it mounts that way.
   */
  readonly idempotent?: boolean;
}

/** A documented header: its description, or that with a schema (default: a string) and whether it is always sent. */
export type HeaderDoc = string | { readonly description: string; readonly schema?: z.ZodType; readonly required?: boolean };

/** One further documented answer of a route ({@link RouteDoc.responses}). */
export interface ResponseDoc {
  readonly description: string;
  /** The answer's JSON body, when it has one and is a success. */
  readonly body?: z.ZodType;
  /** The answer's media type when it is not JSON (e.g. `application/octet-stream` for a 206). */
  readonly produces?: string;
  readonly headers?: Readonly<Record<string, HeaderDoc>>;
}

/** What the document says about itself and the service (`info`, `servers`, `tags`). */
export interface OpenApiInfo {
  readonly title: string;
  readonly version: string;
  readonly description?: string;
  /** An SPDX license id, e.g. `Apache-2.0`. */
  readonly license: string;
  /** Tag descriptions by name; every tag a route names must be here. */
  readonly tags?: Readonly<Record<string, string>>;
  /** The defaults of the server variables `host` and `port`; default {@link DEFAULT_SERVER}. */
  readonly defaultServer?: { readonly host: string; readonly port: number };
}

/** Where `holdfast serve` listens unless told otherwise (`--host`, `--port`): the document's default server. */
export const DEFAULT_SERVER = Object.freeze({ host: '127.0.0.1', port: 7420 });

type Json = Record<string, unknown>;

const JSON_TYPE = 'application/json';
const SCHEMAS_PREFIX = '#/components/schemas/';
/** Hono path parameter with an optional `{regex}`; an optional `?` suffix is rejected. */
const PATH_PARAM = /:([A-Za-z0-9_]+)(\{[^}]*\})?(\?)?/g;
/** Letters and digits, starting with a lowercase letter: safe in URLs and as a method name. */
const OPERATION_ID = /^[a-z][A-Za-z0-9]*$/;
/** Header parameters OpenAPI ignores (3.1.0 §4.8.12.1): the media type, the accepted types and the credential have their own fields. */
const IGNORED_HEADER_PARAMETERS: ReadonlySet<string> = new Set(['content-type', 'accept', 'authorization']);
/** The one spelling of the idempotency header, wherever a route takes it. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

const ERROR_SCHEMA: Json = {
  type: 'object',
  description: 'The body of every error answer',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', enum: [...ERROR_CODES], description: 'Stable: branch on it, never on the message' },
        message: { type: 'string', description: 'For people: what went wrong and what to do' },
        data: { description: 'Details by code (`issues` for INVALID_INPUT, `allow` for METHOD_NOT_ALLOWED, …)' },
      },
    },
  },
};

/** Headers on every answer, declared once. */
const COMMON_HEADERS: Json = {
  'X-Request-Id': {
    description: 'The request id: the one the client sent in X-Request-Id when it is short and plain, else a new one',
    required: true,
    schema: { type: 'string', minLength: 1 },
  },
};
const COMMON_HEADER_REFS: Json = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };

/** The receipt headers of an idempotent route's success answer (`idempotency.ts`). */
const REPLAY_HEADERS: Readonly<Record<string, HeaderDoc>> = {
  'Idempotent-Replayed': {
    description: '`true` when this answer was replayed from the receipt of an earlier request with the same Idempotency-Key',
    schema: z.literal('true'),
  },
  'Idempotent-Redacted': {
    description: '`true` when the replayed answer lacks a credential the first answer carried (the field reads `null`)',
    schema: z.literal('true'),
  },
};

/** Headers of an error answer, by the code that sends them. */
const ERROR_HEADERS: Partial<Record<ErrorCode, Readonly<Record<string, HeaderDoc>>>> = {
  UNAUTHORIZED: { 'WWW-Authenticate': { description: 'The bearer challenge (RFC 6750)', required: true } },
  RANGE_NOT_SATISFIABLE: { 'Content-Range': { description: '`bytes */SIZE`: the size of the file', required: true } },
};

/**
 * The 405 every documented path answers for a method it does not have. It belongs to no
 * operation (a method a path lacks has none), so it is a component the description points to.
 */
const METHOD_NOT_ALLOWED: Json = {
  description: 'METHOD_NOT_ALLOWED: the path exists with other methods, listed in Allow (and in `error.data.allow`)',
  headers: {
    Allow: {
      description: 'The methods the path has, comma-separated (`HEAD` wherever `GET` is)',
      required: true,
      schema: { type: 'string' },
    },
    ...COMMON_HEADER_REFS,
  },
  content: { [JSON_TYPE]: { schema: errorSchema(['METHOD_NOT_ALLOWED']) } },
};

/**
 * Builds the document. Throws `INVALID_INPUT` on a duplicate route or operation id, an
 * undocumentable path, an undeclared tag, or an error status none of the route's codes gives.
 */
export function buildOpenApi(info: OpenApiInfo, routes: readonly RouteDoc[]): Json {
  const schemas: Record<string, Json> = { Error: ERROR_SCHEMA };
  /** Header parameter names by their lowercase form: a second spelling of one header is refused. */
  const headerSpellings = new Map<string, string>();
  const paths: Record<string, Record<string, Json>> = {};
  // OpenAPI treats /a/{id} and /a/{name} as the same path, so compare with names erased.
  const templates = new Map<string, string>();
  const operationIds = new Set<string>();
  for (const route of routes) {
    const { path, params } = convertPath(route.path);
    const template = path.replace(/\{[^}]*\}/g, '{}');
    const known = templates.get(template) ?? path;
    if (known !== path) throw invalid(`paths ${known} and ${path} differ only in parameter names: use the same names`);
    templates.set(template, path);
    const operations = paths[path] ?? {};
    if (operations[route.method] !== undefined) throw invalid(`route ${route.method.toUpperCase()} ${route.path} is documented twice`);
    if (!OPERATION_ID.test(route.operationId) || operationIds.has(route.operationId)) {
      throw invalid(`operationId ${route.operationId} of ${route.method.toUpperCase()} ${route.path} is not a unique camelCase name`);
    }
    operationIds.add(route.operationId);
    for (const tag of route.tags ?? []) {
      if (info.tags?.[tag] === undefined) throw invalid(`tag ${tag} of ${route.operationId} is not declared`);
    }
    const op = operation(route, params, schemas);
    checkHeaderSpellings(route, op, headerSpellings);
    operations[route.method] = op;
    paths[path] = operations;
  }
  const server = info.defaultServer ?? DEFAULT_SERVER;
  const doc: Json = {
    openapi: '3.1.0',
    info: {
      title: info.title,
      version: info.version,
      ...(info.description === undefined ? {} : { description: info.description }),
      license: { name: info.license, identifier: info.license },
    },
    // A template with the defaults of `holdfast serve`: a generated client gets a base URL that works
    // against a local service, and says where to put another host or port.
    servers: [
      {
        url: 'http://{host}:{port}',
        description: 'A holdfast serve: loopback by default; behind a TLS proxy, use its https URL instead',
        variables: {
          host: { default: server.host, description: 'The interface or name it listens on (--host, HOLDFAST_HOST)' },
          port: { default: String(server.port), description: 'Its TCP port (--port, HOLDFAST_PORT)' },
        },
      },
    ],
  };
  if (info.tags !== undefined) doc.tags = Object.entries(info.tags).map(([name, description]) => ({ name, description }));
  doc.paths = paths;
  doc.components = {
    schemas,
    headers: COMMON_HEADERS,
    responses: { MethodNotAllowed: METHOD_NOT_ALLOWED },
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API token: `Authorization: Bearer <token>`' } },
  };
  return doc;
}

function operation(route: RouteDoc, pathParams: readonly PathParam[], schemas: Record<string, Json>): Json {
  const hint = route.operationId;
  const parameters: Json[] = pathParameters(route, pathParams, schemas);
  if (route.query !== undefined) parameters.push(...objectParameters(route.query, 'query', `${hint}Query`, schemas));
  if (route.headers !== undefined) parameters.push(...objectParameters(route.headers, 'header', `${hint}Headers`, schemas));
  if (route.idempotent === true) {
    parameters.push({
      name: IDEMPOTENCY_KEY_HEADER,
      in: 'header',
      required: false,
      description:
        'Makes a retry safe: the first answer is kept 24 h and replayed to the same token for the same key and request; the same key for another request is 400, one still running 409',
      schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
    });
  }
  const op: Json = { operationId: route.operationId, summary: route.summary };
  if (route.description !== undefined) op.description = route.description;
  if (route.tags !== undefined) op.tags = [...route.tags];
  if (parameters.length > 0) op.parameters = parameters;
  if (route.body !== undefined) {
    const schema = embed(route.body, 'input', `${hint}Body`, schemas);
    op.requestBody = { required: true, content: { [route.consumes ?? JSON_TYPE]: { schema } } };
  } else if (route.consumes !== undefined) {
    op.requestBody = { required: true, content: { [route.consumes]: { schema: binarySchema(route.consumes) } } };
  }
  const successHeaders = { ...route.responseHeaders, ...(route.idempotent === true ? REPLAY_HEADERS : {}) };
  const success = answer(
    { description: 'Success', headers: successHeaders, ...bodyOf(route.response, route.produces) },
    `${hint}Response`,
    schemas,
  );
  const responses: Json = { [String(route.responseStatus ?? 200)]: success };
  const further = Object.entries(route.responses ?? {});
  for (const [status, doc] of further) {
    if (Number(status) < 400) responses[status] = answer(doc, `${hint}Response${status}`, schemas);
  }
  const byStatus = errorStatuses(route);
  for (const [status] of further) {
    if (Number(status) >= 400 && !byStatus.has(Number(status))) {
      throw invalid(`${route.operationId} documents ${status}, which none of its error codes gives: list the code in errors`);
    }
  }
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status)] = errorResponse(route, status, codes);
  }
  op.responses = responses;
  op.security = route.auth === false ? [] : [{ bearer: [] }];
  return op;
}

/**
 * Raw bytes of `mediaType`: `format: binary`, which generators read as "send and return bytes, not
 * JSON", and the OpenAPI 3.1 `contentMediaType` (left out for a media range such as `*\/*`).
 */
function binarySchema(mediaType: string): Json {
  return mediaType.includes('*') ? { type: 'string', format: 'binary' } : { type: 'string', format: 'binary', contentMediaType: mediaType };
}

/** The path parameters of `route`, each with its schema from `route.params`, else its route regex, else any string. */
function pathParameters(route: RouteDoc, pathParams: readonly PathParam[], schemas: Record<string, Json>): Json[] {
  const documented = new Map<string, Json>();
  if (route.params !== undefined) {
    for (const parameter of objectParameters(route.params, 'path', `${route.operationId}Params`, schemas)) {
      documented.set(String(parameter.name), parameter);
    }
  }
  for (const name of documented.keys()) {
    if (!pathParams.some((p) => p.name === name))
      throw invalid(`${route.operationId} documents path parameter ${name}, which ${route.path} lacks`);
  }
  return pathParams.map(({ name, pattern }) => {
    const given = documented.get(name);
    if (given !== undefined) return { ...given, required: true };
    return { name, in: 'path', required: true, schema: pattern === undefined ? { type: 'string' } : { type: 'string', pattern } };
  });
}

/** The properties of `schema` as parameters `in` the path, the query or the headers. */
function objectParameters(schema: z.ZodObject, where: 'path' | 'query' | 'header', hint: string, schemas: Record<string, Json>): Json[] {
  const resolved = resolveRef(embed(schema, 'input', hint, schemas), schemas);
  const required = Array.isArray(resolved.required) ? resolved.required : [];
  return Object.entries((resolved.properties ?? {}) as Json).map(([name, property]) => {
    if (where === 'header' && IGNORED_HEADER_PARAMETERS.has(name.toLowerCase())) {
      throw invalid(`${hint} declares the header ${name}, which OpenAPI ignores as a parameter: declare it with consumes or security`);
    }
    const { description, ...rest } = property as Json;
    const parameter: Json = { name, in: where, required: required.includes(name), schema: rest };
    if (typeof description === 'string') parameter.description = description;
    return parameter;
  });
}

/** Refuses a header parameter of `op` spelt otherwise than the same header elsewhere in the document. */
function checkHeaderSpellings(route: RouteDoc, op: Json, spellings: Map<string, string>): void {
  for (const parameter of (op.parameters ?? []) as Json[]) {
    if (parameter.in !== 'header') continue;
    const name = String(parameter.name);
    const known = spellings.get(name.toLowerCase()) ?? name;
    if (known !== name) throw invalid(`${route.operationId} spells the header ${known} as ${name}: use one spelling`, { header: known });
    spellings.set(name.toLowerCase(), name);
  }
}

/** `body` and `produces` of a success answer as a {@link ResponseDoc}'s. */
function bodyOf(body: z.ZodType | undefined, produces: string | undefined): Pick<ResponseDoc, 'body' | 'produces'> {
  return { ...(body === undefined ? {} : { body }), ...(produces === undefined ? {} : { produces }) };
}

/** A success answer: its body (JSON by default; bytes of `produces` without a schema) and headers. */
function answer(doc: ResponseDoc, hint: string, schemas: Record<string, Json>): Json {
  const out: Json = { description: doc.description, headers: { ...headersDoc(doc.headers ?? {}), ...COMMON_HEADER_REFS } };
  if (doc.body !== undefined) out.content = { [doc.produces ?? JSON_TYPE]: { schema: embed(doc.body, 'output', hint, schemas) } };
  // Bytes, declared as such so a generated client returns them as bytes rather than parsing JSON.
  else if (doc.produces !== undefined) out.content = { [doc.produces]: { schema: binarySchema(doc.produces) } };
  return out;
}

/** The error codes of `route` by HTTP status: those of its kind and those it names. */
function errorStatuses(route: RouteDoc): Map<number, ErrorCode[]> {
  const codes = new Set<ErrorCode>(['INTERNAL']);
  if (route.auth !== false) for (const code of ['UNAUTHORIZED', 'NOT_FOUND', 'STORE_UNAVAILABLE'] as const) codes.add(code);
  const hasBody = route.body !== undefined || route.consumes !== undefined;
  // Public routes read no id from their path and validate no header (a path that does not match is no route: 404).
  const readsInput = route.auth !== false && (route.headers !== undefined || route.path.includes(':'));
  if (hasBody || route.query !== undefined || readsInput) codes.add('INVALID_INPUT');
  if (hasBody) for (const code of ['LIMIT_EXCEEDED', 'UNSUPPORTED_MEDIA_TYPE'] as const) codes.add(code);
  if (route.idempotent === true) for (const code of ['INVALID_INPUT', 'CONFLICT'] as const) codes.add(code);
  for (const code of route.errors ?? []) codes.add(code);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of ERROR_CODES) {
    if (!codes.has(code)) continue;
    const status = statusForCode(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return byStatus;
}

function errorResponse(route: RouteDoc, status: number, codes: readonly ErrorCode[]): Json {
  const noted = route.responses?.[status];
  const headers: Record<string, HeaderDoc> = {};
  for (const code of codes) Object.assign(headers, ERROR_HEADERS[code]);
  if (status === 409 && route.idempotent === true) {
    headers['Retry-After'] = {
      description: 'Seconds to wait: sent when a request with the same Idempotency-Key is still running',
      schema: z.string().regex(/^[0-9]+$/),
    };
  }
  Object.assign(headers, noted?.headers);
  const listed = codes.map((code) => `\`${code}\``).join(', ');
  return {
    description: noted === undefined ? listed : `${listed}: ${noted.description}`,
    headers: { ...headersDoc(headers), ...COMMON_HEADER_REFS },
    content: { [JSON_TYPE]: { schema: errorSchema(codes) } },
  };
}

/** The error body with `error.code` narrowed to `codes`. */
function errorSchema(codes: readonly ErrorCode[]): Json {
  return {
    allOf: [
      { $ref: `${SCHEMAS_PREFIX}Error` },
      { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: [...codes] } } } } },
    ],
  };
}

function headersDoc(headers: Readonly<Record<string, HeaderDoc>>): Json {
  return Object.fromEntries(
    Object.entries(headers).map(([name, doc]) => {
      if (typeof doc === 'string') return [name, { description: doc, schema: { type: 'string' } }];
      const schema = doc.schema === undefined ? { type: 'string' } : headerSchema(doc.schema);
      return [name, { description: doc.description, ...(doc.required === true ? { required: true } : {}), schema }];
    }),
  );
}

function headerSchema(schema: z.ZodType): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as Json;
  return rest;
}

/** A path parameter: its name and, when the route gives one, the pattern it must match. */
interface PathParam {
  readonly name: string;
  readonly pattern?: string;
}

function convertPath(honoPath: string): { path: string; params: PathParam[] } {
  const params: PathParam[] = [];
  const path = honoPath.replace(PATH_PARAM, (_match, name: string, regex: string | undefined, optional: string | undefined) => {
    // OpenAPI path parameters are always required; document each variant as its own route.
    if (optional !== undefined) throw invalid(`optional path parameter :${name}? in ${honoPath} cannot be documented`);
    params.push(regex === undefined ? { name } : { name, pattern: `^${regex.slice(1, -1)}$` });
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
  return new InputError('INVALID_INPUT', `[openapi] ${message}`, { data });
}
