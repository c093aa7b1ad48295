import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isHoldfastError } from '../errors.js';
import { buildOpenApi, type RouteDoc } from './openapi.js';

type Doc = {
  openapi: string;
  info: Record<string, unknown>;
  servers: unknown[];
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

const RUN = z.object({ id: z.string(), state: z.enum(['active', 'ended']) });
const ROUTES: readonly RouteDoc[] = [
  {
    method: 'post',
    path: '/v1/runs/:id/checkpoints',
    operationId: 'createCheckpoint',
    summary: 'Create a checkpoint',
    tags: ['checkpoints'],
    body: z.object({ label: z.string(), keep: z.boolean().default(false) }),
    response: RUN,
    responseStatus: 201,
  },
  {
    method: 'get',
    path: '/v1/runs/:id{[a-z0-9]+}/files/:fileId',
    operationId: 'downloadFile',
    summary: 'Download a file',
    query: z.object({ offset: z.coerce.number().optional(), rev: z.string() }),
    produces: 'application/octet-stream',
  },
  { method: 'get', path: '/healthz', operationId: 'getHealth', summary: 'Liveness', auth: false },
];

/** Follows `keys` through nested objects; undefined when a step is missing. */
function dig(value: unknown, ...keys: string[]): unknown {
  let current = value;
  for (const key of keys) current = current !== null && typeof current === 'object' ? (current as Record<string, unknown>)[key] : undefined;
  return current;
}

function build(routes: readonly RouteDoc[] = ROUTES): Doc {
  return buildOpenApi({ title: 'Holdfast', version: '0.1.0', license: 'Apache-2.0', tags: { checkpoints: 'Checkpoints' } }, routes) as Doc;
}

describe('buildOpenApi', () => {
  it('converts :params to {params} and declares them', () => {
    const doc = build();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(['/v1/runs/{id}/checkpoints', '/v1/runs/{id}/files/{fileId}', '/healthz']);
    const download = doc.paths['/v1/runs/{id}/files/{fileId}']?.get;
    expect(download?.parameters).toEqual([
      { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9]+$' } },
      { name: 'fileId', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'offset', in: 'query', required: false, schema: expect.objectContaining({ type: 'number' }) },
      { name: 'rev', in: 'query', required: true, schema: { type: 'string' } },
    ]);
    expect(download?.responses).toMatchObject({
      '200': {
        content: {
          'application/octet-stream': { schema: { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream' } },
        },
      },
    });
    expect(doc.servers).toEqual([
      expect.objectContaining({
        url: 'http://{host}:{port}',
        variables: { host: expect.objectContaining({ default: '127.0.0.1' }), port: expect.objectContaining({ default: '7420' }) },
      }),
    ]);
    expect(doc.info).toMatchObject({ license: { name: 'Apache-2.0', identifier: 'Apache-2.0' } });
    expect(doc.paths['/healthz']?.get?.operationId).toBe('getHealth');
  });

  it('applies bearer security to authenticated routes only', () => {
    const doc = build();
    expect(doc.components.securitySchemes).toEqual({ bearer: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
    expect(doc.paths['/v1/runs/{id}/checkpoints']?.post?.security).toEqual([{ bearer: [] }]);
    expect(doc.paths['/healthz']?.get?.security).toEqual([]);
  });

  it('documents the request body as input and the response as output', () => {
    const create = build().paths['/v1/runs/{id}/checkpoints']?.post;
    expect(dig(create, 'requestBody', 'required')).toBe(true);
    const body = dig(create, 'requestBody', 'content', 'application/json', 'schema');
    expect(dig(body, 'required')).toEqual(['label']);
    expect(dig(body, 'properties', 'keep')).toMatchObject({ type: 'boolean', default: false });
    expect(dig(body, '$schema')).toBeUndefined();
    expect(dig(create, 'responses', '201', 'content', 'application/json', 'schema', 'required')).toEqual(['id', 'state']);
    expect(dig(create, 'responses', '4XX')).toBeUndefined();
  });

  it('moves shared and recursive schemas to components', () => {
    const Node: z.ZodType = z.object({
      name: z.string(),
      get children() {
        return z.array(Node);
      },
    });
    const Tenant = z.object({ id: z.string() }).meta({ id: 'Tenant' });
    const doc = build([
      {
        method: 'put',
        path: '/tree',
        operationId: 'putTree',
        summary: 'Tree',
        body: Node,
        response: z.object({ owner: Tenant, tree: Node }),
      },
    ]);
    const op = doc.paths['/tree']?.put;
    expect(dig(op, 'requestBody', 'content', 'application/json', 'schema')).toEqual({ $ref: '#/components/schemas/putTreeBody' });
    const owner = dig(op, 'responses', '200', 'content', 'application/json', 'schema', 'properties', 'owner');
    expect(owner).toEqual({ $ref: '#/components/schemas/Tenant' });
    const text = JSON.stringify(doc);
    expect(text).not.toContain('#/$defs/');
    expect(text).not.toContain('"$ref":"#"');
    for (const ref of text.match(/#\/components\/schemas\/[A-Za-z0-9_]+/g) ?? []) {
      expect(doc.components.schemas).toHaveProperty(ref.split('/').at(-1) ?? '');
    }
  });

  it('rejects duplicate routes or operation ids, optional path parameters, undeclared tags and uncoded errors with INVALID_INPUT', () => {
    const route: RouteDoc = { method: 'get', path: '/a/:id', operationId: 'getA', summary: 'A' };
    const cases: RouteDoc[][] = [
      [route, route],
      [route, { ...route, method: 'post', path: '/a/:other', operationId: 'postA' }],
      [{ ...route, path: '/a/:id?' }],
      [route, { ...route, method: 'post' }],
      [{ ...route, operationId: 'get-a' }],
      [{ ...route, tags: ['undeclared'] }],
      [{ ...route, responses: { 409: { description: 'no code gives it' } } }],
      // OpenAPI ignores these as header parameters: a client that leaves them out gets a 415 or a 401.
      [{ ...route, headers: z.object({ 'Content-Type': z.string() }) }],
      [{ ...route, headers: z.object({ authorization: z.string() }) }],
      // One header, two spellings: a generated client would take them for two parameters.
      [
        { ...route, method: 'post', idempotent: true },
        { ...route, path: '/b/:id', operationId: 'getB', headers: z.object({ 'idempotency-key': z.string() }) },
      ],
      // A documented path parameter the path lacks.
      [{ ...route, params: z.object({ other: z.string() }) }],
    ];
    for (const routes of cases) {
      try {
        build(routes);
        expect.unreachable();
      } catch (error) {
        expect(isHoldfastError(error, 'INVALID_INPUT')).toBe(true);
      }
    }
  });

  it('lists every error status a route gives with the error body narrowed to its codes, and their headers', () => {
    const op = build().paths['/v1/runs/{id}/checkpoints']?.post;
    const responses = op?.responses as Record<string, unknown>;
    expect(Object.keys(responses)).toEqual(['201', '400', '401', '404', '413', '415', '500', '503']);
    expect(dig(responses, '404', 'description')).toBe('`NOT_FOUND`');
    expect(dig(responses, '413', 'content', 'application/json', 'schema', 'allOf')).toEqual([
      { $ref: '#/components/schemas/Error' },
      { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: ['LIMIT_EXCEEDED'] } } } } },
    ]);
    expect(dig(responses, '401', 'headers', 'WWW-Authenticate', 'required')).toBe(true);
    expect(dig(responses, '201', 'headers', 'X-Request-Id')).toEqual({ $ref: '#/components/headers/X-Request-Id' });
    const health = build().paths['/healthz']?.get?.responses as Record<string, unknown>;
    expect(Object.keys(health)).toEqual(['200', '500']);
  });

  it('documents raw request bodies as binary, path parameters by their schemas, and wire booleans as booleans', () => {
    const op = build([
      {
        method: 'put',
        path: '/files/:scope/:name',
        operationId: 'putFile',
        summary: 'Put',
        consumes: 'application/octet-stream',
        params: z.object({ scope: z.enum(['task', 'user']) }),
        query: z.object({ trash: z.stringbool().meta({ type: 'boolean' }).optional() }),
      },
    ]).paths['/files/{scope}/{name}']?.put;
    expect(dig(op, 'requestBody', 'content', 'application/octet-stream', 'schema')).toEqual({
      type: 'string',
      format: 'binary',
      contentMediaType: 'application/octet-stream',
    });
    expect(op?.parameters).toEqual([
      { name: 'scope', in: 'path', required: true, schema: { type: 'string', enum: ['task', 'user'] } },
      { name: 'name', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'trash', in: 'query', required: false, schema: { type: 'boolean' } },
    ]);
  });

  it('documents Idempotency-Key, the replay headers and the in-flight 409 with Retry-After on idempotent routes', () => {
    const route = ROUTES[0] as RouteDoc;
    const op = build([{ ...route, idempotent: true, errors: ['CONFLICT', 'STALE_LEASE'] }]).paths['/v1/runs/{id}/checkpoints']?.post;
    expect(op?.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }));
    expect(dig(op, 'responses', '201', 'headers', 'Idempotent-Replayed', 'schema')).toEqual({ type: 'string', const: 'true' });
    expect(dig(op, 'responses', '409', 'headers', 'Retry-After')).toBeDefined();
    expect(dig(op, 'responses', '409', 'description')).toBe('`CONFLICT`, `STALE_LEASE`');
  });
});
