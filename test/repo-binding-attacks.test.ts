import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GitConfig, parseGitConfig } from '../src/config.js';
import { gitEnvironment } from '../src/git/git-environment.js';
import { treeBytes } from '../src/git/git-process.js';
import { cloneOnHost } from '../src/git/host-clone.js';
import { type Holdfast, openHoldfast } from '../src/index.js';
import { repoAddress } from '../src/model/repo-bindings.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES } from '../src/workspace-fs/scan-limits.js';
import { hostGit, seedManyFiles, seedRemote } from './support/git-fixture.js';
import { type GitServer, startGitDaemon, startGitHttp } from './support/git-servers.js';

/**
 * What a tenant can make the host do by naming a repository (DESIGN section 14), tried the
 * way an attacker would: at run creation through the library, and at the host clone itself
 * against real git servers on loopback.
 */

const LIMITS = { maxFileBytes: DEFAULT_MAX_FILE_BYTES, maxEntries: DEFAULT_MAX_ENTRIES };

let dir: string;
let daemon: GitServer;
let n = 0;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-repo-attacks-'));
  seedRemote(dir);
  daemon = await startGitDaemon(dir);
});
afterAll(async () => {
  await daemon?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh clone parent (as captureClone makes it) and the checkout path in it. */
function cloneTarget(): { parent: string; checkout: string } {
  n += 1;
  const parent = fs.mkdtempSync(path.join(dir, `clone-${n}-`));
  return { parent, checkout: path.join(parent, 'repo') };
}

function git(overrides: Partial<GitConfig>): GitConfig {
  return parseGitConfig({
    allowedHosts: ['127.0.0.1', 'localhost'],
    protocols: ['git', 'http'],
    allowPrivateAddresses: true,
    ...overrides,
  });
}

const clone = (url: string, config: GitConfig, limits: typeof LIMITS & { maxDirs?: number } = LIMITS) => {
  const { parent, checkout } = cloneTarget();
  return {
    parent,
    checkout,
    done: cloneOnHost({ binding: { name: 'repo', url }, index: 0, dir: checkout, tenant: 'default', git: config, limits }),
  };
};

describe('repository bindings at run creation', () => {
  let hf: Holdfast;
  let deploymentId: string;
  beforeAll(async () => {
    hf = await openHoldfast({
      store: path.join(dir, 'store'),
      cacheDir: path.join(dir, 'cache'),
      git: { allowedHosts: ['github.com', '*.example.com'], protocols: ['https', 'ssh'] },
    });
    deploymentId = (await hf.deployments.create({ provider: 'local' })).id;
  });
  afterAll(async () => {
    await hf?.close();
  });

  it.each([
    ['a file:// URL of a host repository', 'file:///srv/tenant-b/remote.git'],
    ['a plain host path', '/tmp/holdfast-sandboxes/sbx-2/home/repos/app'],
    ['a relative path', '../remote.git'],
    ['an ext:: transport', 'ext::sh -c touch% /tmp/pwned'],
    ['fd::0 (stdin)', 'fd::0'],
    ['any <transport>:: helper', 'anything::https://github.com/o/r'],
    ['javascript:alert(1) read as scp-like', 'javascript:alert(1)'],
    ['a scheme git does not clone from', 'ftp://github.com/o/r.git'],
    ['an uppercase scheme', 'HTTPS://github.com/o/r.git'],
    ['git+ssh://', 'git+ssh://git@github.com/o/r.git'],
    ['an ssh host that is an option', 'ssh://-oProxyCommand=touch%20/tmp/pwned/o/r.git'],
    ['an scp-like host that is an option', '-oProxyCommand=touch:o/r.git'],
    ['an scp-like user that is an option', '-oProxyCommand=x@github.com:o/r.git'],
    ['a URL with a fragment', 'https://github.com/o/r.git#x'],
    ['a URL with a space', 'https://github.com/o/r .git'],
  ])('refuses %s with INVALID_INPUT naming the field', async (_name, url) => {
    await expect(hf.runs.create({ deploymentId, bindings: { repos: [{ url }] } })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      data: { field: 'bindings.repos[0].url' },
    });
  });

  it.each([
    ['loopback http', 'http://127.0.0.1:8080/o/r.git', 'INVALID_INPUT'],
    ['loopback git://', 'git://127.0.0.1:9418/o/r.git', 'INVALID_INPUT'],
    ['a host not allowed', 'https://gitlab.com/o/r.git', 'FORBIDDEN'],
    ['the apex of a *. pattern', 'https://example.com/o/r.git', 'FORBIDDEN'],
    ['a loopback https address', 'https://127.0.0.1/o/r.git', 'FORBIDDEN'],
    ['an scp-like host not allowed', 'git@evil.test:o/r.git', 'FORBIDDEN'],
    ['an allowed name as a prefix of another host', 'https://github.com.evil.test/o/r.git', 'FORBIDDEN'],
    ['an allowed name as a suffix of another name', 'https://evilgithub.com/o/r.git', 'FORBIDDEN'],
    ['a *. pattern as a prefix', 'https://a.example.com.evil.test/o/r.git', 'FORBIDDEN'],
    ['IPv6 loopback', 'https://[::1]/o/r.git', 'FORBIDDEN'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/o/r.git', 'FORBIDDEN'],
    ['hex loopback', 'https://0x7f000001/o/r.git', 'FORBIDDEN'],
    ['short loopback', 'https://127.1/o/r.git', 'FORBIDDEN'],
    ['decimal loopback', 'https://2130706433/o/r.git', 'FORBIDDEN'],
    ['an allowed name as the user of another host', 'https://github.com@evil.test/o/r.git', 'SECRET_EXCLUDED'],
  ])('refuses %s (%s)', async (_name, url, code) => {
    await expect(hf.runs.create({ deploymentId, bindings: { repos: [{ url }] } })).rejects.toMatchObject({
      code,
      data: { field: 'bindings.repos[0].url' },
    });
  });

  it('accepts allowed hosts, and refuses every binding by default', async () => {
    const run = await hf.runs.create({
      deploymentId,
      bindings: { repos: [{ url: 'https://github.com/o/r.git' }, { url: 'git@git.example.com:o/lib.git' }] },
    });
    expect(run.bindings?.repos?.map((r) => r.name)).toEqual(['r', 'lib']);
    const closed = await openHoldfast({ store: path.join(dir, 'store-default'), cacheDir: path.join(dir, 'cache') });
    try {
      const id = (await closed.deployments.create({ provider: 'local' })).id;
      await expect(
        closed.runs.create({ deploymentId: id, bindings: { repos: [{ url: 'https://github.com/o/r.git' }] } }),
      ).rejects.toMatchObject({
        code: 'FORBIDDEN',
      });
    } finally {
      await closed.close();
    }
  });
});

describe('host clones', () => {
  it('never connects to a loopback address unless the operator allows private addresses', async () => {
    for (const url of [daemon.url('remote.git'), `git://localhost:${daemon.port}/remote.git`]) {
      const { checkout, done } = clone(url, git({ allowPrivateAddresses: false }));
      await expect(done).rejects.toMatchObject({ code: 'FORBIDDEN' });
      expect(fs.existsSync(checkout)).toBe(false);
    }
    const { checkout, done } = clone(daemon.url('remote.git'), git({}));
    await done;
    expect(fs.readFileSync(path.join(checkout, 'a.txt'), 'utf8')).toBe('one\n');
  });

  it('refuses a protocol or host the operator did not allow, before any connection', async () => {
    const http = await startGitHttp(dir);
    try {
      await expect(clone(http.url('remote.git'), git({ protocols: ['git'] })).done).rejects.toMatchObject({ code: 'INVALID_INPUT' });
      await expect(clone(http.url('remote.git'), git({ allowedHosts: ['github.com'] })).done).rejects.toMatchObject({
        code: 'FORBIDDEN',
      });
      expect(http.seen).toEqual([]);
    } finally {
      await http.close();
    }
  });

  it('clones over http from a host name pinned to the address it resolved to', async () => {
    const http = await startGitHttp(dir);
    try {
      const { checkout, done } = clone(`http://localhost:${http.port}/remote.git`, git({}));
      await done;
      expect(fs.readFileSync(path.join(checkout, 'a.txt'), 'utf8')).toBe('one\n');
      expect(http.seen.length).toBeGreaterThan(0);
    } finally {
      await http.close();
    }
  });

  it('does not follow a redirect to another host', async () => {
    const target = await startGitHttp(dir);
    const redirect = await startGitHttp(dir, { redirectTo: `http://localhost:${target.port}` });
    try {
      await expect(clone(redirect.url('remote.git'), git({})).done).rejects.toMatchObject({ code: 'SETUP_FAILED' });
      expect(redirect.seen.length).toBeGreaterThan(0);
      expect(target.seen).toEqual([]);
    } finally {
      await redirect.close();
      await target.close();
    }
  });

  it("never consults the service user's credential helper, and sends no credential the operator did not configure", async () => {
    const home = path.join(dir, 'service-home');
    fs.mkdirSync(home, { recursive: true });
    const calls = path.join(home, 'helper-calls');
    const helper = path.join(home, 'helper.sh');
    fs.writeFileSync(helper, `#!/bin/sh\necho "$@" >> '${calls}'\necho username=svc\necho password=host-secret-91f2\n`, { mode: 0o755 });
    const globalConfig = path.join(home, '.gitconfig');
    fs.writeFileSync(globalConfig, `[credential]\n\thelper = ${helper}\n[http]\n\textraheader = X-Host-Secret: host-header-5d7\n`);
    const http = await startGitHttp(dir, { requireAuthorization: 'Basic never-sent' });
    const saved = { HOME: process.env.HOME, GIT_CONFIG_GLOBAL: process.env.GIT_CONFIG_GLOBAL };
    process.env.HOME = home;
    process.env.GIT_CONFIG_GLOBAL = globalConfig;
    try {
      // The helper answers for every host when git asks (what the service user's setup does).
      execFileSync('git', ['credential', 'fill'], { input: 'protocol=http\nhost=127.0.0.1\n\n', env: process.env });
      fs.rmSync(calls);
      await expect(clone(http.url('remote.git'), git({})).done).rejects.toMatchObject({ code: 'SETUP_FAILED' });
      expect(fs.existsSync(calls)).toBe(false);
      expect(http.seen.length).toBeGreaterThan(0);
      expect(http.seen.every((r) => r.authorization === undefined)).toBe(true);
    } finally {
      process.env.HOME = saved.HOME;
      if (saved.GIT_CONFIG_GLOBAL === undefined) delete process.env.GIT_CONFIG_GLOBAL;
      else process.env.GIT_CONFIG_GLOBAL = saved.GIT_CONFIG_GLOBAL;
      await http.close();
    }
  });

  it("gives an https host only the operator's credential for it and that tenant, in the environment, never argv", () => {
    const config = parseGitConfig({
      allowedHosts: ['github.com'],
      credentials: [
        { host: 'github.com', token: 'ghs_tenantAtoken0001', tenant: 'a' },
        { host: 'github.com', token: 'ghs_everyonetoken0002' },
        { host: 'gitlab.com', token: 'glpat-other' },
      ],
    });
    const address = repoAddress('https://github.com/o/r.git');
    const header = (tenant: string) => {
      const env = gitEnvironment({ address, ip: '140.82.112.3', home: '/nonexistent', git: config, tenant });
      const keys = Object.entries(env).filter(([k]) => k.startsWith('GIT_CONFIG_KEY_'));
      const entry = keys.find(([, v]) => v === 'http.https://github.com/.extraHeader');
      expect(env.GIT_CONFIG_GLOBAL).toBe('/dev/null');
      expect(env.GIT_CONFIG_NOSYSTEM).toBe('1');
      expect(env.GIT_ALLOW_PROTOCOL).toBe('https');
      expect(Object.values(env)).toContain('github.com:443:140.82.112.3');
      return entry === undefined ? undefined : env[entry[0].replace('KEY', 'VALUE')];
    };
    expect(header('a')).toBe(`Authorization: Basic ${Buffer.from('x-access-token:ghs_tenantAtoken0001').toString('base64')}`);
    expect(header('b')).toBe(`Authorization: Basic ${Buffer.from('x-access-token:ghs_everyonetoken0002').toString('base64')}`);
    const ssh = gitEnvironment({
      address: repoAddress('git@github.com:o/r.git'),
      ip: '140.82.112.4',
      home: '/x',
      git: parseGitConfig({ allowedHosts: ['github.com'], credentials: [{ host: 'github.com', sshKeyFile: '/etc/holdfast/deploy-key' }] }),
      tenant: 'a',
    });
    expect(ssh.GIT_ALLOW_PROTOCOL).toBe('ssh');
    for (const option of [
      '-F /dev/null',
      "'HostName=140.82.112.4'",
      "'HostKeyAlias=github.com'",
      'IdentityAgent=none',
      "-i '/etc/holdfast/deploy-key'",
    ]) {
      expect(ssh.GIT_SSH_COMMAND).toContain(option);
    }
    expect(ssh.SSH_AUTH_SOCK).toBeUndefined();
    const plain = gitEnvironment({
      address: repoAddress('http://github.com/o/r.git'),
      ip: '140.82.112.3',
      home: '/x',
      git: config,
      tenant: 'a',
    });
    expect(Object.values(plain).some((v) => v?.startsWith('Authorization'))).toBe(false);
  });

  it('refuses a tree with more files than the limit before checking anything out, and leaves no files behind', async () => {
    seedManyFiles(dir, 'many.git', DEFAULT_MAX_ENTRIES + 1);
    const { checkout, done } = clone(daemon.url('many.git'), git({}));
    await expect(done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { limit: DEFAULT_MAX_ENTRIES, repo: 'repo' } });
    expect(fs.readdirSync(checkout)).toEqual(['.git']);
  }, 120_000);

  it('counts the tree of the branch a binding names, not the default branch, before checkout', async () => {
    const bare = seedManyFiles(dir, 'branchy.git', DEFAULT_MAX_ENTRIES + 1);
    const empty = hostGit(bare, ['mktree'], '').trim();
    hostGit(bare, ['update-ref', 'refs/heads/main', hostGit(bare, ['commit-tree', empty, '-m', 'small'], '').trim()]);
    hostGit(bare, ['symbolic-ref', 'HEAD', 'refs/heads/main']);
    const target = cloneTarget();
    const done = cloneOnHost({
      binding: { name: 'repo', url: daemon.url('branchy.git'), branch: 'master' },
      index: 0,
      dir: target.checkout,
      tenant: 'default',
      git: git({}),
      limits: LIMITS,
    });
    await expect(done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { limit: DEFAULT_MAX_ENTRIES } });
    expect(fs.readdirSync(target.checkout)).toEqual(['.git']);
  }, 120_000);

  it('refuses a file larger than the checkout limit (a small pack of a huge file) before checkout', async () => {
    const bare = path.join(dir, 'big.git');
    const work = path.join(dir, 'big-work');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    hostGit(dir, ['init', '--quiet', '--initial-branch=main', work]);
    fs.writeFileSync(path.join(work, 'zeros'), Buffer.alloc(8 * 1024 * 1024));
    hostGit(work, ['add', '-A']);
    hostGit(work, ['commit', '--quiet', '-m', 'big']);
    hostGit(work, ['push', '--quiet', bare, 'main']);
    const { checkout, done } = clone(daemon.url('big.git'), git({ maxCheckoutBytes: 1024 * 1024 }));
    await expect(done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { limit: 1024 * 1024 } });
    expect(fs.readdirSync(checkout)).toEqual(['.git']);
    const tooBig = clone(daemon.url('big.git'), git({}), { ...LIMITS, maxFileBytes: 1024 });
    await expect(tooBig.done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { limit: 1024 } });
  });

  it('stops a clone whose fetched pack grows past the cap', async () => {
    const bare = path.join(dir, 'noise.git');
    const work = path.join(dir, 'noise-work');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    hostGit(dir, ['init', '--quiet', '--initial-branch=main', work]);
    fs.writeFileSync(path.join(work, 'noise'), randomBytes(32 * 1024 * 1024));
    hostGit(work, ['add', '-A']);
    hostGit(work, ['commit', '--quiet', '-m', 'noise']);
    hostGit(work, ['push', '--quiet', bare, 'main']);
    const { checkout, done } = clone(daemon.url('noise.git'), git({ maxPackBytes: 256 * 1024 }));
    await expect(done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { what: 'bytes fetched' } });
    // Killed mid-transfer: far less than the 32 MiB pack reached the disk.
    expect(await treeBytes(checkout)).toBeLessThan(16 * 1024 * 1024);
  });

  it('checks out the remote branch it counted, not a tag the remote named origin/<branch> over a bigger tree', async () => {
    const bare = path.join(dir, 'ambiguous.git');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    const small = hostGit(bare, ['commit-tree', hostGit(bare, ['mktree'], '').trim(), '-m', 'small'], '').trim();
    hostGit(bare, ['update-ref', 'refs/heads/main', small]);
    const blob = hostGit(bare, ['hash-object', '-w', '--stdin'], 'x\n').trim();
    const many = Array.from({ length: 50 }, (_, i) => `100644 blob ${blob}\tf${i}\n`).join('');
    const big = hostGit(bare, ['commit-tree', hostGit(bare, ['mktree'], many).trim(), '-m', 'big'], '').trim();
    hostGit(bare, ['update-ref', 'refs/tags/origin/main', big]);
    const target = cloneTarget();
    await cloneOnHost({
      binding: { name: 'repo', url: daemon.url('ambiguous.git'), branch: 'main' },
      index: 0,
      dir: target.checkout,
      tenant: 'default',
      git: git({}),
      limits: { ...LIMITS, maxEntries: 10 },
    });
    expect(fs.readdirSync(target.checkout)).toEqual(['.git']);
    expect(hostGit(target.checkout, ['rev-parse', 'HEAD']).trim()).toBe(small);
    expect(hostGit(target.checkout, ['rev-parse', '--symbolic-full-name', 'main@{upstream}']).trim()).toBe('refs/remotes/origin/main');
  });

  it('counts each submodule entry (gitlink) as the directory its checkout makes, before checkout', async () => {
    const bare = path.join(dir, 'gitlinks.git');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    const inner = hostGit(bare, ['commit-tree', hostGit(bare, ['mktree'], '').trim(), '-m', 'inner'], '').trim();
    const entries = Array.from({ length: 101 }, (_, i) => `160000 commit ${inner}\tsub${i}\n`).join('');
    const tree = hostGit(bare, ['mktree'], entries).trim();
    hostGit(bare, ['update-ref', 'refs/heads/main', hostGit(bare, ['commit-tree', tree, '-m', 'gitlinks'], '').trim()]);
    const { checkout, done } = clone(daemon.url('gitlinks.git'), git({}), { ...LIMITS, maxDirs: 100 });
    await expect(done).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED', data: { limit: 100, what: 'directories' } });
    expect(fs.readdirSync(checkout)).toEqual(['.git']);
  });

  it("checks out the very bytes it counted: the repository's .gitattributes expand nothing (ident, encodings, eol, filters)", async () => {
    const bare = path.join(dir, 'expanding.git');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    const attributes = '* ident eol=crlf filter=hf-missing\n*.u working-tree-encoding=UTF-32LE\n';
    const contents: Record<string, Buffer> = {
      '.gitattributes': Buffer.from(attributes),
      ident: Buffer.from('$Id$\n'.repeat(60_000)),
      'wide.u': Buffer.from('a\n'.repeat(150_000)),
    };
    const written = path.join(dir, 'expanding-blob');
    const entries = Object.entries(contents).map(([name, bytes]) => {
      fs.writeFileSync(written, bytes);
      return `100644 blob ${hostGit(bare, ['hash-object', '-w', '--no-filters', written]).trim()}\t${name}\n`;
    });
    const tree = hostGit(bare, ['mktree'], entries.join('')).trim();
    hostGit(bare, ['update-ref', 'refs/heads/main', hostGit(bare, ['commit-tree', tree, '-m', 'expanding'], '').trim()]);
    const { checkout, done } = clone(daemon.url('expanding.git'), git({ maxCheckoutBytes: 1024 * 1024 }));
    await done;
    for (const [name, bytes] of Object.entries(contents)) expect(fs.readFileSync(path.join(checkout, name)).equals(bytes)).toBe(true);
    expect(await treeBytes(checkout)).toBeLessThan(2 * 1024 * 1024);
    // The clone's own settings are what the sandbox gets: no attributes file of the host's is left behind.
    expect(fs.existsSync(path.join(checkout, '.git', 'info', 'attributes'))).toBe(false);
  });

  it('refuses loopback written as a name the allowlist holds (127.1, decimal, hex), before connecting', async () => {
    const hosts = ['127.1', '2130706433', '0x7f000001'];
    for (const host of hosts) {
      for (const url of [`git://${host}:${daemon.port}/remote.git`, `ssh://git@${host}/remote.git`, `git@${host}:remote.git`]) {
        const config = git({ allowPrivateAddresses: false, allowedHosts: hosts, protocols: ['git', 'ssh'] });
        const { checkout, done } = clone(url, config);
        await expect(done, url).rejects.toMatchObject({ code: 'FORBIDDEN', data: { address: '127.0.0.1' } });
        expect(fs.existsSync(checkout)).toBe(false);
      }
    }
  });

  it('checks out no .git path of a hostile tree (hooks, config) and fetches no submodule', async () => {
    const bare = path.join(dir, 'hostile.git');
    hostGit(dir, ['init', '--quiet', '--bare', '--initial-branch=main', bare]);
    const blob = (text: string) => hostGit(bare, ['hash-object', '-w', '--stdin'], text).trim();
    const marker = path.join(dir, 'hostile-hook-ran');
    const hook = blob(`#!/bin/sh\ntouch ${marker}\n`);
    const hooks = hostGit(bare, ['mktree'], `100755 blob ${hook}\tpost-checkout\n`).trim();
    const config = blob(`[core]\n\tfsmonitor = touch ${marker}\n\thooksPath = hooks\n`);
    const dotGit = hostGit(bare, ['mktree'], `040000 tree ${hooks}\thooks\n100644 blob ${config}\tconfig\n`).trim();
    const tree = (name: string) => hostGit(bare, ['mktree'], `040000 tree ${dotGit}\t${name}\n`).trim();
    for (const name of ['.git', '.GIT', '.git.']) {
      hostGit(bare, ['update-ref', 'refs/heads/main', hostGit(bare, ['commit-tree', tree(name), '-m', name], '').trim()]);
      const { checkout, done } = clone(daemon.url('hostile.git'), git({}));
      await done.catch(() => undefined);
      expect(fs.existsSync(marker), name).toBe(false);
      expect(fs.existsSync(path.join(checkout, '.git', 'hooks', 'post-checkout')), name).toBe(false);
      expect(fs.readFileSync(path.join(checkout, '.git', 'config'), 'utf8').includes('fsmonitor'), name).toBe(false);
    }
    // A submodule whose URL is another repository this daemon serves: never cloned or fetched.
    const inner = hostGit(path.join(dir, 'remote.git'), ['rev-parse', 'main']).trim();
    const gitmodules = blob(`[submodule "sub"]\n\tpath = sub\n\turl = ${daemon.url('remote.git')}\n`);
    const withSub = hostGit(bare, ['mktree'], `100644 blob ${gitmodules}\t.gitmodules\n160000 commit ${inner}\tsub\n`).trim();
    hostGit(bare, ['update-ref', 'refs/heads/main', hostGit(bare, ['commit-tree', withSub, '-m', 'sub'], '').trim()]);
    const { checkout, done } = clone(daemon.url('hostile.git'), git({}));
    await done;
    expect(fs.readdirSync(path.join(checkout, 'sub'))).toEqual([]);
    expect(fs.existsSync(path.join(checkout, '.git', 'modules'))).toBe(false);
  });

  it("does not reveal host paths in a failed clone's error", async () => {
    const { parent, done } = clone(daemon.url('missing.git'), git({}));
    const error = (await done.catch((e: unknown) => e)) as { code: string; message: string; data: Record<string, unknown> };
    expect(error.code).toBe('SETUP_FAILED');
    const text = `${error.message}\n${JSON.stringify(error.data)}`;
    for (const hostPath of [parent, dir, os.tmpdir(), os.homedir()]) expect(text.includes(hostPath)).toBe(false);
    expect(error.data).toMatchObject({ repo: 'repo', url: daemon.url('missing.git') });
  });
});
