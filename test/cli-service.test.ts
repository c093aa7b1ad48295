import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openHoldfast } from '../src/index.js';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { hashToken } from '../src/tenants/tokens.js';
import { storeEnvironment } from './support/cli-env.js';
import { type CliRun, HOLDFAST_BIN, runHoldfast } from './support/serve-process.js';

/** How long `serve` may take to print its listening line, and to exit after SIGTERM. */
const SERVE_START_TIMEOUT_MS = 15_000;
const SERVE_STOP_TIMEOUT_MS = 5_000;

describe('holdfast serve, token, run and lease (compiled bin)', () => {
  let dir: string;
  let env: Record<string, string>;
  const holdfast = (args: string[]): Promise<CliRun> => runHoldfast(args, env);
  const config = () => loadConfig({ env });
  const errorCode = (run: CliRun): unknown => (JSON.parse(run.stderr) as { error: { code: string } }).error.code;

  beforeAll(() => {
    expect(fs.existsSync(HOLDFAST_BIN), `${HOLDFAST_BIN} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-cli-service-'));
    env = storeEnvironment(dir);
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('token create prints a live token once; list hides secrets; revoke kills it', async () => {
    const plain = await holdfast(['token', 'create', '--tenant', 'acme', '--name', 'ci']);
    expect(plain.code).toBe(0);
    const token = plain.stdout.trim();
    expect(token).toMatch(/^holdfast_[0-9A-Za-z]{49}$/);

    const meta = await openMetadataStore(config().meta);
    try {
      const row = await meta.tokens.findByHash(hashToken(token));
      expect(row).toMatchObject({ tenantName: 'acme', name: 'ci', admin: false, revokedAt: null });

      const json = await holdfast(['--json', 'token', 'create', '--admin']);
      expect(json.code).toBe(0);
      const created = JSON.parse(json.stdout) as { id: string; tenant: string; name: string; admin: boolean; token: string };
      expect(created).toMatchObject({ tenant: 'default', admin: true });
      expect((await meta.tokens.findByHash(hashToken(created.token)))?.id).toBe(created.id);

      const list = await holdfast(['--json', 'token', 'list']);
      expect(list.code).toBe(0);
      const tokens = JSON.parse(list.stdout) as Record<string, unknown>[];
      expect(tokens.map((t) => t.id)).toEqual(expect.arrayContaining([row?.id, created.id]));
      for (const t of tokens) {
        expect(t).not.toHaveProperty('hash');
        expect(t).not.toHaveProperty('token');
      }
      expect(list.stdout).not.toContain(token);

      const revoked = await holdfast(['token', 'revoke', row?.id ?? '']);
      expect(revoked.code).toBe(0);
      expect(await meta.tokens.findByHash(hashToken(token))).toBeUndefined();
      const again = await holdfast(['--json', 'token', 'revoke', row?.id ?? '']);
      expect(again.code).toBe(1);
      expect(errorCode(again)).toBe('NOT_FOUND');
    } finally {
      await meta.close();
    }
  });

  it('token revoke of an unknown id exits 1 with NOT_FOUND; a bad flag is a usage error', async () => {
    const run = await holdfast(['--json', 'token', 'revoke', 'no-such-token']);
    expect(run.code).toBe(1);
    expect(errorCode(run)).toBe('NOT_FOUND');
    expect((await holdfast(['token', 'create', '--no-such-flag'])).code).toBe(2);
    expect((await holdfast(['serve', '--port', 'x'])).code).toBe(2);
  });

  it('lease resolve, run ls and run show work on runs of any tenant', async () => {
    const hf = await openHoldfast({ config: config() });
    let free: string;
    let stuck: string;
    try {
      const { deployments, runs } = await hf.forTenant('ops');
      const deployment = await deployments.create({ provider: 'local' });
      free = (await runs.create({ deploymentId: deployment.id })).id;
      stuck = (await runs.create({ deploymentId: deployment.id })).id;
      const claimed = await hf.meta.runs.claim(stuck, 'crashed-owner', 60_000);
      await hf.meta.runs.requireRecovery(stuck, claimed?.lease.epoch ?? -1, { reason: 'test' });
    } finally {
      await hf.close();
    }

    const conflict = await holdfast(['--json', 'lease', 'resolve', free]);
    expect(conflict.code).toBe(1);
    expect(errorCode(conflict)).toBe('CONFLICT');
    const missing = await holdfast(['--json', 'lease', 'resolve', 'no-such-run']);
    expect(missing.code).toBe(1);
    expect(errorCode(missing)).toBe('NOT_FOUND');

    const resolved = await holdfast(['--json', 'lease', 'resolve', stuck]);
    expect(resolved.code).toBe(0);
    const lease = JSON.parse(resolved.stdout) as { runId: string; tenant: string; lease: { state: string; epoch: number } };
    expect(lease).toMatchObject({ runId: stuck, tenant: 'ops', lease: { state: 'free', epoch: 2 } });

    const ls = await holdfast(['--json', 'run', 'ls', '--tenant', 'ops']);
    expect(ls.code).toBe(0);
    const listed = JSON.parse(ls.stdout) as { runs: { id: string }[]; nextCursor: string | null };
    expect(listed.runs.map((r) => r.id).sort()).toEqual([free, stuck].sort());
    expect(listed.nextCursor).toBeNull();
    const first = JSON.parse((await holdfast(['--json', 'run', 'ls', '--tenant', 'ops', '--limit', '1'])).stdout) as typeof listed;
    expect(first.runs).toHaveLength(1);
    const rest = await holdfast(['--json', 'run', 'ls', '--tenant', 'ops', '--cursor', String(first.nextCursor)]);
    expect((JSON.parse(rest.stdout) as typeof listed).runs.map((r) => r.id)).toEqual(listed.runs.slice(1).map((r) => r.id));
    expect(errorCode(await holdfast(['--json', 'run', 'ls', '--cursor', 'not-a-cursor']))).toBe('INVALID_INPUT');
    expect((await holdfast(['--json', 'run', 'ls', '--tenant', 'nobody'])).code).toBe(1);

    const show = await holdfast(['--json', 'run', 'show', stuck]);
    expect(show.code).toBe(0);
    const shown = JSON.parse(show.stdout) as {
      tenant: string;
      run: { id: string };
      events: { kind: string; step: string; status: string }[];
    };
    expect(shown.tenant).toBe('ops');
    expect(shown.run.id).toBe(stuck);
    expect(shown.events).toContainEqual(expect.objectContaining({ kind: 'lease', step: 'resolve', status: 'ok' }));
    const human = await holdfast(['run', 'show', stuck]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('DURATION_MS');
  });

  it('serve --port 0 --init listens, authenticates with the printed token, and stops on SIGTERM', async () => {
    // A fresh store: --init only creates a token when none is live.
    const store = fs.mkdtempSync(path.join(dir, 'serve-'));
    const child = spawn(process.execPath, [HOLDFAST_BIN, 'serve', '--port', '0', '--init'], {
      env: { ...env, HOLDFAST_META: `sqlite:${path.join(store, 'meta.db')}`, HOLDFAST_BLOBS: `file:${path.join(store, 'blobs')}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const { url, stderr } = await listening(child);
      const token = /admin token: (holdfast_[0-9A-Za-z]+)/.exec(stderr)?.[1];
      expect(token).toBeDefined();

      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect((await fetch(`${url}/v1/runs`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      expect((await fetch(`${url}/v1/runs`)).status).toBe(401);

      const exited = exitOf(child);
      child.kill('SIGTERM');
      expect(await Promise.race([exited, sleep(SERVE_STOP_TIMEOUT_MS).then(() => 'timeout')])).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it('serve runs the stray sweep on its timer and stops it before the shutdown report', async () => {
    const store = fs.mkdtempSync(path.join(dir, 'serve-sweep-'));
    const child = spawn(process.execPath, [HOLDFAST_BIN, 'serve', '--port', '0', '--init', '--stray-sweep-interval-ms', '50'], {
      env: {
        ...env,
        HOLDFAST_META: `sqlite:${path.join(store, 'meta.db')}`,
        HOLDFAST_BLOBS: `file:${path.join(store, 'blobs')}`,
        HOLDFAST_SANDBOX_DIR: path.join(store, 'sandboxes'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    const messages = () =>
      stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as { msg: string; straySweepIntervalMs?: number });
    try {
      await listening(child);
      for (let waited = 0; !messages().some((m) => m.msg === 'stray sweep finished'); waited += 50) {
        if (waited > SERVE_START_TIMEOUT_MS) throw new Error(`no sweep logged: ${stdout}`);
        await sleep(50);
      }
      expect(messages().find((m) => m.msg === 'listening')?.straySweepIntervalMs).toBe(50);
      const exited = exitOf(child);
      child.kill('SIGTERM');
      expect(await Promise.race([exited, sleep(SERVE_STOP_TIMEOUT_MS).then(() => 'timeout')])).toBe(0);
      const order = messages().map((m) => m.msg);
      const report = order.indexOf('shutdown report');
      expect(report).toBeGreaterThan(0);
      expect(order.slice(report)).not.toContain('stray sweep finished');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});

/**
 * Resolves with the URL of the `listening` log line on stdout once stderr holds the banner's
 * admin token line (written right after it).
 */
function listening(child: ChildProcess): Promise<{ url: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let url: string | undefined;
    const timer = setTimeout(() => reject(new Error(`serve did not listen: ${stdout}${stderr}`)), SERVE_START_TIMEOUT_MS);
    const check = (): void => {
      if (url === undefined || !/admin token: .*\n/.test(stderr)) return;
      clearTimeout(timer);
      resolve({ url, stderr });
    };
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      check();
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      // The last piece may be a line still being written.
      for (const line of stdout.split('\n').slice(0, -1)) {
        const record = JSON.parse(line) as { msg?: string; url?: string };
        if (record.msg === 'listening') url = record.url;
      }
      check();
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stdout}${stderr}`)));
  });
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
