import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Holdfast, openHoldfast } from '../src/index.js';
import type { RunLogEvent } from '../src/runs/run-log-event.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { busyboxImage, gitImage } from './support/docker-images.js';
import { gitShell, hostGit, seedRemote } from './support/git-fixture.js';
import { type GitServer, type SeenRequest, selfSignedCertificate, startGitHttp } from './support/git-servers.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';
import { ALNUM, generator } from './support/secret-samples.js';
import { withoutStdinProvider } from './support/shell-handles.js';

/**
 * git from the sandbox (issue 29 point 6): a smart-HTTP remote over TLS on loopback that asks
 * for basic auth (the operator allows it: private addresses on, its CA trusted, its password
 * in the operator's credentials); a run bound to it fetches, commits and pushes from its
 * sandbox with plain `git`, through the relay, on bwrap and Docker; the password is never in
 * the sandbox.
 */

const backend = BACKENDS[0] as BackendCase;
const PASSWORD = generator(29_6)(ALNUM, 32);
const USER = 'tester';
const BASIC = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
const REPO = '/home/agent/repos/remote';

const sh = gitShell;

function openBridgeRuns(sandboxes: RunProviderCase) {
  const state = {} as {
    opened: OpenedBackends;
    provider: SandboxProvider;
    hf: Holdfast;
    server: GitServer & { seen: SeenRequest[] };
    events: RunLogEvent[];
  };
  beforeAll(async () => {
    state.opened = await backend.open();
    state.provider = sandboxes.open(state.opened.dir);
    const tls = selfSignedCertificate(state.opened.dir);
    seedRemote(state.opened.dir);
    state.server = await startGitHttp(state.opened.dir, { tls, requireAuthorization: BASIC });
    state.events = [];
    state.hf = await openHoldfast({
      blobs: state.opened.blobs,
      meta: state.opened.meta,
      cacheDir: path.join(state.opened.dir, 'cache'),
      providers: () => state.provider,
      onRunEvent: (e) => state.events.push(e),
      git: {
        allowedHosts: ['127.0.0.1'],
        protocols: ['https'],
        allowPrivateAddresses: true,
        caFile: tls.certFile,
        credentials: [{ host: '127.0.0.1', username: USER, token: PASSWORD }],
      },
    });
  }, 120_000);
  afterAll(async () => {
    await state.hf?.close();
    await state.server?.close();
    for (const s of (await state.provider?.list()) ?? []) await state.provider.destroy(s.id);
    await state.opened?.cleanup();
  }, 120_000);
  const deployment = () => {
    const image = sandboxes.image();
    return state.hf.deployments.create({ provider: sandboxes.name, ...(image === null ? {} : { image }) });
  };
  return { state, deployment };
}

const CASES: ReadonlyArray<{ name: string; sandboxes: RunProviderCase }> = [
  { name: 'bwrap', sandboxes: BWRAP_RUNS },
  { name: 'docker', sandboxes: dockerRuns('gitbridge', gitImage) },
];

describe.each(CASES)('git from the sandbox on $name', ({ sandboxes }) => {
  const { state, deployment } = openBridgeRuns(sandboxes);

  it('fetches, commits and pushes with plain git through the host; the password never enters the sandbox', async () => {
    const { hf, opened, server } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url: server.url('remote.git') }] } });
    // Another commit lands on the remote after the checkout was made: the sandbox fetches it.
    const seedWork = path.join(opened.dir, 'seed');
    fs.writeFileSync(path.join(seedWork, 'later.txt'), 'later\n');
    hostGit(seedWork, ['add', '-A']);
    hostGit(seedWork, ['commit', '--quiet', '-m', 'later on the remote']);
    hostGit(seedWork, ['push', '--quiet', path.join(opened.dir, 'remote.git'), 'main']);
    const later = hostGit(seedWork, ['rev-parse', 'HEAD']).trim();

    const seenBefore = server.seen.length;
    const out = await hf.runs.turn(run.id, async (ctx) => {
      const lsRemote = await sh(ctx, REPO, 'git ls-remote origin HEAD');
      const fetched = await sh(ctx, REPO, 'git fetch --quiet origin && git rev-parse origin/main');
      const pushed = await sh(
        ctx,
        REPO,
        'git merge --quiet --ff-only origin/main && echo pushed > pushed.txt && git add pushed.txt && git commit --quiet -m "from the sandbox" && git push --quiet origin HEAD:refs/heads/from-sandbox && git rev-parse HEAD',
      );
      // Everything the sandbox holds that a credential could hide in: its disk (home, workspace, tmp), env, git config.
      const dump = await ctx.sandbox.run(
        ['sh', '-c', 'tar -cf - -C / home/agent workspace tmp 2>/dev/null; env; git -C "$1" config --list --show-origin', 'sh', REPO],
        { maxOutputBytes: 512 * 1024 * 1024 },
      );
      return { lsRemote, fetched, pushed, dump: dump.stdout };
    });
    expect(out.value.lsRemote).toMatchObject({ code: 0 });
    expect(out.value.lsRemote.stdout).toContain(later);
    expect(out.value.fetched).toMatchObject({ code: 0, stdout: `${later}\n` });
    expect(out.value.pushed.code).toBe(0);
    const head = out.value.pushed.stdout.trim();
    expect(hostGit(opened.dir, ['--git-dir', 'remote.git', 'rev-parse', 'refs/heads/from-sandbox']).trim()).toBe(head);

    // The host sent the operator's credential on every bridged call; the sandbox never had it.
    const bridged = server.seen.slice(seenBefore);
    expect(bridged.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining([
        'GET /remote.git/info/refs?service=git-upload-pack',
        'POST /remote.git/git-upload-pack',
        'GET /remote.git/info/refs?service=git-receive-pack',
        'POST /remote.git/git-receive-pack',
      ]),
    );
    for (const r of bridged) expect(r.authorization).toBe(BASIC);
    for (const needle of [PASSWORD, Buffer.from(`${USER}:${PASSWORD}`).toString('base64')]) {
      expect(out.value.dump.includes(needle)).toBe(false);
      expect(JSON.stringify(state.events).includes(needle)).toBe(false);
    }
    expect(out.value.dump.length).toBeGreaterThan(10_000);

    // Each bridged request is a step of the run: binding, service, status and bytes.
    const runEvents = await hf.runs.events(run.id);
    const requests = runEvents.filter((e) => e.kind === 'git_bridge' && e.step === 'request').map((e) => e.data as Record<string, unknown>);
    expect(JSON.stringify(runEvents).includes(PASSWORD)).toBe(false);
    expect(requests).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ binding: 'remote', service: 'git-receive-pack', method: 'POST', status: 200 }),
        expect.objectContaining({ binding: 'remote', service: 'git-upload-pack', method: 'GET', status: 200 }),
      ]),
    );
    const push = requests.find((d) => d?.service === 'git-receive-pack' && d.method === 'POST') as {
      requestBytes: number;
      responseBytes: number;
    };
    expect(push.requestBytes).toBeGreaterThan(0);
    expect(push.responseBytes).toBeGreaterThan(0);
  }, 240_000);
});

describe('git from the sandbox without stdin (shell route)', () => {
  const { state, deployment } = openBridgeRuns({ ...BWRAP_RUNS, open: (dir) => withoutStdinProvider(BWRAP_RUNS.open(dir)) });

  it('refuses clearly: git prints REPOSITORY_UNSUPPORTED and the run records the bridge unavailable', async () => {
    const { hf, server } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url: server.url('remote.git') }] } });
    const out = await hf.runs.turn(run.id, (ctx) => sh(ctx, REPO, 'git ls-remote origin HEAD'));
    expect(out.value.code).not.toBe(0);
    expect(out.value.stderr).toContain('REPOSITORY_UNSUPPORTED');
    const unavailable = (await hf.runs.events(run.id)).find((e) => e.kind === 'git_bridge' && e.step === 'unavailable');
    expect(unavailable).toMatchObject({ status: 'failed', data: { reason: 'no-stdin' } });
  }, 240_000);
});

describe('git from the sandbox without Node (docker, busybox)', () => {
  const { state, deployment } = openBridgeRuns(dockerRuns('gitbridge-nonode', busyboxImage));

  it('refuses clearly: the helper prints REPOSITORY_UNSUPPORTED and the run records the bridge unavailable (no-node)', async () => {
    const { hf, server } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url: server.url('remote.git') }] } });
    // No git in the image either: the helper git would run is called as git would call it.
    const out = await hf.runs.turn(run.id, (ctx) => sh(ctx, REPO, 'git-remote-holdfast origin holdfast://remote'));
    expect(out.value.code).toBe(128);
    expect(out.value.stderr).toContain('REPOSITORY_UNSUPPORTED');
    const unavailable = (await hf.runs.events(run.id)).find((e) => e.kind === 'git_bridge' && e.step === 'unavailable');
    expect(unavailable).toMatchObject({ status: 'failed', data: { reason: 'no-node' } });
  }, 240_000);
});
