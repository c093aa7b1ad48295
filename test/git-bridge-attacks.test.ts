import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast, type Run, type TurnContext } from '../src/index.js';
import type { RunLogEvent } from '../src/runs/run-log-event.js';
import { GitRelayHost } from '../src/sandbox/agent/host/git-relay-host.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { gitImage } from './support/docker-images.js';
import { GIT_IDENTITY, gitShell, hostGit, seedRemote } from './support/git-fixture.js';
import { type GitServer, type SeenRequest, selfSignedCertificate, startGitDaemon, startGitHttp } from './support/git-servers.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';
import { ALNUM, generator } from './support/secret-samples.js';

/**
 * git from the sandbox, attacked from inside the sandbox (issue 29 point 6): a process in a
 * run's sandbox talks to the relay's socket directly with hand-made HTTP, pushes what it
 * should not, keeps going after its run, or plays a hostile relay that floods the host with
 * frames. Every case asserts codes and statuses, and whether the remote was reached (the test
 * server counts each request), never message text.
 */

const backend = BACKENDS[0] as BackendCase;
const secrets = generator(29_61);
const PASSWORD = secrets(ALNUM, 32);
const USER = 'tester';
const BASIC = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
const HOME = '/home/agent';
const REPO = `${HOME}/repos/remote`;
const SOCKET = `${HOME}/.holdfast/git-relay.sock`;
/** The operator's caps and bounds for these tests: small, so an attack crosses them quickly. */
const MAX_PACK_BYTES = 1024 * 1024;
const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 3_000;

/** What the remote test server does, changed by a test and put back after it. */
interface Behaviour {
  redirectTo?: string;
  extraHeaders?: Record<string, string>;
  requireAuthorization?: string;
}

/**
 * The attacker: a Node script in the sandbox that connects to the relay's socket, writes `head`
 * (then `bodyBytes` zero bytes, or `trickle` every `everyMs` for at most `maxMs`) and prints
 * what came back and how the connection ended (`closed`: by the host, after an answer a reset
 * too; `error`: a failure before any answer; `gave-up`: the trickle ran out first).
 */
const ATTACKER_JS = `
const net = require('node:net');
const s = JSON.parse(process.argv[1]);
const got = [];
let done = false;
let timer;
const c = net.connect(s.socket);
const finish = (how) => {
  if (done) return;
  done = true;
  clearInterval(timer);
  process.stdout.write(JSON.stringify({ how, response: Buffer.concat(got).toString('base64') }), () => process.exit(0));
  c.destroy();
};
c.on('data', (d) => got.push(d));
c.on('close', () => finish('closed'));
// The host answering and hanging up while a trickle is still being written can surface as a
// reset of the write rather than a close: after an answer, that is the host closing too.
c.on('error', (e) => finish(got.length > 0 && (e.code === 'EPIPE' || e.code === 'ECONNRESET') ? 'closed' : 'error'));
c.on('connect', () => {
  c.write(Buffer.from(s.head, 'base64'));
  if (s.bodyBytes) c.write(Buffer.alloc(s.bodyBytes, 48));
  if (s.trickle) {
    let sent = 0;
    timer = setInterval(() => {
      sent += s.everyMs;
      if (sent > s.maxMs) finish('gave-up');
      else c.write(s.trickle);
    }, s.everyMs);
  }
});
setTimeout(() => finish('timeout'), (s.maxMs || 0) + 60000);
`;

interface Answer {
  readonly how: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly raw: string;
}

interface AttackSpec {
  readonly head: string;
  readonly bodyBytes?: number;
  readonly trickle?: string;
  readonly everyMs?: number;
  readonly maxMs?: number;
}

async function attack(ctx: Pick<TurnContext, 'sandbox'>, spec: AttackSpec): Promise<Answer> {
  const arg = JSON.stringify({ ...spec, socket: SOCKET, head: Buffer.from(spec.head, 'latin1').toString('base64') });
  const r = await ctx.sandbox.run(['node', '-e', ATTACKER_JS, arg], { timeoutMs: 120_000 });
  expect(r.code).toBe(0);
  const out = JSON.parse(r.stdout.toString('utf8')) as { how: string; response: string };
  const raw = Buffer.from(out.response, 'base64').toString('latin1');
  const end = raw.indexOf('\r\n\r\n');
  const lines = (end < 0 ? raw : raw.slice(0, end)).split('\r\n');
  const status = /^HTTP\/1\.[01] ([0-9]{3})/.exec(lines[0] ?? '')?.[1];
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { how: out.how, status: status === undefined ? 0 : Number(status), headers, raw };
}

/** A request line and headers as git would send them (or not), closed after the answer. */
function request(method: string, target: string, headers: Readonly<Record<string, string>> = {}): string {
  const all = { Host: '127.0.0.1', Connection: 'close', ...headers };
  return `${method} ${target} HTTP/1.1\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}

const sh = gitShell;

function openAttackRuns(sandboxes: RunProviderCase) {
  const state = {} as {
    opened: OpenedBackends;
    provider: SandboxProvider;
    hf: Holdfast;
    server: GitServer & { seen: SeenRequest[] };
    behaviour: Behaviour;
    target: GitServer & { seen: SeenRequest[] };
    events: RunLogEvent[];
  };
  beforeAll(async () => {
    state.opened = await backend.open();
    state.provider = sandboxes.open(state.opened.dir);
    const tls = selfSignedCertificate(state.opened.dir);
    seedRemote(state.opened.dir);
    hostGit(state.opened.dir, ['clone', '--quiet', '--bare', 'remote.git', 'other.git']);
    // The server reads its options on every request: a test changes the remote's behaviour through them.
    state.behaviour = { requireAuthorization: BASIC };
    state.server = await startGitHttp(state.opened.dir, Object.assign(state.behaviour, { tls }));
    state.target = await startGitHttp(state.opened.dir);
    state.events = [];
    state.hf = await openHoldfast({
      blobs: state.opened.blobs,
      meta: state.opened.meta,
      cacheDir: path.join(state.opened.dir, 'cache'),
      providers: () => state.provider,
      onRunEvent: (e) => state.events.push(e),
      runSettings: { leaseTtlMs: 600_000, heartbeatMs: 200_000 },
      git: {
        allowedHosts: ['127.0.0.1'],
        protocols: ['https', 'git'],
        allowPrivateAddresses: true,
        caFile: tls.certFile,
        credentials: [{ host: '127.0.0.1', username: USER, token: PASSWORD }],
        maxPackBytes: MAX_PACK_BYTES,
      },
      gitRelay: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS },
    });
  }, 120_000);
  afterAll(async () => {
    await state.hf?.close();
    await state.server?.close();
    await state.target?.close();
    for (const s of (await state.provider?.list()) ?? []) await state.provider.destroy(s.id);
    await state.opened?.cleanup();
  }, 120_000);
  const createRun = async (repo = 'remote.git'): Promise<Run> => {
    const image = sandboxes.image();
    const deployment = await state.hf.deployments.create({ provider: sandboxes.name, ...(image === null ? {} : { image }) });
    return state.hf.runs.create({ deploymentId: deployment.id, bindings: { repos: [{ url: state.server.url(repo) }] } });
  };
  /** The remote's requests made while `body` ran. */
  const reached = async <T>(body: () => Promise<T>): Promise<{ value: T; seen: SeenRequest[]; targetSeen: SeenRequest[] }> => {
    const before = state.server.seen.length;
    const targetBefore = state.target.seen.length;
    const value = await body();
    return { value, seen: state.server.seen.slice(before), targetSeen: state.target.seen.slice(targetBefore) };
  };
  const refs = (repo: string) => hostGit(state.opened.dir, ['--git-dir', repo, 'for-each-ref', '--format=%(refname) %(objectname)']);
  const bridgeRequests = async (runId: string) =>
    (await state.hf.runs.events(runId))
      .filter((e) => e.kind === 'git_bridge' && e.step === 'request')
      .map((e) => e.data as { binding: string | null; service: string | null; method: string; status: number; code?: string });
  return { state, createRun, reached, refs, bridgeRequests };
}

describe('attacks on git from the sandbox (bwrap)', () => {
  const { state, createRun, reached, refs, bridgeRequests } = openAttackRuns(BWRAP_RUNS);
  let run: Run;
  beforeAll(async () => {
    run = await createRun();
    // Its first turn restores the checkout (the host's clone); every attack comes after.
    await state.hf.runs.turn(run.id, async () => undefined);
    // Another run of the same tenant, bound to another repository: its binding is not this run's.
    await createRun('other.git');
  }, 120_000);

  it('the relay is there for plain git (the baseline every attack departs from)', async () => {
    const out = await state.hf.runs.turn(run.id, async (ctx) => ({
      git: await sh(ctx, REPO, 'git ls-remote origin HEAD'),
      raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-upload-pack') }),
    }));
    expect(out.value.git.code).toBe(0);
    expect(out.value.raw.status).toBe(200);
    expect(out.value.raw.headers['content-type']).toBe('application/x-git-upload-pack-advertisement');
  }, 120_000);

  it('refuses another binding, another run binding and every path trick NOT_FOUND, without reaching any remote', async () => {
    const port = state.server.port;
    const targets = [
      '/nope/info/refs?service=git-upload-pack',
      '/other/info/refs?service=git-upload-pack',
      '/other.git/info/refs?service=git-upload-pack',
      '/remote/../other/info/refs?service=git-upload-pack',
      '/remote/%2e%2e/other/info/refs?service=git-upload-pack',
      '/%2e%2e/other.git/info/refs?service=git-upload-pack',
      '/remote%2f..%2fother/info/refs?service=git-upload-pack',
      '/remote/./info/refs?service=git-upload-pack',
      '//remote/info/refs?service=git-upload-pack',
      '/remote//info/refs?service=git-upload-pack',
      '/remote/info/refs?service=git-upload-pack&x=/../../other',
      '/remote/info/refs?service=git-upload-pack#/../other',
      '/remote/info/refs?service=git-upload-pack%00',
      `https://127.0.0.1:${port}/remote.git/info/refs?service=git-upload-pack`,
      `http://127.0.0.1:${port}/remote/info/refs?service=git-upload-pack`,
      '*',
    ];
    // Not even a request target: Node's own parser refuses it (400) before the bridge sees it.
    const unparsable = ['127.0.0.1/remote/info/refs?service=git-upload-pack', '/remote/info/refs?service=git upload-pack'];
    const { value, seen, targetSeen } = await reached(() =>
      state.hf.runs.turn(run.id, async (ctx) => {
        const answers: Answer[] = [];
        for (const target of targets) answers.push(await attack(ctx, { head: request('GET', target) }));
        const parser: number[] = [];
        for (const target of unparsable) parser.push((await attack(ctx, { head: request('GET', target) })).status);
        return { answers, parser };
      }),
    );
    expect(value.value.parser).toEqual(unparsable.map(() => 400));
    for (const [i, answer] of value.value.answers.entries()) {
      expect({ target: targets[i], status: answer.status, code: answer.headers['x-holdfast-error'] }).toEqual({
        target: targets[i],
        status: 404,
        code: 'NOT_FOUND',
      });
    }
    expect(seen).toEqual([]);
    expect(targetSeen).toEqual([]);
  }, 120_000);

  it('a Host header naming another host changes nothing: the host calls the bound remote, with the operator credential, not the sandbox one', async () => {
    const forged = `Basic ${Buffer.from(`intruder:${secrets(ALNUM, 24)}`).toString('base64')}`;
    const { value, seen } = await reached(() =>
      state.hf.runs.turn(run.id, (ctx) =>
        attack(ctx, {
          head: request('GET', '/remote/info/refs?service=git-upload-pack', {
            Host: '169.254.169.254',
            'X-Forwarded-Host': 'evil.example',
            Authorization: forged,
            Cookie: 'session=stolen',
          }),
        }),
      ),
    );
    expect(value.value.status).toBe(200);
    expect(seen).toEqual([
      { method: 'GET', url: '/remote.git/info/refs?service=git-upload-pack', authorization: BASIC, host: `127.0.0.1:${state.server.port}` },
    ]);
  }, 120_000);

  it('refuses every endpoint that is not a smart-HTTP call (dumb HTTP, other services, wrong method or body type), without reaching the remote', async () => {
    const cases: ReadonlyArray<[method: string, target: string, headers: Record<string, string>, status: number, code: string]> = [
      ['GET', '/remote/HEAD', {}, 404, 'NOT_FOUND'],
      ['GET', '/remote/objects/info/packs', {}, 404, 'NOT_FOUND'],
      ['GET', '/remote/objects/info/alternates', {}, 404, 'NOT_FOUND'],
      ['GET', '/remote/info/refs', {}, 404, 'NOT_FOUND'],
      ['GET', '/remote/info/refs?service=git-upload-archive', {}, 404, 'NOT_FOUND'],
      ['GET', '/remote/config', {}, 404, 'NOT_FOUND'],
      ['POST', '/remote/git-upload-archive', {}, 404, 'NOT_FOUND'],
      ['POST', '/remote/info/refs?service=git-receive-pack', {}, 405, 'METHOD_NOT_ALLOWED'],
      ['GET', '/remote/git-upload-pack', {}, 405, 'METHOD_NOT_ALLOWED'],
      ['PUT', '/remote/git-receive-pack', {}, 405, 'METHOD_NOT_ALLOWED'],
      ['DELETE', '/remote/git-receive-pack', {}, 405, 'METHOD_NOT_ALLOWED'],
      ['POST', '/remote/git-receive-pack', { 'Content-Type': 'text/plain', 'Content-Length': '0' }, 400, 'INVALID_INPUT'],
      [
        'POST',
        '/remote/git-upload-pack',
        { 'Content-Type': 'application/x-git-upload-pack-request', 'Content-Encoding': 'br', 'Content-Length': '0' },
        400,
        'INVALID_INPUT',
      ],
    ];
    const { value, seen } = await reached(() =>
      state.hf.runs.turn(run.id, async (ctx) => {
        const answers: Answer[] = [];
        for (const [method, target, headers] of cases) answers.push(await attack(ctx, { head: request(method, target, headers) }));
        return answers;
      }),
    );
    for (const [i, answer] of value.value.entries()) {
      const [method, target, , status, code] = cases[i] as (typeof cases)[number];
      expect({ method, target, status: answer.status, code: answer.headers['x-holdfast-error'] }).toEqual({ method, target, status, code });
    }
    expect(seen).toEqual([]);
  }, 120_000);

  it('refuses a body over the operator cap: a declared one before the remote is reached, a streamed one (a real push) with the remote unchanged', async () => {
    const before = refs('remote.git');
    const { value, seen } = await reached(() =>
      state.hf.runs.turn(run.id, (ctx) =>
        attack(ctx, {
          head: request('POST', '/remote/git-receive-pack', {
            'Content-Type': 'application/x-git-receive-pack-request',
            'Content-Length': String(2 * MAX_PACK_BYTES),
          }),
          bodyBytes: 2 * MAX_PACK_BYTES,
        }),
      ),
    );
    // The host answers 413 and closes while the sandbox is still sending: the sandbox reads the
    // answer, or (its socket reset under its unread bytes) only the cut; the host's record says which.
    if (value.value.status !== 0) {
      expect({ status: value.value.status, code: value.value.headers['x-holdfast-error'] }).toEqual({
        status: 413,
        code: 'LIMIT_EXCEEDED',
      });
    }
    expect((await bridgeRequests(run.id)).at(-1)).toMatchObject({
      service: 'git-receive-pack',
      method: 'POST',
      status: 413,
      code: 'LIMIT_EXCEEDED',
    });
    expect(seen).toEqual([]);

    // git itself streams a big push chunked: the host cuts it at the cap, nothing lands.
    const pushed = await state.hf.runs.turn(run.id, (ctx) =>
      sh(
        ctx,
        REPO,
        'git checkout --quiet -b big && head -c 3145728 /dev/urandom > big.bin && git add big.bin && git commit --quiet -m big && git push --quiet origin HEAD:refs/heads/big',
      ),
    );
    expect(pushed.value.code).not.toBe(0);
    expect(refs('remote.git')).toBe(before);
    const requests = await bridgeRequests(run.id);
    expect(requests).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ binding: 'remote', service: 'git-receive-pack', method: 'POST', code: 'LIMIT_EXCEEDED' }),
      ]),
    );
  }, 180_000);

  it('closes a slow-loris request: headers trickled past the headers timeout (408), a body trickled past the request deadline (504 TIMEOUT)', async () => {
    const { value, seen } = await reached(() =>
      state.hf.runs.turn(run.id, async (ctx) => ({
        headers: await attack(ctx, {
          head: 'GET /remote/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: 127.0.0.1\r\n',
          trickle: 'X-Slow: 1\r\n',
          everyMs: 100,
          maxMs: 60_000,
        }),
        // Hex digits announce a pkt-line that never completes: the remote keeps waiting too.
        body: await attack(ctx, {
          head: request('POST', '/remote/git-upload-pack', {
            'Content-Type': 'application/x-git-upload-pack-request',
            'Transfer-Encoding': 'chunked',
          }),
          trickle: '1\r\n9\r\n',
          everyMs: 100,
          maxMs: 60_000,
        }),
      })),
    );
    expect({ how: value.value.headers.how, status: value.value.headers.status }).toEqual({ how: 'closed', status: 408 });
    expect({ how: value.value.body.how, status: value.value.body.status, code: value.value.body.headers['x-holdfast-error'] }).toEqual({
      how: 'closed',
      status: 504,
      code: 'TIMEOUT',
    });
    expect((await bridgeRequests(run.id)).at(-1)).toMatchObject({
      service: 'git-upload-pack',
      method: 'POST',
      status: 504,
      code: 'TIMEOUT',
    });
    // Only the body's call reached the remote (its headers were whole); the trickled head never did.
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /remote.git/git-upload-pack']);
  }, 180_000);

  it('follows no redirect of the remote (403 FORBIDDEN); the place it points to is never reached', async () => {
    state.behaviour.redirectTo = `http://127.0.0.1:${state.target.port}`;
    try {
      const { value, seen, targetSeen } = await reached(() =>
        state.hf.runs.turn(run.id, async (ctx) => ({
          raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-upload-pack') }),
          git: await sh(ctx, REPO, 'git ls-remote origin HEAD'),
        })),
      );
      expect({ status: value.value.raw.status, code: value.value.raw.headers['x-holdfast-error'] }).toEqual({
        status: 403,
        code: 'FORBIDDEN',
      });
      expect(value.value.raw.headers.location).toBeUndefined();
      expect(value.value.git.code).not.toBe(0);
      expect(seen.length).toBeGreaterThan(0);
      expect(targetSeen).toEqual([]);
    } finally {
      delete state.behaviour.redirectTo;
    }
  }, 120_000);

  it('never lets the remote smuggle cookies, credentials or auth challenges back into the sandbox', async () => {
    const smuggled = secrets(ALNUM, 40);
    state.behaviour.extraHeaders = {
      'Set-Cookie': `session=${smuggled}`,
      Authorization: `Bearer ${smuggled}`,
      'Proxy-Authorization': `Bearer ${smuggled}`,
      'WWW-Authenticate': `Bearer realm="${smuggled}"`,
      'Proxy-Authenticate': 'Basic realm="x"',
      Location: `http://evil.example/${smuggled}`,
      Link: `<http://evil.example/${smuggled}>`,
      'X-Smuggled': smuggled,
    };
    try {
      const ok = await state.hf.runs.turn(run.id, (ctx) =>
        attack(ctx, { head: request('GET', '/remote/info/refs?service=git-upload-pack') }),
      );
      expect(ok.value.status).toBe(200);
      for (const name of Object.keys(ok.value.headers)) {
        expect(['content-type', 'cache-control', 'expires', 'pragma', 'connection', 'date', 'transfer-encoding']).toContain(name);
      }
      expect(ok.value.raw.includes(smuggled)).toBe(false);

      // A challenge (the operator's credential refused) reaches the sandbox as 403, with no challenge to answer.
      state.behaviour.requireAuthorization = `Basic ${Buffer.from(`${USER}:${secrets(ALNUM, 32)}`).toString('base64')}`;
      const challenged = await state.hf.runs.turn(run.id, async (ctx) => ({
        raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-upload-pack') }),
        git: await sh(ctx, REPO, 'GIT_TERMINAL_PROMPT=0 git ls-remote origin HEAD'),
      }));
      expect({ status: challenged.value.raw.status, code: challenged.value.raw.headers['x-holdfast-error'] }).toEqual({
        status: 403,
        code: 'UNAUTHORIZED',
      });
      expect(challenged.value.raw.headers['www-authenticate']).toBeUndefined();
      expect(challenged.value.raw.raw.includes(smuggled)).toBe(false);
      expect(challenged.value.git.code).not.toBe(0);
    } finally {
      delete state.behaviour.extraHeaders;
      state.behaviour.requireAuthorization = BASIC;
    }
  }, 120_000);

  it('refuses a push once the lease moved (STALE_LEASE) or the run ended (CONFLICT); the remote is unchanged', async () => {
    const before = refs('remote.git');
    const moved = await createRun();
    const ended = await createRun();
    // Their first turns restore the checkouts (the host's clones); the attacks come after.
    for (const r of [moved, ended]) await state.hf.runs.turn(r.id, async () => undefined);
    const meta = state.opened.meta;
    const push = 'echo x > x.txt && git add x.txt && git commit --quiet -m x && git push --quiet origin HEAD:refs/heads/after';
    const attempt = async (id: string, intrude: () => Promise<unknown>) => {
      let seenInTurn: { raw: Answer; git: { code: number | null } } | undefined;
      await state.hf.runs
        .turn(id, async (ctx) => {
          await intrude();
          seenInTurn = {
            raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-receive-pack') }),
            git: await sh(ctx, REPO, push),
          };
        })
        .catch(() => undefined);
      return seenInTurn as { raw: Answer; git: { code: number | null } };
    };
    const { value, seen } = await reached(async () => ({
      moved: await attempt(moved.id, async () => {
        const current = await meta.runs.get(moved.id);
        await meta.runs.release(moved.id, current.lease.epoch);
        expect(await meta.runs.claim(moved.id, 'intruder', 600_000)).toBeDefined();
      }),
      ended: await attempt(ended.id, () => meta.runs.end(ended.id)),
    }));
    expect({ status: value.moved.raw.status, code: value.moved.raw.headers['x-holdfast-error'] }).toEqual({
      status: 403,
      code: 'STALE_LEASE',
    });
    expect({ status: value.ended.raw.status, code: value.ended.raw.headers['x-holdfast-error'] }).toEqual({
      status: 403,
      code: 'CONFLICT',
    });
    expect(value.moved.git.code).not.toBe(0);
    expect(value.ended.git.code).not.toBe(0);
    expect(seen).toEqual([]);
    expect(refs('remote.git')).toBe(before);
  }, 180_000);

  it('refuses a binding that is not http(s) REPOSITORY_UNSUPPORTED (501): git:// is cloned by the host, never bridged', async () => {
    const daemon = await startGitDaemon(state.opened.dir);
    try {
      const image = BWRAP_RUNS.image();
      const deployment = await state.hf.deployments.create({ provider: 'bwrap', ...(image === null ? {} : { image }) });
      const gitRun = await state.hf.runs.create({ deploymentId: deployment.id, bindings: { repos: [{ url: daemon.url('remote.git') }] } });
      const out = await state.hf.runs.turn(gitRun.id, async (ctx) => ({
        raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-upload-pack') }),
        git: await sh(ctx, REPO, 'git ls-remote origin HEAD'),
      }));
      expect({ status: out.value.raw.status, code: out.value.raw.headers['x-holdfast-error'] }).toEqual({
        status: 501,
        code: 'REPOSITORY_UNSUPPORTED',
      });
      expect(out.value.git.code).not.toBe(0);
      expect((await bridgeRequests(gitRun.id)).map((r) => r.code)).toEqual(['REPOSITORY_UNSUPPORTED', 'REPOSITORY_UNSUPPORTED']);
    } finally {
      await daemon.close();
    }
  }, 120_000);

  it('stops a relay that floods the host with frames (LIMIT_EXCEEDED) and keeps serving the run', async () => {
    /** A hostile relay in the sandbox: says ready, then writes `frames` (header objects, payload bytes) `times` times. */
    const FLOOD_JS = `
const [kind] = process.argv.slice(1);
const frame = (h, p = Buffer.alloc(0)) => {
  const j = Buffer.from(JSON.stringify(h));
  const b = Buffer.alloc(8);
  b.writeUInt32BE(j.length + p.length, 0);
  b.writeUInt32BE(j.length, 4);
  return Buffer.concat([b, j, p]);
};
process.stdout.write(frame({ t: 'ready' }));
const out = [];
if (kind === 'stray') for (let i = 0; i < 5000; i++) out.push(frame({ t: 'data', c: 100000 + i }, Buffer.alloc(16)));
if (kind === 'churn') for (let i = 1; i <= 5000; i++) out.push(frame({ t: 'open', c: i }), frame({ t: 'close', c: i }));
if (kind === 'opens') for (let i = 1; i <= 5000; i++) out.push(frame({ t: 'open', c: i }));
if (kind === 'junk') { out.push(frame({ t: 'open', c: 1 })); for (let i = 0; i < 5000; i++) out.push(frame({ t: 'data', c: 1 }, Buffer.alloc(60000, 120))); }
if (kind === 'huge') { const b = Buffer.alloc(8); b.writeUInt32BE(0xfffffff0, 0); b.writeUInt32BE(16, 4); out.push(b); }
if (kind === 'garbage') for (let i = 0; i < 5000; i++) out.push(frame({ x: 1 }), frame([1]));
const all = Buffer.concat(out);
let at = 0;
const pump = () => { while (at < all.length) { const next = all.subarray(at, at + 65536); at += next.length; if (!process.stdout.write(next)) { process.stdout.once('drain', pump); return; } } };
pump();
setInterval(() => {}, 1000);
`;
    const kinds = ['stray', 'churn', 'opens', 'junk', 'huge', 'garbage'] as const;
    const { value, seen } = await reached(() =>
      state.hf.runs.turn(run.id, async (ctx) => {
        const results: Record<string, { code: string | undefined; handled: number }> = {};
        for (const kind of kinds) {
          let handled = 0;
          const stopped = new Promise<string>((resolve) => {
            GitRelayHost.over(ctx.sandbox.exec(['node', '-e', FLOOD_JS, kind], { stdin: 'pipe' }), {
              handler: (_req, res) => {
                handled += 1;
                res.end();
              },
              onStopped: (error) => resolve(error.code),
            }).catch((error: { code?: string }) => resolve(`start:${error.code}`));
          });
          results[kind] = { code: await stopped, handled };
        }
        // The run's own relay, beside the floods, still answers plain git.
        const git = await sh(ctx, REPO, 'git ls-remote origin HEAD');
        return { results, git };
      }),
    );
    expect(value.value.results).toEqual({
      stray: { code: 'LIMIT_EXCEEDED', handled: 0 },
      churn: { code: 'LIMIT_EXCEEDED', handled: 0 },
      opens: { code: 'LIMIT_EXCEEDED', handled: 0 },
      junk: { code: 'LIMIT_EXCEEDED', handled: 0 },
      huge: { code: 'LIMIT_EXCEEDED', handled: 0 },
      garbage: { code: 'LIMIT_EXCEEDED', handled: 0 },
    });
    expect(value.value.git.code).toBe(0);
    // What reached a remote was that git, on the bound remote.
    expect(seen.length).toBeGreaterThan(0);
    for (const r of seen) expect(r.url.startsWith('/remote.git/')).toBe(true);
  }, 180_000);
});

describe('attacks on git from the sandbox (docker)', () => {
  const { state, createRun, refs } = openAttackRuns(dockerRuns('gitbridge-attacks', gitImage));

  it('pushes nothing once the run ended: the relay is gone, git with the turn settings and a raw request both fail, the remote is unchanged', async () => {
    const before = refs('remote.git');
    const run = await createRun();
    // The turn keeps its git settings (the bridge's PATH and GIT_CONFIG_*) for later, and checks it could push then.
    const during = await state.hf.runs.turn(run.id, async (ctx) => ({
      saved: await sh(ctx, REPO, 'export -p > /tmp/turn-env.sh && git ls-remote origin HEAD'),
      raw: await attack(ctx, { head: request('GET', '/remote/info/refs?service=git-receive-pack') }),
    }));
    expect(during.value.saved.code).toBe(0);
    expect(during.value.raw.status).toBe(200);
    await state.hf.runs.end(run.id, { keepSandbox: true });
    const id = (await state.opened.meta.runs.get(run.id)).sandbox?.id;
    const sandbox = id === undefined ? undefined : await state.provider.get(id);
    expect(sandbox).toBeDefined();
    if (sandbox === undefined) return;
    const seenBefore = state.server.seen.length;
    // Whatever runs in the container after the run (docker ends an exec's leftovers with it): git as the turn had it.
    const late = await sandbox.run(
      [
        'sh',
        '-c',
        '. /tmp/turn-env.sh && cd "$1" && echo y > y.txt && git add y.txt && git commit --quiet -m y && git push --quiet origin HEAD:refs/heads/after-end',
        'sh',
        REPO,
      ],
      { env: { ...GIT_IDENTITY }, timeoutMs: 120_000 },
    );
    expect(late.code).not.toBe(0);
    const raw = await attack({ sandbox }, { head: request('GET', '/remote/info/refs?service=git-receive-pack') });
    expect(raw.how).toBe('error');
    expect(state.server.seen.slice(seenBefore)).toEqual([]);
    expect(refs('remote.git')).toBe(before);
  }, 240_000);
});
