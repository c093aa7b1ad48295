/**
 * A client generated from the LIVE document, as a user of the API would make one: a real
 * `holdfast serve` answers `GET /v1/openapi.json`, openapi-typescript turns it into types,
 * the project's tsc compiles those with a client program on the openapi-fetch runtime
 * (`support/client-codegen/scenario.ts.in`: strict settings, no casts), and the program runs a
 * scenario against the same server: a deployment on the local provider, a run created twice
 * with one Idempotency-Key (the retry is the replay), a turn, the checkpoint listing, a file
 * downloaded as bytes, and a work-folder file written and read back as bytes. Hashes are
 * compared, never text.
 *
 * `@hey-api/openapi-ts` is not exercised here: its current release needs Node 22.18 or later,
 * and the project supports Node 20.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliStore, openCliStore, type ServeProcess } from './support/serve-process.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CODEGEN = path.join(root, 'test', 'support', 'client-codegen');
/** The project's compiler (TypeScript 7: a compiler, with no JS API). */
const TSC = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
/** The tenant `holdfast token create` makes a token of by default. */
const TENANT = 'default';
/** Generating, compiling and running the scenario each get this long. */
const STEP_TIMEOUT_MS = 120_000;

/**
 * The client's compiler settings: the project's own strictness (`tsconfig.json`), so the
 * generated types must hold up under `exactOptionalPropertyTypes` and `noUncheckedIndexedAccess`.
 */
const CLIENT_TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2023'],
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    verbatimModuleSyntax: true,
    noImplicitReturns: true,
    outDir: 'out',
    rootDir: '.',
  },
  files: ['schema.ts', 'scenario.ts'],
};

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(command, [...args], { env, timeout: STEP_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

/** What the scenario program prints. */
interface ScenarioReport {
  readonly deploymentId: string;
  readonly run: { readonly id: string; readonly status: number };
  readonly retry: { readonly id: string; readonly status: number; readonly replayed: string | null };
  readonly turn: { readonly exitCode: number | null; readonly checkpointId: string; readonly status: string };
  readonly checkpoints: readonly string[];
  readonly download: { readonly sha256: string; readonly expected: string };
  readonly folder: {
    readonly written: string | null;
    readonly read: string;
    readonly expected: string;
    readonly listed: readonly string[];
  };
}

describe('a client generated from the live OpenAPI document (openapi-typescript + openapi-fetch)', () => {
  let store: CliStore;
  let server: ServeProcess | undefined;
  let token: string;
  /** Where the client project is built: under node_modules, so it resolves openapi-fetch and @types/node as a client would. */
  let work: string;

  beforeAll(async () => {
    store = openCliStore('hf-generated-client-');
    token = (await store.holdfast(['--quiet', 'token', 'create'])).trim();
    server = await store.serve();
    const cache = path.join(root, 'node_modules', '.cache');
    fs.mkdirSync(cache, { recursive: true });
    work = fs.mkdtempSync(path.join(cache, 'holdfast-generated-client-'));
  });
  afterAll(async () => {
    await server?.stop();
    store?.cleanup();
    if (work !== undefined) fs.rmSync(work, { recursive: true, force: true });
  });

  it('generates types from GET /v1/openapi.json, compiles them with a client program, and drives a run end to end', async () => {
    const served = await fetch(`${server?.url}/v1/openapi.json`);
    expect(served.status).toBe(200);
    fs.writeFileSync(path.join(work, 'openapi.json'), Buffer.from(await served.arrayBuffer()));

    const generated = await run(process.execPath, [
      path.join(CODEGEN, 'generate.mjs'),
      path.join(work, 'openapi.json'),
      path.join(work, 'schema.ts'),
    ]);
    expect({ code: generated.code, stderr: generated.stderr }).toEqual({ code: 0, stderr: '' });
    // Raw bodies and downloads are bytes in the generated types, not strings a client would JSON-encode.
    const types = fs.readFileSync(path.join(work, 'schema.ts'), 'utf8');
    expect(types).toMatch(/"application\/octet-stream": Blob;/);

    fs.copyFileSync(path.join(CODEGEN, 'scenario.ts.in'), path.join(work, 'scenario.ts'));
    fs.writeFileSync(path.join(work, 'package.json'), `${JSON.stringify({ type: 'module', private: true })}\n`);
    fs.writeFileSync(path.join(work, 'tsconfig.json'), `${JSON.stringify(CLIENT_TSCONFIG, null, 2)}\n`);
    const compiled = await run(process.execPath, [TSC, '-p', path.join(work, 'tsconfig.json')]);
    expect({ code: compiled.code, diagnostics: compiled.stdout + compiled.stderr }).toEqual({ code: 0, diagnostics: '' });

    const env = { ...process.env, HOLDFAST_URL: server?.url, HOLDFAST_TOKEN: token, HOLDFAST_TENANT: TENANT };
    const ran = await run(process.execPath, [path.join(work, 'out', 'scenario.js')], env);
    expect({ code: ran.code, stderr: ran.stderr }).toEqual({ code: 0, stderr: '' });
    const report = JSON.parse(ran.stdout) as ScenarioReport;
    expect(report.deploymentId).toMatch(/^[0-9a-f]{64}$/);
    expect(report.run.status).toBe(201);
    // The retry with the same Idempotency-Key is the first answer, replayed.
    expect(report.retry).toEqual({ id: report.run.id, status: 201, replayed: 'true' });
    expect(report.turn).toMatchObject({ exitCode: 0, status: 'ready' });
    expect(report.checkpoints).toContain(report.turn.checkpointId);
    expect(report.download.sha256).toBe(report.download.expected);
    expect(report.folder.written).toBe(report.folder.expected);
    expect(report.folder.read).toBe(report.folder.expected);
    expect(report.folder.listed).toEqual(['data', 'data/blob.bin']);
  });
});
