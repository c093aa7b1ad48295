import path from 'node:path';
import type { SandboxHandle } from '../../sandbox/sandbox-provider.js';

/** The longest the listing of a directory's unreadable entries may take. */
const UNREADABLE_PROBE_TIMEOUT_MS = 60_000;
/** Most bytes of that listing (NUL-separated paths); past it the listing is refused, not cut. */
const MAX_UNREADABLE_LISTING_BYTES = 4 * 1024 * 1024;
/** Most unreadable entries one save leaves out (more than this many: the save fails as it found them). */
export const MAX_UNREADABLE_ENTRIES = 1000;

/**
 * Lists, as the sandbox's own user sees them, the regular files it cannot read and the
 * directories it cannot list or enter, relative to the directory. POSIX `find`, `sh` and
 * `test` only (busybox answers it as GNU userlands do); paths NUL-separated, so any byte but
 * NUL is carried; `find`'s complaints about the directories it cannot enter go to /dev/null.
 */
const LIST_UNREADABLE = `find . -mindepth 1 \\( -type f -o -type d \\) -exec sh -c '
for p do
  if [ -d "$p" ]; then
    { [ -r "$p" ] && [ -x "$p" ]; } || printf "%s\\000" "$p"
  elif [ ! -r "$p" ]; then
    printf "%s\\000" "$p"
  fi
done' sh {} + 2>/dev/null; exit 0`;

/**
 * The entries under `<home>/<scope>` the sandbox's user cannot read (files) or list and enter
 * (directories), shortest first, none under another one listed; an empty list when there are
 * none or the listing did not run (the directory is gone, the command timed out). A file made
 * unreadable after this ran is not in it: a caller may look again. Rejects when the sandbox
 * cannot run it or it printed more than {@link MAX_UNREADABLE_LISTING_BYTES}.
 */
export async function listUnreadable(sandbox: SandboxHandle, scope: string, signal?: AbortSignal): Promise<string[]> {
  const got = await sandbox.run(['sh', '-c', LIST_UNREADABLE], {
    cwd: path.posix.join(sandbox.agentHome, scope),
    timeoutMs: UNREADABLE_PROBE_TIMEOUT_MS,
    maxOutputBytes: MAX_UNREADABLE_LISTING_BYTES,
    ...(signal === undefined ? {} : { signal }),
  });
  if (got.code !== 0) return [];
  const found = got.stdout
    .toString('utf8')
    .split('\0')
    .filter((p) => p.startsWith('./'))
    .map((p) => p.slice(2))
    .sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  const out: string[] = [];
  for (const p of found) if (!out.some((d) => p.startsWith(`${d}/`))) out.push(p);
  return out;
}

/** Characters a gitignore pattern gives a meaning to. */
const GLOB_SPECIAL = /[\\*?[\]!#]/g;

/**
 * The exclusion (gitignore syntax, relative to the directory) that matches exactly `relPath`
 * and what is under it: anchored, every special character escaped, a trailing space kept.
 * `undefined` for a path no pattern can name (a newline in it).
 */
export function exactPattern(relPath: string): string | undefined {
  if (relPath === '' || /[\n\r]/.test(relPath)) return undefined;
  return `/${relPath.replace(GLOB_SPECIAL, '\\$&').replace(/ $/, '\\ ')}`;
}
