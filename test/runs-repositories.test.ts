import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sha256Hex } from '../src/core/hash.js';
import { repoWorkspaceName } from '../src/git/repository-checkpoints.js';
import { type Holdfast, openHoldfast, type TurnContext } from '../src/index.js';
import { ObjectReader } from '../src/objects/object-reader.js';
import { SandboxEndpoints, type WorkspaceRoute } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import type { SandboxProvider } from '../src/sandbox/sandbox-provider.js';
import { DEFAULT_MAX_ENTRIES } from '../src/workspace-fs/scan-limits.js';
import { BACKENDS, type BackendCase, type OpenedBackends } from './support/backends.js';
import { gitImage } from './support/docker-images.js';
import { GIT_IDENTITY, seedManyFiles, seedRemote, storedBytes } from './support/git-fixture.js';
import { type GitServer, startGitDaemon } from './support/git-servers.js';
import { BWRAP_RUNS, dockerRuns, type RunProviderCase } from './support/run-providers.js';
import { ALNUM, generator } from './support/secret-samples.js';
import { withoutStdinProvider } from './support/shell-handles.js';

/**
 * Repository checkpoints as a step of the run lifecycle (issue 14), end to end through the
 * library: a bare remote served by `git daemon` on loopback (the one host the operator
 * allows here, private addresses allowed for it), bwrap and Docker sandboxes (an image with
 * the host's git), real git on both sides.
 */

/** A GitHub-shaped token, assembled at run time so no credential-looking literal is in the file. */
const TOKEN = `${'gh'}p_${generator(1426)(ALNUM, 36)}`;
const HEADER_SECRET = 'extraheader-secret-7f3a9c';
const HOOK_SECRET = 'hook-secret-5b21e8';
/** The setup of the deployment: in a checkout it appends to an ignored marker (so a re-run shows). */
const SETUP = ['sh', '-c', 'if [ -n "$HOLDFAST_REPO_DIR" ]; then echo ran >> "$HOLDFAST_REPO_DIR/.setup-ran"; fi'];

/** Runs `script` in the checkout `dir` of the turn's sandbox with a git identity; rejects on a non-zero exit. */
async function inRepo({ sandbox, signal }: Pick<TurnContext, 'sandbox' | 'signal'>, dir: string, script: string): Promise<string> {
  const result = await sandbox.run(['sh', '-c', script], { cwd: dir, env: { ...GIT_IDENTITY }, signal });
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr.toString()}`);
  return result.stdout.toString('utf8');
}

/** What must survive the sandbox, as git prints it. */
const OBSERVE = [
  'git status --porcelain=v2',
  'git diff',
  'git diff --cached',
  'git log --all --format="%H %P %s %D"',
  'git stash list',
  'git fsck --full --no-progress 2>&1',
  'git show :a.txt',
  'git tag -l',
  'stat -c "%A %n" run.sh',
  'readlink readme-link',
].join(' && echo --- && ');

const backend = BACKENDS[0] as BackendCase;

/** A Holdfast on the first backend pair with sandboxes of `sandboxes`, and the seeded remote. */
function openRepoRuns(sandboxes: RunProviderCase) {
  const state = {} as { opened: OpenedBackends; provider: SandboxProvider; hf: Holdfast; url: string; daemon: GitServer };
  beforeAll(async () => {
    state.opened = await backend.open();
    state.provider = sandboxes.open(state.opened.dir);
    state.hf = await openHoldfast({
      blobs: state.opened.blobs,
      meta: state.opened.meta,
      cacheDir: path.join(state.opened.dir, 'cache'),
      providers: () => state.provider,
      git: { allowedHosts: ['127.0.0.1'], protocols: ['git'], allowPrivateAddresses: true },
    });
    seedRemote(state.opened.dir);
    state.daemon = await startGitDaemon(state.opened.dir);
    state.url = state.daemon.url('remote.git');
  }, 120_000);
  afterAll(async () => {
    await state.hf?.close();
    await state.daemon?.close();
    for (const s of (await state.provider?.list()) ?? []) await state.provider.destroy(s.id);
    await state.opened?.cleanup();
  }, 120_000);
  const deployment = () => {
    const image = sandboxes.image();
    return state.hf.deployments.create({ provider: sandboxes.name, ...(image === null ? {} : { image }), setup: [SETUP] });
  };
  return { state, deployment };
}

/** The sandboxes the restore-after-destroy scenario runs on, with the route Holdfast must take to their checkouts. */
const SCENARIO_CASES: ReadonlyArray<{ name: string; sandboxes: RunProviderCase; route: WorkspaceRoute }> = [
  { name: 'bwrap (agent)', sandboxes: BWRAP_RUNS, route: 'agent' },
  {
    name: 'bwrap without stdin (shell transport)',
    sandboxes: { ...BWRAP_RUNS, open: (dir) => withoutStdinProvider(BWRAP_RUNS.open(dir)) },
    route: 'shell-args',
  },
  { name: 'docker (agent)', sandboxes: dockerRuns('repos', gitImage), route: 'agent' },
];

describe.each(SCENARIO_CASES)(`repository checkpoints in a run: ${backend.name} on $name`, ({ sandboxes, route }) => {
  const { state, deployment } = openRepoRuns(sandboxes);

  it('a checkout with every kind of git state survives a destroyed sandbox, without its credentials, config, hooks or ignored files', async () => {
    const { hf, opened, provider, url } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url, branch: 'task/1' }] } });
    const dir = '/home/agent/repos/remote';
    const before = await hf.runs.turn(run.id, async (ctx) => {
      expect(ctx.sandbox.agentHome).toBe('/home/agent');
      expect(await new SandboxEndpoints(() => provider).route(ctx.sandbox)).toBe(route);
      await inRepo(
        ctx,
        dir,
        [
          'test "$(git rev-parse --abbrev-ref HEAD)" = task/1',
          'test "$(cat .setup-ran)" = ran',
          'echo two >> a.txt && git commit --quiet -am "unpushed on the task branch"',
          'git tag v1 && git pack-refs --all',
          'echo stashed >> README.md && git stash --quiet',
          'echo staged > a.txt && git add a.txt && echo unstaged > a.txt',
          'echo new > untracked.txt',
          'mkdir -p node_modules/dep && echo cache > node_modules/dep/index.js',
          `git remote set-url origin "https://x-access-token:${TOKEN}@example.com/o/r.git"`,
          `git config http.extraheader "AUTHORIZATION: bearer ${HEADER_SECRET}"`,
          `mkdir -p .git/hooks && printf '#!/bin/sh\\necho ${HOOK_SECRET}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
        ].join(' && '),
      );
      return inRepo(ctx, dir, OBSERVE);
    });
    const [saved] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(saved).toMatchObject({ name: 'remote', url, branch: 'task/1', state: 'saved', error: null });
    expect(saved?.checkpointId).toEqual(expect.any(String));

    // No stored object of the repository's checkpoints holds a credential, the config or a hook.
    const snapshots = hf.repositories.repoSnapshots;
    const reader = new ObjectReader(hf.blobs, hf.meta);
    const checkpoints = await snapshots.log(repoWorkspaceName(hf.tenant.id, run.id, 'remote'));
    expect(checkpoints.length).toBeGreaterThan(0);
    for (const c of checkpoints.filter((c) => c.rootTree !== null)) {
      const all = Buffer.concat(await storedBytes(reader, c.rootTree as Sha256Hex));
      for (const secret of [TOKEN, HEADER_SECRET, HOOK_SECRET, 'example.com/o/r']) expect(all.includes(secret)).toBe(false);
    }
    const restored = path.join(opened.dir, 'restored-copy');
    await snapshots.restore({ dir: restored, workspace: repoWorkspaceName(hf.tenant.id, run.id, 'remote') });
    expect(fs.existsSync(path.join(restored, '.git', 'config'))).toBe(false);
    expect(fs.existsSync(path.join(restored, '.git', 'hooks'))).toBe(false);
    expect(fs.existsSync(path.join(restored, 'node_modules'))).toBe(false);
    expect(fs.existsSync(path.join(restored, '.git', 'packed-refs'))).toBe(true);

    await provider.destroy((await hf.runs.get(run.id)).sandbox?.id ?? '');
    const after = await hf.runs.turn(run.id, async (ctx) => {
      const seen = await inRepo(ctx, dir, OBSERVE);
      const extra = await inRepo(
        ctx,
        dir,
        // The stored URL (what the restore recreated); `git remote get-url` shows the git bridge's holdfast:// rewrite.
        'git config --get remote.origin.url; git config --get http.extraheader || echo no-header; ls .git/hooks 2>/dev/null || echo no-hooks; ls -d node_modules 2>/dev/null || echo no-cache; cat .setup-ran',
      );
      return { seen, extra };
    });
    expect(after.value.seen).toBe(before.value);
    expect(after.value.extra).toBe(`${url}\nno-header\nno-hooks\nno-cache\nran\n`);
    const events = await hf.runs.events(run.id);
    expect(events.filter((e) => e.kind === 'repos' && e.step === 'attach_cold' && e.status === 'ok')).toHaveLength(2);
  });
});

describe(`repository checkpoints in a run: ${backend.name} on bwrap`, () => {
  const { state, deployment } = openRepoRuns(BWRAP_RUNS);

  it('a checkpoint while index.lock exists is refused and the old one stays; the next save after the lock is gone succeeds', async () => {
    const { hf, url } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url, name: 'locked' }] } });
    const dir = '/home/agent/repos/locked';
    await hf.runs.turn(run.id, async (ctx) => inRepo(ctx, dir, 'echo first > a.txt'));
    const [first] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(first?.state).toBe('saved');
    const refused = await hf.runs
      .turn(run.id, async (ctx) => inRepo(ctx, dir, 'echo second > a.txt && : > .git/index.lock'))
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(refused).toMatchObject({ code: 'REPOSITORY_BUSY' });
    const [busy] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(busy).toMatchObject({ state: 'failed', checkpointId: first?.checkpointId, error: { code: 'REPOSITORY_BUSY' } });
    await hf.runs.turn(run.id, async (ctx) => inRepo(ctx, dir, 'rm .git/index.lock'));
    const [next] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(next?.state).toBe('saved');
    expect(next?.checkpointId).not.toBe(first?.checkpointId);
  });

  it('a repository whose tree is over the checkpoint limits fails the turn before any checkout and leaves no clone on the host', async () => {
    const { hf, opened, daemon } = state;
    seedManyFiles(opened.dir, 'many.git', DEFAULT_MAX_ENTRIES + 1);
    const tmp = fs.mkdtempSync(path.join(opened.dir, 'tmp-'));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url: daemon.url('many.git') }] } });
      await expect(hf.runs.turn(run.id, async () => 'never')).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
      expect(fs.readdirSync(tmp).filter((f) => f.startsWith('holdfast-clone-'))).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  }, 120_000);

  it('a checkout removed in a turn has nothing to save: the turn completes, and the next turn has it back from its last checkpoint', async () => {
    const { hf, url } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url, name: 'removed' }] } });
    const dir = '/home/agent/repos/removed';
    await hf.runs.turn(run.id, async (ctx) => inRepo(ctx, dir, 'echo kept > a.txt'));
    const [saved] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(saved?.state).toBe('saved');
    await hf.runs.turn(run.id, async ({ sandbox }) => {
      expect((await sandbox.run(['rm', '-rf', dir])).code).toBe(0);
    });
    const [after] = await hf.repositories.status(await hf.runs.get(run.id));
    expect(after?.checkpointId).toBe(saved?.checkpointId);
    const back = await hf.runs.turn(run.id, async (ctx) => inRepo(ctx, dir, 'cat a.txt'));
    expect(back.value).toBe('kept\n');
  });

  it('two runs binding the same repository get independent checkouts', async () => {
    const { hf, url } = state;
    const id = (await deployment()).id;
    const a = await hf.runs.create({ deploymentId: id, bindings: { task: 'task-a', repos: [{ url }] } });
    const b = await hf.runs.create({ deploymentId: id, bindings: { task: 'task-b', repos: [{ url }] } });
    const dir = '/home/agent/repos/remote';
    await hf.runs.turn(a.id, async (ctx) => inRepo(ctx, dir, 'echo only-a > a.txt && git commit --quiet -am "in a"'));
    const seen = await hf.runs.turn(b.id, async (ctx) => inRepo(ctx, dir, 'git log --format=%s; cat a.txt'));
    expect(seen.value).toBe('initial\none\n');
    const [sa] = await hf.repositories.status(await hf.runs.get(a.id));
    const [sb] = await hf.repositories.status(await hf.runs.get(b.id));
    expect(sa?.checkpointId).not.toBe(sb?.checkpointId);
  });

  it('restored into a sandbox where the checkout is owned by another uid, git still works', async () => {
    const { hf, url, opened, provider } = state;
    const run = await hf.runs.create({ deploymentId: (await deployment()).id, bindings: { repos: [{ url, name: 'owned' }] } });
    const dir = '/home/agent/repos/owned';
    await hf.runs.turn(run.id, async (ctx) => inRepo(ctx, dir, 'echo edit >> a.txt'));
    await provider.destroy((await hf.runs.get(run.id)).sandbox?.id ?? '');
    const seen = await hf.runs.turn(run.id, async (ctx) => {
      // The bwrap sandbox's home is a host directory: its files are given to a uid no process of the sandbox runs as.
      const hostDir = path.join(opened.dir, 'sandboxes', ctx.sandbox.id, 'home', 'repos', 'owned');
      fs.chownSync(hostDir, 12345, 12345);
      for (const f of fs.readdirSync(hostDir, { recursive: true }) as string[]) fs.lchownSync(path.join(hostDir, f), 12345, 12345);
      const dubious = await ctx.sandbox.run(['sh', '-c', 'GIT_CONFIG_GLOBAL=/dev/null git status --porcelain'], { cwd: dir });
      return {
        dubious: dubious.stderr.toString(),
        status: await inRepo(ctx, dir, 'git status --porcelain && test "$(stat -c %u a.txt)" != "$(id -u)" && echo foreign'),
      };
    });
    expect(seen.value.dubious).toContain('dubious ownership');
    expect(seen.value.status).toBe(' M a.txt\nforeign\n');
  });
});
