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

describe('the OpenAPI document', () => {
  let svc: TestService;
  let doc: { components: Record<string, Record<string, unknown>> };
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
});
