import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import type { GitConfig } from '../config.js';
import { HoldfastError, InputError } from '../errors.js';
import { checkReposAllowed, type RepoAddress, type RepoBinding, repoAddress } from '../model/repo-bindings.js';
import { withholdSecrets } from '../rules/withhold-secrets.js';
import type { ScanLimits } from '../workspace-fs/scan-limits.js';
import { checkCommitTree } from './clone-tree-limits.js';
import { gitEnvironment } from './git-environment.js';
import { runGit } from './git-process.js';
import { pinnedAddress } from './host-address.js';

/** The longest a clone (with its fetch of `ref`) may take. */
export const CLONE_TIMEOUT_MS = 10 * 60_000;
/** The longest any other git command on the host may take. */
const GIT_TIMEOUT_MS = 60_000;
/** Characters of git's stderr kept in an error. */
const STDERR_TAIL_CHARS = 2000;
/** Where the throwaway `HOME` of the clone's git lives, beside the checkout (a binding's name never starts with `.`). */
const GIT_HOME_NAME = '.git-home';
/**
 * The clone's `.git/info/attributes` while it is checked out (it overrides every in-tree
 * `.gitattributes`): no end-of-line, `ident`, filter or working-tree-encoding conversion, so
 * the host writes each blob's bytes exactly as {@link checkCommitTree} counted them (`ident` alone
 * grows `$Id$` twelvefold, `UTF-32` fourfold). Removed after the checkout.
 */
const CHECKOUT_ATTRIBUTES = '* -text -crlf -eol -ident -filter -working-tree-encoding\n';

/** One host clone: the binding, where it goes, whose it is and the operator's rules and limits. */
export interface HostCloneRequest {
  readonly binding: RepoBinding;
  /** The binding's position in the run's `bindings.repos` (errors name the field by it). */
  readonly index: number;
  /** The checkout directory (must not exist); its parent is the clone's private temp directory. */
  readonly dir: string;
  /** The tenant's name: credentials scoped to a tenant are used only for it. */
  readonly tenant: string;
  readonly git: GitConfig;
  /** The checkpoint limits the tree is checked against before checkout. */
  readonly limits: ScanLimits;
  readonly signal?: AbortSignal;
}

/**
 * Clones `binding` on this host into `dir` only where the operator allows it (DESIGN section
 * 14): the URL's protocol and host must be allowed (`INVALID_INPUT`, `FORBIDDEN`), the host
 * must not resolve to a private address unless allowed (`FORBIDDEN`), and git is pinned to the
 * address checked (curl's resolve list for http(s), the address itself for `git://`, ssh's
 * `HostName` for ssh), follows no redirect and runs in an environment of its own
 * ({@link gitEnvironment}: no system or global config, no ambient credential helper, proxy or
 * rewrite, a throwaway `HOME`, only the operator's credential for that host, only this
 * protocol, hooks off, stdin closed). The clone is `--no-checkout` and recurses no submodule;
 * its directory is killed past `git.maxPackBytes` (`LIMIT_EXCEEDED`); the tree of the commit to
 * check out is counted against `limits` and `git.maxCheckoutBytes` first (`LIMIT_EXCEEDED`);
 * only then is `ref` (fetched when the clone did not bring it) checked out, byte for byte as
 * counted (the repository's `.gitattributes` convert nothing, see {@link CHECKOUT_ATTRIBUTES}), and `branch`
 * created there (or from the remote branch of that name, tracking it). `SETUP_FAILED` with
 * git's stderr tail, secrets withheld and host paths replaced, when git fails. The caller
 * removes the temp directory whatever happens.
 */
export async function cloneOnHost(request: HostCloneRequest): Promise<void> {
  const { binding, dir, git, signal } = request;
  checkReposAllowed([binding], git, request.index);
  const address = repoAddress(binding.url, `bindings.repos[${request.index}].url`);
  const ip = await pinnedAddress(address.host, git.allowPrivateAddresses);
  const home = path.join(path.dirname(dir), GIT_HOME_NAME);
  await fsp.mkdir(home, { mode: 0o700 });
  const caBundle = git.caFile === undefined ? undefined : path.join(home, 'ca-bundle.pem');
  if (caBundle !== undefined)
    await fsp.writeFile(caBundle, `${tls.rootCertificates.join('\n')}\n${await fsp.readFile(git.caFile as string, 'utf8')}`);
  const env = gitEnvironment({ address, ip, home, git, tenant: request.tenant, ...(caBundle === undefined ? {} : { caBundle }) });
  const scrub = pathScrubber(path.dirname(dir));
  const run = (args: readonly string[], cwd: string | undefined, timeoutMs: number, watch?: boolean) =>
    gitOrFail(args, { cwd, env, timeoutMs, signal, scrub, binding, ...(watch ? { watch: { dir, maxBytes: git.maxPackBytes } } : {}) });

  await run(
    ['clone', '--no-checkout', '--no-recurse-submodules', '--', cloneUrl(binding.url, address, ip), dir],
    undefined,
    CLONE_TIMEOUT_MS,
    true,
  );
  const { ref, branch } = binding;
  // The commit that will be checked out, decided before any checkout so its tree is the one counted.
  let commit: string | undefined;
  let track = false;
  if (ref !== undefined) {
    commit = await resolveCommit(ref, dir, env);
    if (commit === undefined) {
      await run(['fetch', '--no-recurse-submodules', 'origin', '--', ref], dir, CLONE_TIMEOUT_MS, true);
      commit = await resolveCommit('FETCH_HEAD', dir, env);
    }
  } else if (branch !== undefined) {
    commit = await resolveCommit(`refs/remotes/origin/${branch}`, dir, env);
    track = commit !== undefined;
  }
  if (ref === undefined && commit === undefined) commit = await resolveCommit('HEAD', dir, env);
  if (commit === undefined) {
    const field = `bindings.repos[${request.index}].ref`;
    if (ref !== undefined) {
      throw new InputError('INVALID_INPUT', `${field}: ${ref} names no commit of ${binding.url}`, { data: { repo: binding.name, field } });
    }
    // An empty repository (no commit on its default branch): nothing to check out.
    if (branch !== undefined) await run(['checkout', '--quiet', '-b', branch], dir, GIT_TIMEOUT_MS);
    return;
  }
  const limits = { ...request.limits, maxTotalBytes: Math.min(request.limits.maxTotalBytes ?? git.maxCheckoutBytes, git.maxCheckoutBytes) };
  await checkCommitTree(dir, commit, limits, env, signal).catch((error: unknown) => {
    throw withRepo(error, binding);
  });
  const attributes = path.join(dir, '.git', 'info', 'attributes');
  await fsp.mkdir(path.dirname(attributes), { recursive: true });
  await fsp.writeFile(attributes, CHECKOUT_ATTRIBUTES);
  // The full name: a tag the remote called `origin/<branch>` would win over the short one, and check out a tree never counted.
  if (track) await run(['checkout', '--quiet', '-B', branch as string, '--track', `refs/remotes/origin/${branch}`], dir, GIT_TIMEOUT_MS);
  else if (branch !== undefined) await run(['checkout', '--quiet', '-B', branch, commit], dir, GIT_TIMEOUT_MS);
  else if (ref !== undefined) await run(['checkout', '--quiet', '--detach', commit], dir, GIT_TIMEOUT_MS);
  else await run(['checkout', '--quiet'], dir, GIT_TIMEOUT_MS);
  await fsp.rm(attributes, { force: true });
}

/**
 * The URL git is given: for http(s) the URL rebuilt from its parsed parts (so curl sees the
 * very host name the resolve list pins), for `git://` the pinned address in place of the name
 * (git's daemon protocol has no pinning of its own), for ssh the binding's URL (ssh's
 * `HostName` pins it).
 */
function cloneUrl(url: string, address: RepoAddress, ip: string): string {
  if (address.protocol === 'ssh') return url;
  const port = address.port === undefined ? '' : `:${address.port}`;
  if (address.protocol === 'git') return `git://${ip.includes(':') ? `[${ip}]` : ip}${port}${address.path}`;
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return `${address.protocol}://${host}${port}${address.path}`;
}

/** The commit `rev` names in the clone, or undefined. */
async function resolveCommit(rev: string, dir: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  let out = '';
  const result = await runGit(['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`], {
    cwd: dir,
    env,
    timeoutMs: GIT_TIMEOUT_MS,
    stderrChars: STDERR_TAIL_CHARS,
    onStdout: (chunk) => {
      out += chunk.toString('latin1');
    },
  });
  const commit = out.trim();
  return result.code === 0 && /^[0-9a-f]{40,64}$/.test(commit) ? commit : undefined;
}

interface GitRun {
  readonly cwd: string | undefined;
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
  readonly signal: AbortSignal | undefined;
  readonly scrub: (text: string) => string;
  readonly binding: RepoBinding;
  readonly watch?: { readonly dir: string; readonly maxBytes: number };
}

async function gitOrFail(args: readonly string[], run: GitRun): Promise<void> {
  const result = await runGit(args, {
    env: run.env,
    timeoutMs: run.timeoutMs,
    stderrChars: STDERR_TAIL_CHARS,
    ...(run.cwd === undefined ? {} : { cwd: run.cwd }),
    ...(run.signal === undefined ? {} : { signal: run.signal }),
    ...(run.watch === undefined ? {} : { watch: run.watch }),
  });
  run.signal?.throwIfAborted();
  const repo = { repo: run.binding.name, url: run.binding.url };
  if (result.killed === 'watch') {
    throw new InputError(
      'LIMIT_EXCEEDED',
      `git ${args[0]} of ${run.binding.url} fetched more than ${run.watch?.maxBytes} bytes (HOLDFAST_GIT_MAX_PACK_BYTES): stopped`,
      { data: { ...repo, limit: run.watch?.maxBytes, what: 'bytes fetched' } },
    );
  }
  if (result.code === 0) return;
  const stderr = String(withholdSecrets(run.scrub(result.stderr)).value).trim();
  const how = result.killed === 'timeout' ? `timed out after ${run.timeoutMs} ms` : `failed (exit ${result.code})`;
  throw new HoldfastError('SETUP_FAILED', `git ${args[0]} of ${run.binding.url} on the host ${how}: ${stderr}`, {
    data: { ...repo, command: args[0], exitCode: result.code, stderr },
  });
}

/** `error` with the binding named in its data (a limit of the tree check). */
function withRepo(error: unknown, binding: RepoBinding): unknown {
  if (!(error instanceof InputError)) return error;
  return new InputError(error.code as ConstructorParameters<typeof InputError>[0], error.message, {
    data: { ...error.data, repo: binding.name, url: binding.url },
  });
}

/**
 * Replaces host paths in git's output with placeholders: the clone's temp directory (which
 * holds the checkout and git's `HOME`), the system temp directory and the service's home.
 */
function pathScrubber(tempDir: string): (text: string) => string {
  const pairs: Array<[string, string]> = [
    [tempDir, '<clone>'],
    [os.tmpdir(), '<tmp>'],
    [os.homedir(), '<home>'],
  ];
  return (text) => pairs.reduce((t, [from, to]) => (from.length > 1 ? t.split(from).join(to) : t), text);
}
