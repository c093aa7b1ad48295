/**
 * The OpenAPI document the server serves, linted by a real OpenAPI linter: `redocly lint` with
 * the recommended rules as `redocly.yaml` configures them (every rule turned off there says why).
 * The test fails on any error or warning, so a new problem cannot slip in as "only a warning".
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

const run = promisify(execFile);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The linter's entry point, run with the Node under test (so CI's second Node lints too). */
const REDOCLY_BIN = path.join(path.dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js');
/** Components nothing references on purpose (see redocly.yaml). */
const UNREFERENCED_COMPONENTS = new Set(['#/components/responses/MethodNotAllowed']);

interface LintReport {
  readonly totals: { readonly errors: number; readonly warnings: number; readonly ignored: number };
  readonly problems: readonly { readonly ruleId: string; readonly message: string; readonly location?: unknown }[];
}

interface Parameter {
  readonly name: string;
  readonly in: string;
  readonly schema: Record<string, unknown>;
}
interface Operation {
  readonly operationId: string;
  readonly parameters?: readonly Parameter[];
  readonly requestBody?: { readonly content: Record<string, { readonly schema?: Record<string, unknown> }> };
  readonly responses: Record<string, { readonly content?: Record<string, { readonly schema?: Record<string, unknown> }> }>;
}

/** Every operation of the document with its method and path. */
function operationsOf(paths: Record<string, Record<string, Operation>>): { method: string; path: string; op: Operation }[] {
  return Object.entries(paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method, path, op })));
}

describe('the OpenAPI document', () => {
  let svc: TestService;
  let doc: {
    components: Record<string, Record<string, unknown>>;
    servers: unknown[];
    paths: Record<string, Record<string, Operation>>;
  };
  let text: string;

  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
    const response = await svc.app.request('/v1/openapi.json');
    expect(response.status).toBe(200);
    text = await response.text();
    doc = JSON.parse(text);
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('passes redocly lint (recommended rules, redocly.yaml) with no error and no warning', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-openapi-lint-'));
    try {
      const file = path.join(dir, 'openapi.json');
      await fs.writeFile(file, text);
      const args = [REDOCLY_BIN, 'lint', '--config', path.join(REPO, 'redocly.yaml'), '--format=json', file];
      // A failed lint exits 1 and still prints its report: read it either way.
      const { stdout, exitCode } = await run(process.execPath, args, { cwd: dir, maxBuffer: 64 * 1024 * 1024 }).then(
        (out) => ({ stdout: out.stdout, exitCode: 0 }),
        (error: { stdout?: string; code?: number }) => ({ stdout: error.stdout ?? '', exitCode: error.code ?? -1 }),
      );
      const report = JSON.parse(stdout) as LintReport;
      expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
      expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
      expect(exitCode).toBe(0);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('references every component but the ones redocly.yaml names', () => {
    const unreferenced: string[] = [];
    for (const [kind, components] of Object.entries(doc.components)) {
      for (const name of Object.keys(components)) {
        const ref = `#/components/${kind}/${name}`;
        if (kind !== 'securitySchemes' && !text.includes(`"${ref}"`) && !UNREFERENCED_COMPONENTS.has(ref)) unreferenced.push(ref);
      }
    }
    expect(unreferenced).toEqual([]);
  });

  it('is fit for generated clients: no ignored header parameters, one spelling per header, typed path and flag parameters, binary bodies', async () => {
    const ops = operationsOf(doc.paths);
    const headers = ops.flatMap(({ op }) => (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name));
    // OpenAPI ignores a Content-Type (Accept, Authorization) parameter: a client that omits it sends JSON and gets 415.
    expect(headers.filter((name) => ['content-type', 'accept', 'authorization'].includes(name.toLowerCase()))).toEqual([]);
    const spellings = new Map<string, Set<string>>();
    for (const name of headers) spellings.set(name.toLowerCase(), (spellings.get(name.toLowerCase()) ?? new Set()).add(name));
    expect([...spellings.values()].filter((names) => names.size > 1).map((names) => [...names])).toEqual([]);
    expect(spellings.get('idempotency-key')).toEqual(new Set(['Idempotency-Key']));
    const folderOps = ops.filter(({ path }) => path.startsWith('/api/companies/{companyId}/work-folders/'));
    expect(folderOps.length).toBeGreaterThan(0);
    for (const { op } of folderOps) {
      expect({ op: op.operationId, scope: op.parameters?.find((p) => p.name === 'scope')?.schema }).toEqual({
        op: op.operationId,
        scope: { type: 'string', enum: ['task', 'agent', 'user', 'project'] },
      });
    }
    const list = folderOps.find(({ op }) => op.operationId === 'listFolderFiles')?.op;
    expect(list?.parameters?.find((p) => p.name === 'trash')?.schema).toMatchObject({ type: 'boolean' });
    const binary = { type: 'string', format: 'binary' };
    for (const { op } of ops) {
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        if (type !== 'application/json') expect({ op: op.operationId, type, schema: media.schema }).toMatchObject({ schema: binary });
      }
    }
    const download = (id: string) => ops.find(({ op }) => op.operationId === id)?.op.responses;
    expect(download('downloadCheckpointFile')?.['200']?.content?.['application/octet-stream']?.schema).toMatchObject(binary);
    expect(download('downloadFolderFile')?.['200']?.content?.['*/*']?.schema).toMatchObject(binary);
    expect(download('downloadFolderFile')?.['206']?.content?.['*/*']?.schema).toMatchObject(binary);
    // The server a generated client starts from is where `holdfast serve` listens by default.
    const { stdout } = await run(process.execPath, [path.join(REPO, 'dist', 'bin', 'main.js'), 'serve', '--help']);
    const server = doc.servers[0] as { url: string; variables: Record<string, { default: string }> };
    const url = server.url.replace(/\{(\w+)\}/g, (_m, name: string) => server.variables[name]?.default ?? '');
    expect(stdout).toContain(new URL(url).hostname);
    expect(stdout).toContain(new URL(url).port);
  });
});
