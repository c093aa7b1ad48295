/**
 * Checks live HTTP answers against an OpenAPI 3.1 document with a real JSON Schema validator
 * (Ajv, draft 2020-12, the dialect of OpenAPI 3.1): the status must be documented for the
 * operation the request reached, the media type must be one it declares, the body must match
 * its schema and every declared header must be present when required and match when sent.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type Json = Record<string, unknown>;

/** Where the document's component schemas live for the validator (`#/components/schemas/X` is rewritten to it). */
const DEFS_ID = 'urn:holdfast:openapi';
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;
// ajv-formats is CommonJS: its default export is the plugin under ESM interop.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** One documented operation. */
export interface DocumentedOperation {
  readonly method: string;
  /** The OpenAPI path, `/v1/runs/{id}`. */
  readonly path: string;
  readonly operationId: string;
  readonly responses: Readonly<Record<string, Json>>;
}

/** What {@link OpenApiValidator.check} found: the operation and the answer, for the test to go on with. */
export interface CheckedAnswer {
  readonly operationId: string;
  readonly status: number;
  readonly headers: Headers;
  /** The parsed JSON body, the text of a text body, or the bytes of any other. */
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
  readonly body: any;
}

/** Validates answers against `doc`; throws an `Error` naming every mismatch. */
export class OpenApiValidator {
  readonly operations: readonly DocumentedOperation[];
  private readonly ajv: Ajv2020;
  private readonly matchers: readonly { readonly op: DocumentedOperation; readonly re: RegExp }[];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly doc: Json) {
    this.ajv = addFormats(new Ajv2020({ strict: true, allErrors: true }));
    // `format: binary` marks raw bytes (a body read as text is still a string of them).
    this.ajv.addFormat('binary', true);
    const components = (doc.components ?? {}) as Json;
    this.ajv.addSchema({ $id: DEFS_ID, $defs: rewriteRefs(components.schemas ?? {}) as Json });
    const operations: DocumentedOperation[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const method of HTTP_METHODS) {
        const op = item[method] as Json | undefined;
        if (op === undefined) continue;
        operations.push({ method, path, operationId: String(op.operationId), responses: op.responses as Record<string, Json> });
      }
    }
    this.operations = operations;
    this.matchers = operations.map((op) => ({ op, re: templateRegex(op.path) }));
  }

  /** The operation `method url` reaches; a literal segment beats a parameter (`/v1/runs/{id}` vs `/v1/runs/x/end`). */
  operationFor(method: string, url: string): DocumentedOperation | undefined {
    const path = new URL(url, 'http://x').pathname;
    const found = this.matchers.filter((m) => m.op.method === method.toLowerCase() && m.re.test(path));
    return found.sort((a, b) => paramCount(a.op.path) - paramCount(b.op.path))[0]?.op;
  }

  /** Checks `response` to `method url` against its operation, and reads its body. */
  async check(method: string, url: string, response: Response): Promise<CheckedAnswer> {
    const op = this.operationFor(method, url);
    if (op === undefined) throw new Error(`${method} ${url} reaches no documented operation`);
    const where = `${op.operationId} (${method} ${url}) answered ${response.status}`;
    const documented = op.responses[String(response.status)];
    if (documented === undefined) {
      const text = (await response.text()).slice(0, 1000);
      throw new Error(`${where}, which it does not document (it documents ${Object.keys(op.responses).join(', ')}): ${text}`);
    }
    const body = await this.checkAnswer(where, response, this.resolve(documented));
    return { operationId: op.operationId, status: response.status, headers: response.headers, body };
  }

  /** Checks an answer against the component response `name` (`MethodNotAllowed`). */
  async checkComponent(name: string, response: Response): Promise<CheckedAnswer> {
    const responses = ((this.doc.components as Json).responses ?? {}) as Record<string, Json>;
    const documented = responses[name];
    if (documented === undefined) throw new Error(`no component response ${name}`);
    const body = await this.checkAnswer(`component ${name}`, response, documented);
    return { operationId: name, status: response.status, headers: response.headers, body };
  }

  private async checkAnswer(where: string, response: Response, documented: Json): Promise<unknown> {
    for (const [name, raw] of Object.entries((documented.headers ?? {}) as Record<string, Json>)) {
      const header = this.resolve(raw);
      const value = response.headers.get(name);
      if (value === null) {
        if (header.required === true) throw new Error(`${where} without its required header ${name}`);
        continue;
      }
      if (header.schema !== undefined) this.validate(`${where}: header ${name}`, header.schema as Json, value);
    }
    const bytes = Buffer.from(await response.arrayBuffer());
    const content = documented.content as Record<string, Json> | undefined;
    if (content === undefined) {
      if (bytes.length > 0) throw new Error(`${where} with a body, where none is documented`);
      return undefined;
    }
    const type = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    const key = Object.keys(content).find((range) => mediaMatches(range, type));
    if (key === undefined) throw new Error(`${where} as ${type || 'no type'}, not one of ${Object.keys(content).join(', ')}`);
    const schema = content[key]?.schema as Json | undefined;
    const body = type === 'application/json' ? parseJson(where, bytes) : type.startsWith('text/') ? bytes.toString('utf8') : bytes;
    // Bytes declared as bytes are checked by the media type alone: no JSON Schema describes them further.
    const bytesAsBytes = Buffer.isBuffer(body) && schema?.type === 'string' && schema.format === 'binary';
    if (schema !== undefined && !bytesAsBytes) this.validate(`${where}: body`, schema, body);
    return body;
  }

  private validate(where: string, schema: Json, value: unknown): void {
    const key = JSON.stringify(schema);
    let validator = this.compiled.get(key);
    if (validator === undefined) {
      validator = this.ajv.compile(rewriteRefs(schema) as Json);
      this.compiled.set(key, validator);
    }
    if (!validator(value)) {
      const errors = (validator.errors ?? [])
        .slice(0, 10)
        .map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
      throw new Error(`${where} does not match the document:\n  ${errors.join('\n  ')}\n  value: ${JSON.stringify(value).slice(0, 2000)}`);
    }
  }

  /** Follows a `#/components/…` reference of the document. */
  private resolve(value: Json): Json {
    const ref = value.$ref;
    if (typeof ref !== 'string') return value;
    let target: unknown = this.doc;
    for (const part of ref.replace(/^#\//, '').split('/')) target = (target as Json)[part];
    if (target === undefined) throw new Error(`unresolvable reference ${ref}`);
    return target as Json;
  }
}

function parseJson(where: string, bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new Error(`${where} with a body declared JSON that is not JSON`);
  }
}

/** Whether media range `range` (`application/json`, `text/*`, `*\/*`) covers `type`. */
function mediaMatches(range: string, type: string): boolean {
  if (range === '*/*') return type !== '';
  if (range.endsWith('/*')) return type.startsWith(range.slice(0, -1));
  return range.toLowerCase() === type;
}

function templateRegex(template: string): RegExp {
  const source = template
    .split(/(\{[^}]+\})/)
    .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`);
}

function paramCount(template: string): number {
  return (template.match(/\{/g) ?? []).length;
}

/** Points `#/components/schemas/X` at the validator's copy of the components. */
function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, child] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof child === 'string' && child.startsWith('#/components/schemas/')
        ? `${DEFS_ID}#/$defs/${child.slice('#/components/schemas/'.length)}`
        : rewriteRefs(child);
  }
  return out;
}
