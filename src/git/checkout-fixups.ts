import { HoldfastError } from '../errors.js';
import type { RepoBinding } from '../model/repo-bindings.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';

/** The longest one fix-up command in the sandbox may take (the index refresh stats every tracked file). */
const FIXUP_TIMEOUT_MS = 5 * 60_000;
/** Output a fix-up command may print before it is stopped. */
const FIXUP_OUTPUT_BYTES = 1024 * 1024;
/** Exit status of a shell that could not find the command (no git in the sandbox). */
const COMMAND_NOT_FOUND = 127;

/**
 * The `.git/config` a restored checkout gets, never the stored one (which is not in any
 * checkpoint): the core settings git needs for a plain, non-bare SHA-1 repository, and
 * `origin` from the host's binding with git's default refspec. No credentials, no hooks path,
 * no includes.
 */
export function freshGitConfig(binding: RepoBinding): string {
  return [
    '[core]',
    '\trepositoryformatversion = 0',
    '\tfilemode = true',
    '\tbare = false',
    '\tlogallrefupdates = true',
    '[remote "origin"]',
    `\turl = ${quoteConfigValue(binding.url)}`,
    '\tfetch = +refs/heads/*:refs/remotes/origin/*',
    '',
  ].join('\n');
}

/**
 * Makes a checkout just published in the sandbox at `dir` usable: writes {@link freshGitConfig}
 * (through `sh`, so it works without git), then, when the sandbox has git, adds `dir` to the
 * sandbox's global `safe.directory` list (files restored by a transport may be owned by another
 * uid than the one running git; once per path) and refreshes the index's stat data
 * (`update-index -q --refresh`: restored inode, device and ctime differ, so the first
 * `git status` would otherwise rehash every file; git's own racy-timestamp rule still re-reads
 * any entry whose mtime is not older than the new index, so no edit goes unseen). Resolves with
 * whether git was found. `SETUP_FAILED` when the config cannot be written.
 */
export async function fixUpCheckout(sandbox: SandboxHandle, dir: string, binding: RepoBinding): Promise<{ git: boolean }> {
  const options = { timeoutMs: FIXUP_TIMEOUT_MS, maxOutputBytes: FIXUP_OUTPUT_BYTES };
  const write = await sandbox.run(
    [
      'sh',
      '-c',
      'umask 022 && printf "%s" "$2" > "$1/.git/config.tmp" && mv -f "$1/.git/config.tmp" "$1/.git/config"',
      'sh',
      dir,
      freshGitConfig(binding),
    ],
    options,
  );
  if (write.code !== 0) {
    throw new HoldfastError('SETUP_FAILED', `could not write ${dir}/.git/config: ${write.stderr.toString('utf8').slice(0, 500)}`, {
      data: { dir },
    });
  }
  const safe = await sandbox.run(
    [
      'sh',
      '-c',
      'git config --global --get-all safe.directory 2>/dev/null | grep -qxF -- "$1" || git config --global --add safe.directory "$1"',
      'sh',
      dir,
    ],
    options,
  );
  if (safe.code === COMMAND_NOT_FOUND) return { git: false };
  if (safe.code !== 0) {
    throw new HoldfastError('SETUP_FAILED', `could not add ${dir} to safe.directory: ${safe.stderr.toString('utf8').slice(0, 500)}`, {
      data: { dir },
    });
  }
  // Exit 1 only says some entries need an update (unstaged changes): what git status would say too.
  await sandbox.run(['git', '-C', dir, 'update-index', '-q', '--refresh'], options);
  return { git: true };
}

/** A git config value in double quotes, with `\` and `"` escaped (the URL has no control characters). */
function quoteConfigValue(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}
