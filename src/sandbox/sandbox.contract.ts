import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeOf } from '../testkit/code-of.js';
import type { SandboxHandle, SandboxProvider } from './sandbox-provider.js';

/** How a provider's test file plugs into the shared suite. */
export interface SandboxProviderContractOptions {
  /** Provider name shown in the test titles. */
  readonly name: string;
  /** Opens a provider over fresh, empty state; `cleanup` destroys whatever it created. */
  readonly create: () => Promise<{ provider: SandboxProvider; cleanup(): Promise<void> }>;
  /** A second, independent instance over the same state as the last `create`; required when `resume` is declared. */
  readonly reopen?: () => SandboxProvider;
  /** Stops a sandbox behind the provider's back, for providers whose sandboxes can be `stopped` (docker). */
  readonly stop?: (id: string) => Promise<void>;
}

const MiB = 1024 * 1024;
const BIG_BYTES = 50 * MiB;

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A command whose background child appends to `file` every 100 ms until it is killed. */
function heartbeat(file: string): string[] {
  return ['sh', '-c', `while true; do echo x >> ${file}; sleep 0.1; done & sleep 100`];
}

/** Asserts nothing appends to `file` any more: the whole process tree is dead. */
async function expectHeartbeatStopped(sandbox: SandboxHandle, file: string): Promise<void> {
  await sleep(300);
  const size = async (): Promise<number> => Number.parseInt((await sandbox.run(['wc', '-c', file])).stdout.toString(), 10);
  const before = await size();
  expect(before).toBeGreaterThan(0);
  await sleep(500);
  expect(await size()).toBe(before);
}

/** Every capability key; the contract checks that each is a declared boolean. */
const CAPABILITY_KEYS = [
  'exec',
  'stdin',
  'resume',
  'localPath',
  'nativeSnapshots',
  'durableFilesystem',
  'killableProcesses',
  'networkIsolation',
] as const;
/** How long a sandboxed connect may take before it counts as not connected. */
const CONNECT_TIMEOUT_MS = 1500;

/**
 * `stdin`, both ways: declared, bytes written reach the command and `'pipe'` streams; not
 * declared, the command sees empty stdin whatever is passed.
 */
export async function checkStdin(provider: SandboxProvider, sandbox: SandboxHandle): Promise<void> {
  const bytes = randomBytes(64 * 1024);
  const result = await sandbox.run(['sha256sum'], { stdin: bytes });
  const empty = sha256(Buffer.alloc(0));
  expect(result.stdout.toString().split(' ')[0]).toBe(provider.capabilities.stdin ? sha256(bytes) : empty);
  const proc = sandbox.exec(['cat'], { stdin: 'pipe' });
  proc.stdin?.end('piped\n');
  const [out] = await Promise.all([readAll(proc.stdout), proc.exit, proc.stderr.resume()]);
  expect(out.toString()).toBe(provider.capabilities.stdin ? 'piped\n' : '');
}

/**
 * `resume`: a sandbox written through one instance is found with its files by a second
 * instance over the same state (`reopen`), and, where the provider has stopped sandboxes, after
 * being stopped behind its back (`stop`): listed as `stopped`, then resumed by `get`.
 */
export async function checkResume(
  provider: SandboxProvider,
  reopen: (() => SandboxProvider) | undefined,
  stop: ((id: string) => Promise<void>) | undefined,
): Promise<void> {
  if (!provider.capabilities.resume) return;
  expect(reopen, 'a provider declaring resume must give the contract a reopen()').toBeDefined();
  const made = await provider.create({ labels: { role: 'resume' } });
  try {
    expect((await made.run(['sh', '-c', 'echo resumed > r.txt && echo home > "$HOME/h.txt"'])).code).toBe(0);
    const other = (reopen as () => SandboxProvider)();
    const found = await other.get(made.id);
    expect((await found?.run(['cat', 'r.txt']))?.stdout.toString()).toBe('resumed\n');
    if (stop !== undefined) {
      await stop(made.id);
      expect((await other.list()).find((info) => info.id === made.id)?.state).toBe('stopped');
      const resumed = await other.get(made.id);
      expect((await resumed?.run(['sh', '-c', 'cat r.txt "$HOME/h.txt"']))?.stdout.toString()).toBe('resumed\nhome\n');
      expect((await other.list()).find((info) => info.id === made.id)?.state).toBe('running');
    }
  } finally {
    await provider.destroy(made.id);
  }
}

/** `localPath`, both ways: a file written by exec is at that host path; without it there is no path. */
export async function checkLocalPath(provider: SandboxProvider, sandbox: SandboxHandle): Promise<void> {
  expect(sandbox.localPath === undefined).toBe(!provider.capabilities.localPath);
  if (!provider.capabilities.localPath) return;
  const name = `local-${randomBytes(4).toString('hex')}.txt`;
  expect((await sandbox.run(['sh', '-c', `echo on-host > ${name}`])).code).toBe(0);
  const fs = await import('node:fs/promises');
  expect(await fs.readFile(`${sandbox.localPath}/${name}`, 'utf8')).toBe('on-host\n');
}

/** `killableProcesses`: `kill()` stops a command's background child too (the heartbeat stops). */
export async function checkKillableProcesses(provider: SandboxProvider, sandbox: SandboxHandle): Promise<void> {
  if (!provider.capabilities.killableProcesses) return;
  const file = `beat-check-${randomBytes(4).toString('hex')}`;
  const proc = sandbox.exec(heartbeat(file));
  proc.stdout.resume();
  proc.stderr.resume();
  await sleep(300);
  proc.kill();
  expect((await proc.exit).code === 0).toBe(false);
  await expectHeartbeatStopped(sandbox, file);
}

/** The host's addresses a sandbox might reach it on: loopback and every other IPv4 interface. */
function hostAddresses(): string[] {
  const addresses = ['127.0.0.1'];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const entry of list ?? []) if (entry.family === 'IPv4' && !entry.internal) addresses.push(entry.address);
  }
  return addresses;
}

/**
 * `networkIsolation`, both ways: the test listens on every host interface; a fresh sandbox of
 * an isolating provider connects to none of the host's addresses (and the listener accepts
 * nothing), one of a non-isolating provider reaches at least one. Uses `node` in the sandbox.
 */
export async function checkNetworkIsolation(provider: SandboxProvider): Promise<void> {
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const sandbox = await provider.create({ labels: { role: 'network' } });
  try {
    const probe = `const net = require('node:net');
      const hosts = process.argv.slice(1);
      Promise.all(hosts.map((host) => new Promise((resolve) => {
        const s = net.connect({ host, port: ${port}, timeout: ${CONNECT_TIMEOUT_MS} });
        s.once('connect', () => { s.destroy(); resolve(host + ' connected'); });
        s.once('timeout', () => { s.destroy(); resolve(host + ' timeout'); });
        s.once('error', (e) => resolve(host + ' ' + e.code));
      }))).then((lines) => console.log(lines.join('\\n')));`;
    const result = await sandbox.run(['node', '-e', probe, ...hostAddresses()]);
    expect(result.code).toBe(0);
    const connected = result.stdout
      .toString()
      .split('\n')
      .filter((line) => line.endsWith(' connected'));
    if (provider.capabilities.networkIsolation) {
      expect(connected).toEqual([]);
      expect(accepted).toBe(0);
    } else {
      expect(connected.length).toBeGreaterThan(0);
    }
  } finally {
    server.close();
    await provider.destroy(sandbox.id);
  }
}

/**
 * The SandboxProvider contract: every provider runs every case against real sandboxes; there is
 * no way to skip one. Every declared capability is checked by the `check…` function of the
 * same name, both ways where the absence is observable; a provider that declares what it
 * lacks fails.
 */
export function describeSandboxProviderContract(options: SandboxProviderContractOptions): void {
  describe(`SandboxProvider contract: ${options.name}`, () => {
    let provider: SandboxProvider;
    let sandbox: SandboxHandle;
    let cleanup: () => Promise<void> = async () => undefined;

    beforeAll(async () => {
      const opened = await options.create();
      provider = opened.provider;
      cleanup = opened.cleanup;
      sandbox = await provider.create({ labels: { suite: 'contract' }, env: { SPEC_VAR: 'from-spec' } });
    });
    afterAll(async () => {
      await cleanup();
    });

    it('declares its capabilities as booleans, with exec, and the workspace roots it can host', async () => {
      for (const key of CAPABILITY_KEYS) expect(typeof provider.capabilities[key]).toBe('boolean');
      expect(provider.capabilities.exec).toBe(true);
      // workspaceRootsUnder: the one path every sandbox's workspace is at, or null when each has its own.
      const under = provider.capabilities.workspaceRootsUnder;
      if (under !== null) expect(sandbox.workspaceRoot).toBe(under);
      else {
        const other = await provider.create({ labels: { role: 'roots' } });
        try {
          expect(other.workspaceRoot).not.toBe(sandbox.workspaceRoot);
        } finally {
          await provider.destroy(other.id);
        }
      }
      expect(sandbox.provider).toBe(provider.name);
    });

    it('capability stdin: as declared', async () => {
      await checkStdin(provider, sandbox);
    });

    it('capability resume: another instance finds the sandbox (and resumes a stopped one)', async () => {
      await checkResume(provider, options.reopen, options.stop);
    });

    it('capability localPath: files written by exec are at the host path', async () => {
      await checkLocalPath(provider, sandbox);
    });

    it('capability killableProcesses: kill() takes the background heartbeat down', async () => {
      await checkKillableProcesses(provider, sandbox);
    }, 30_000);

    it('capability networkIsolation: as declared, against a listener on every host interface', async () => {
      await checkNetworkIsolation(provider);
    }, 30_000);

    it('create, get, list and destroy; destroy is idempotent and get is undefined afterwards', async () => {
      const made = await provider.create({ labels: { role: 'lifecycle' } });
      expect((await provider.get(made.id))?.id).toBe(made.id);
      const listed = (await provider.list()).find((info) => info.id === made.id);
      expect(listed).toMatchObject({ id: made.id, provider: provider.name, labels: { role: 'lifecycle' }, state: 'running' });
      expect(listed?.createdAt).toBeGreaterThan(0);
      await provider.destroy(made.id);
      expect(await provider.get(made.id)).toBeUndefined();
      expect((await provider.list()).some((info) => info.id === made.id)).toBe(false);
      await provider.destroy(made.id);
      expect(await codeOf(() => made.exec(['true']))).toBe('NOT_FOUND');
      expect(await provider.get('no-such-sandbox')).toBeUndefined();
      expect(await provider.get('../../etc')).toBeUndefined();
    });

    it('takes a caller-chosen id and labels, returned by create, get and list; a taken id is ALREADY_EXISTS', async () => {
      const id = `contract-${randomBytes(6).toString('hex')}`;
      const made = await provider.create({ id, labels: { thread: 't-1', 'run/id': 'r.2' } });
      try {
        expect(made.id).toBe(id);
        expect(made.labels).toEqual({ thread: 't-1', 'run/id': 'r.2' });
        expect((await provider.get(id))?.labels).toEqual({ thread: 't-1', 'run/id': 'r.2' });
        expect((await provider.list()).find((info) => info.id === id)?.labels).toEqual({ thread: 't-1', 'run/id': 'r.2' });
        expect((await made.run(['sh', '-c', 'echo mine > mine.txt'])).code).toBe(0);
        expect(await codeOf(provider.create({ id, labels: { thread: 'intruder' } }))).toBe('ALREADY_EXISTS');
        // The refused create changed nothing of the sandbox that holds the id.
        const again = await provider.get(id);
        expect(again?.labels).toEqual({ thread: 't-1', 'run/id': 'r.2' });
        expect((await again?.run(['cat', 'mine.txt']))?.stdout.toString()).toBe('mine\n');
      } finally {
        await provider.destroy(id);
      }
      expect(await provider.get(id)).toBeUndefined();
      expect(sandbox.labels).toEqual({ suite: 'contract' });
    });

    it('attack: a sandbox id that escapes, shouts or overflows is INVALID_INPUT and creates nothing', async () => {
      const before = (await provider.list()).length;
      for (const id of ['../escape', '/abs', 'UPPER', '-dash', 'a'.repeat(65), 'has space', 'dot.ted', '', 'new\nline', 'x/y']) {
        expect(await codeOf(provider.create({ id })), JSON.stringify(id)).toBe('INVALID_INPUT');
      }
      expect((await provider.list()).length).toBe(before);
    });

    it("exposes a started command's pid as the sandbox sees it", async () => {
      const proc = sandbox.exec(['sh', '-c', 'echo $$; sleep 0.5']);
      proc.stderr.resume();
      const [out, pid] = await Promise.all([readAll(proc.stdout), proc.pid, proc.exit]);
      expect(pid).toBeGreaterThan(0);
      expect(out.toString().trim()).toBe(String(pid));
    }, 30_000);

    it('kill(signal) delivers the signal, which the command may handle; an unknown signal is INVALID_INPUT', async () => {
      const proc = sandbox.exec(['sh', '-c', 'trap "echo got-term; exit 3" TERM; echo ready; while true; do sleep 0.1; done']);
      proc.stderr.resume();
      const ready = new Promise<void>((resolve) => proc.stdout.once('data', () => resolve()));
      const out = readAll(proc.stdout);
      await ready;
      expect(await codeOf(() => proc.kill('SIGBOGUS' as 'SIGTERM'))).toBe('INVALID_INPUT');
      proc.kill('SIGTERM');
      const exit = await proc.exit;
      expect(exit.code).toBe(3);
      expect((await out).toString()).toBe('ready\ngot-term\n');
      proc.kill('SIGTERM');
    }, 30_000);

    it('rejects bad input with codes: empty argv, bad env names, bad labels', async () => {
      expect(await codeOf(() => sandbox.exec([]))).toBe('INVALID_INPUT');
      expect(await codeOf(() => sandbox.exec(['true'], { env: { 'BAD=NAME': 'x' } }))).toBe('INVALID_INPUT');
      expect(await codeOf(() => provider.create({ labels: { 'bad label': 'x' } }))).toBe('INVALID_INPUT');
    });

    it('passes argv without shell interpretation', async () => {
      const args = ['$HOME', '*', 'two words', '$(id)', "'quoted'", '; echo no', ''];
      const result = await sandbox.run(['printf', '%s\\n', ...args]);
      expect(result.code).toBe(0);
      expect(result.stdout.toString()).toBe(args.map((a) => `${a}\n`).join(''));
    });

    it('reports exit codes; a missing command exits non-zero without throwing', async () => {
      expect((await sandbox.run(['true'])).code).toBe(0);
      expect((await sandbox.run(['sh', '-c', 'exit 7'])).code).toBe(7);
      const missing = await sandbox.run(['holdfast-no-such-command']);
      expect(missing.code).not.toBe(0);
      expect(missing.timedOut).toBe(false);
    });

    it('streams stdout and stderr separately, before the command exits', async () => {
      const proc = sandbox.exec(['sh', '-c', 'echo first; echo oops >&2; read line; echo "got $line"'], { stdin: 'pipe' });
      const first = await new Promise<string>((resolve) => proc.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString())));
      expect(first).toBe('first\n');
      const rest = readAll(proc.stdout);
      const err = readAll(proc.stderr);
      proc.stdin?.end('hello\n');
      // Without stdin the command reads end of file at once (checked both ways by the stdin capability).
      expect((await rest).toString()).toBe(provider.capabilities.stdin ? 'got hello\n' : 'got \n');
      expect((await err).toString()).toBe('oops\n');
      expect(await proc.exit).toEqual({ code: 0, signal: null, timedOut: false });
    });

    it('moves 50 MB through cat byte-equal, from a buffer and from a stream (nothing, without stdin)', async () => {
      const bytes = randomBytes(BIG_BYTES);
      const expected = provider.capabilities.stdin ? bytes : Buffer.alloc(0);
      const fromBuffer = sandbox.exec(['cat'], { stdin: bytes });
      const [out, exit] = await Promise.all([readAll(fromBuffer.stdout), fromBuffer.exit, fromBuffer.stderr.resume()]);
      expect(exit.code).toBe(0);
      expect(out.length).toBe(expected.length);
      expect(sha256(out)).toBe(sha256(expected));

      const chunks = Array.from({ length: BIG_BYTES / MiB }, (_, i) => bytes.subarray(i * MiB, (i + 1) * MiB));
      const fromStream = sandbox.exec(['sha256sum'], { stdin: Readable.from(chunks) });
      const [digest] = await Promise.all([readAll(fromStream.stdout), fromStream.exit]);
      expect(digest.toString().split(' ')[0]).toBe(sha256(expected));
    }, 120_000);

    it('sets env (allowlist + spec + exec), HOME and cwd; host variables do not leak', async () => {
      process.env.HOLDFAST_TEST_LEAK = 'leaked';
      try {
        const result = await sandbox.run(['sh', '-c', 'echo "$SPEC_VAR|$EXEC_VAR|$HOME|$PATH|$HOLDFAST_TEST_LEAK"; pwd -P'], {
          env: { EXEC_VAR: 'from-exec' },
        });
        const [vars, cwd] = result.stdout.toString().split('\n');
        const [spec, exec, home, pathVar, leak] = (vars ?? '').split('|');
        expect({ spec, exec, home, leak, cwd }).toEqual({
          spec: 'from-spec',
          exec: 'from-exec',
          home: sandbox.agentHome,
          leak: '',
          cwd: sandbox.workspaceRoot,
        });
        expect(pathVar).not.toBe('');
        const env = (await sandbox.run(['env'])).stdout.toString();
        expect(env).not.toContain('HOLDFAST_TEST_LEAK');
      } finally {
        delete process.env.HOLDFAST_TEST_LEAK;
      }
      expect((await sandbox.run(['mkdir', '-p', 'sub/dir'])).code).toBe(0);
      expect((await sandbox.run(['pwd', '-P'], { cwd: 'sub/dir' })).stdout.toString()).toBe(`${sandbox.workspaceRoot}/sub/dir\n`);
      expect((await sandbox.run(['pwd', '-P'], { cwd: `${sandbox.workspaceRoot}/sub` })).stdout.toString()).toBe(
        `${sandbox.workspaceRoot}/sub\n`,
      );
      expect((await sandbox.run(['true'], { cwd: 'no/such/dir' })).code).not.toBe(0);
    });

    it('keeps files between execs, in the workspace and the agent home, also through get()', async () => {
      expect((await sandbox.run(['sh', '-c', 'echo kept > kept.txt && echo home > "$HOME/home.txt"'])).code).toBe(0);
      const again = await provider.get(sandbox.id);
      expect(again).toBeDefined();
      const result = await again?.run(['sh', '-c', 'cat kept.txt "$HOME/home.txt"']);
      expect(result?.stdout.toString()).toBe('kept\nhome\n');
    });

    it('runs node', async () => {
      const result = await sandbox.run(['node', '-e', 'process.stdout.write(String(6 * 7))']);
      expect({ code: result.code, out: result.stdout.toString() }).toEqual({ code: 0, out: '42' });
    });

    it('a timeout kills the whole process tree', async () => {
      const result = await sandbox.run(heartbeat('beat-timeout'), { timeoutMs: 500 });
      expect(result.timedOut).toBe(true);
      expect(result.code === 0).toBe(false);
      await expectHeartbeatStopped(sandbox, 'beat-timeout');
    }, 30_000);

    it('an abort signal kills the whole process tree, also when aborted before exec', async () => {
      const controller = new AbortController();
      const proc = sandbox.exec(heartbeat('beat-abort'), { signal: controller.signal });
      proc.stdout.resume();
      proc.stderr.resume();
      setTimeout(() => controller.abort(), 300);
      const exit = await proc.exit;
      expect(exit.timedOut).toBe(false);
      expect(exit.code === 0).toBe(false);
      await expectHeartbeatStopped(sandbox, 'beat-abort');
      const early = await sandbox.run(['sleep', '100'], { signal: AbortSignal.abort() });
      expect(early.code === 0).toBe(false);
    }, 30_000);

    it('kill() kills the whole process tree', async () => {
      const proc = sandbox.exec(heartbeat('beat-kill'));
      proc.stdout.resume();
      proc.stderr.resume();
      await sleep(300);
      proc.kill();
      expect((await proc.exit).code === 0).toBe(false);
      proc.kill();
      await expectHeartbeatStopped(sandbox, 'beat-kill');
    }, 30_000);

    it('destroy kills running execs', async () => {
      const doomed = await provider.create();
      const proc = doomed.exec(heartbeat('beat'));
      proc.stdout.resume();
      proc.stderr.resume();
      await sleep(300);
      await provider.destroy(doomed.id);
      expect((await proc.exit).code === 0).toBe(false);
      expect(await provider.get(doomed.id)).toBeUndefined();
    }, 30_000);

    it('run() bounds buffered output with LIMIT_EXCEEDED', async () => {
      const small = await sandbox.run(['head', '-c', '1000', '/dev/zero'], { maxOutputBytes: 1000 });
      expect(small.stdout.length).toBe(1000);
      const big = () => sandbox.run(['head', '-c', String(4 * MiB), '/dev/zero'], { maxOutputBytes: MiB });
      expect(await codeOf(big)).toBe('LIMIT_EXCEEDED');
    });
  });
}
