import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isHoldfastError } from '../src/errors.js';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { storeEnvironment } from './support/cli-env.js';
import { HOLDFAST_BIN, runHoldfast } from './support/serve-process.js';
import { openTestService, type TestService } from './support/service.js';

/**
 * One schema per deployment-spec shape: the library (`Deployments.create`), the HTTP body
 * (`POST /v1/deployments`) and the CLI (`holdfast deployment create`) refuse the same bad
 * input with the same code and the same `data.field` path.
 */
interface Case {
  readonly name: string;
  readonly spec: Record<string, unknown>;
  /** The same spec as `deployment create` flags; absent where the CLI has no flag for the field. */
  readonly flags?: readonly string[];
  readonly field: string;
}

const CASES: readonly Case[] = [
  {
    name: 'a NUL in the second argument of the third setup command',
    spec: { provider: 'bwrap', setup: [['true'], ['true'], ['echo', 'a\u0000b']] },
    flags: ['--setup', '["true"]', '--setup', '["true"]', '--setup', '["echo","a\\u0000b"]'],
    field: 'setup[2][1]',
  },
  {
    name: 'an empty setup command',
    spec: { provider: 'bwrap', setup: [['true'], []] },
    flags: ['--setup', '["true"]', '--setup', '[]'],
    field: 'setup[1]',
  },
  {
    name: 'a relative workspace root',
    spec: { provider: 'bwrap', workspaceRoot: 'ws' },
    flags: ['--workspace-root', 'ws'],
    field: 'workspaceRoot',
  },
  {
    name: 'a variable name a shell cannot hold',
    spec: { provider: 'bwrap', env: { 'BAD-NAME': 'x' } },
    flags: ['--env', 'BAD-NAME=x'],
    field: 'env.BAD-NAME',
  },
  { name: 'an unknown cwd', spec: { provider: 'bwrap', cwd: '/tmp' }, flags: ['--cwd', '/tmp'], field: 'cwd' },
  { name: 'a provider name with capitals', spec: { provider: 'Bwrap' }, flags: [], field: 'provider' },
  { name: 'an unknown limit', spec: { provider: 'bwrap', limits: { disk: 1 } }, field: 'limits.disk' },
  { name: 'a fractional pid limit', spec: { provider: 'bwrap', limits: { pids: 1.5 } }, field: 'limits.pids' },
  { name: 'an unknown field', spec: { provider: 'bwrap', shell: 'bash' }, field: 'shell' },
];

describe('deployment specs: one schema, the same code and data.field from the library, HTTP and the CLI', () => {
  let svc: TestService;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    expect(fs.existsSync(HOLDFAST_BIN), `${HOLDFAST_BIN} is missing: run npm run build first (npm test does)`).toBe(true);
    svc = await openTestService(BACKENDS[0] as BackendCase, { scopePrefix: 'deployment-spec-entries' });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-deployment-spec-entries-'));
    env = storeEnvironment(dir);
  });
  afterAll(async () => {
    await svc?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each(CASES)('$name: INVALID_INPUT naming $field', async ({ spec, flags, field }) => {
    const library = await (await svc.hf.forTenant('default')).deployments.create(spec as never).catch((e: unknown) => e);
    expect(isHoldfastError(library, 'INVALID_INPUT')).toBe(true);
    expect((library as { data: unknown }).data).toEqual({ field });

    const http = await svc.api('POST', '/v1/deployments', spec);
    expect(http.status).toBe(400);
    expect(http.body.error).toMatchObject({ code: 'INVALID_INPUT', data: { field } });

    if (flags === undefined) return;
    const provider = typeof spec.provider === 'string' ? spec.provider : 'bwrap';
    const cli = await runHoldfast(['--json', 'deployment', 'create', '--provider', provider, ...flags], env);
    expect(cli.code).not.toBe(0);
    expect((JSON.parse(cli.stderr) as { error: unknown }).error).toMatchObject({ code: 'INVALID_INPUT', data: { field } });
  });

  it('too many setup commands is LIMIT_EXCEEDED from the library and the CLI, naming setup', async () => {
    const setup = Array.from({ length: 33 }, () => ['true']);
    const library = await (await svc.hf.forTenant('default')).deployments.create({ provider: 'bwrap', setup }).catch((e: unknown) => e);
    expect(library).toMatchObject({ code: 'LIMIT_EXCEEDED', data: { field: 'setup' } });
    const cli = await runHoldfast(
      ['--json', 'deployment', 'create', '--provider', 'bwrap', ...setup.flatMap(() => ['--setup', '["true"]'])],
      env,
    );
    expect((JSON.parse(cli.stderr) as { error: unknown }).error).toMatchObject({ code: 'LIMIT_EXCEEDED', data: { field: 'setup' } });
  });
});
