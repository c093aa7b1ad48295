import { execFile } from 'node:child_process';
import { HoldfastError } from '../errors.js';
import type { RepoBinding } from '../model/repo-bindings.js';
import { withholdSecrets } from '../rules/withhold-secrets.js';

/** The longest a clone (with its fetch of `ref`) may take. */
export const CLONE_TIMEOUT_MS = 10 * 60_000;
/** The longest any other git command on the host may take. */
const GIT_TIMEOUT_MS = 60_000;
/** Output a host git command may print before it is stopped. */
const GIT_OUTPUT_BYTES = 1024 * 1024;
/** Characters of git's stderr kept in an error. */
const STDERR_TAIL_CHARS = 2000;

/**
 * Clones `binding` on this host into `dir` (which must not exist): the sandbox may have no
 * network, and the host's own git config, credential helper and SSH agent supply credentials,
 * so none is ever in the binding, the sandbox or a checkpoint. `--no-hardlinks` keeps a local
 * clone self-contained (a repository checkpoint refuses hard links and alternates); hooks never
 * run (`core.hooksPath=/dev/null`) and git never prompts. Then `ref` is checked out (fetched
 * first when the clone did not bring it), and `branch` is created there (or from the remote
 * branch of that name, tracking it) and checked out. `SETUP_FAILED` with git's stderr tail
 * (secrets withheld) when git fails.
 */
export async function cloneOnHost(binding: RepoBinding, dir: string, signal?: AbortSignal): Promise<void> {
  await git(['clone', '--no-hardlinks', '--', binding.url, dir], undefined, CLONE_TIMEOUT_MS, signal);
  const { ref, branch } = binding;
  if (ref !== undefined) {
    if (!(await succeeds(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], dir))) {
      await git(['fetch', 'origin', '--', ref], dir, CLONE_TIMEOUT_MS, signal);
      await git(['checkout', '--quiet', '--detach', 'FETCH_HEAD'], dir, GIT_TIMEOUT_MS, signal);
    } else {
      await git(['checkout', '--quiet', '--detach', ref], dir, GIT_TIMEOUT_MS, signal);
    }
  }
  if (branch !== undefined) {
    const remote = `refs/remotes/origin/${branch}`;
    if (ref === undefined && (await succeeds(['rev-parse', '--verify', '--quiet', remote], dir))) {
      await git(['checkout', '--quiet', '-B', branch, '--track', `origin/${branch}`], dir, GIT_TIMEOUT_MS, signal);
    } else {
      await git(['checkout', '--quiet', '-B', branch], dir, GIT_TIMEOUT_MS, signal);
    }
  }
}

/** The environment of host git commands: the host's, never prompting, with a fixed locale. */
function gitEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', SSH_ASKPASS: '', LC_ALL: 'C' };
}

function run(
  args: readonly string[],
  cwd: string | undefined,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<{ code: number; stderr: string }> {
  const argv = ['-c', 'core.hooksPath=/dev/null', '-c', 'protocol.ext.allow=never', ...args];
  return new Promise((resolve) => {
    execFile(
      'git',
      argv,
      { cwd, env: gitEnv(), timeout: timeoutMs, maxBuffer: GIT_OUTPUT_BYTES, ...(signal === undefined ? {} : { signal }) },
      (error, _stdout, stderr: string | Buffer) => {
        const code = error === null ? 0 : typeof (error as { code?: unknown }).code === 'number' ? (error as { code: number }).code : -1;
        resolve({ code, stderr: String(stderr) });
      },
    );
  });
}

async function git(args: readonly string[], cwd: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const result = await run(args, cwd, timeoutMs, signal);
  signal?.throwIfAborted();
  if (result.code === 0) return;
  const stderr = String(withholdSecrets(result.stderr.slice(-STDERR_TAIL_CHARS)).value);
  throw new HoldfastError('SETUP_FAILED', `git ${args[0]} on the host failed (exit ${result.code}): ${stderr.trim()}`, {
    data: { command: args[0], exitCode: result.code, stderr },
  });
}

async function succeeds(args: readonly string[], cwd: string): Promise<boolean> {
  return (await run(args, cwd, GIT_TIMEOUT_MS)).code === 0;
}
