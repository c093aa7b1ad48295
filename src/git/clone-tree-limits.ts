import { MAX_NAME_BYTES, MAX_PATH_BYTES } from '../core/paths.js';
import { HoldfastError, InputError } from '../errors.js';
import type { ScanLimits } from '../workspace-fs/scan-limits.js';
import { DEFAULT_MAX_DIRS, DEFAULT_MAX_TOTAL_BYTES } from '../workspace-fs/scan-limits.js';
import { runGit } from './git-process.js';

/** Deepest directory nesting a host checkout may have (a deeper tree is an attack on the walk, not a project). */
export const MAX_CHECKOUT_DEPTH = 256;
/** The longest listing of a commit's tree may take. */
const LS_TREE_TIMEOUT_MS = 5 * 60_000;
/** Characters of git's stderr kept. */
const STDERR_CHARS = 2000;

/** What one commit's tree holds, as {@link checkCommitTree} counted it. */
export interface TreeCounts {
  readonly files: number;
  readonly dirs: number;
  readonly bytes: number;
}

/**
 * Counts the tree of `commit` in the clone at `dir` (`git ls-tree -r -t -l -z`, streamed)
 * against `limits` before anything is checked out: more files and symlinks than
 * `maxEntries`, more directories (submodule entries included) than `maxDirs`, a blob over `maxFileBytes`, more bytes than
 * `maxTotalBytes`, a path over {@link MAX_PATH_BYTES} or a name over {@link MAX_NAME_BYTES}, or
 * nesting deeper than {@link MAX_CHECKOUT_DEPTH} is `LIMIT_EXCEEDED` (data: the limit and what
 * it counts); git is stopped at the first one. Rejects with `SETUP_FAILED` when git fails.
 */
export async function checkCommitTree(
  dir: string,
  commit: string,
  limits: ScanLimits,
  env: NodeJS.ProcessEnv,
  signal?: AbortSignal,
): Promise<TreeCounts> {
  const maxDirs = limits.maxDirs ?? DEFAULT_MAX_DIRS;
  const maxTotalBytes = limits.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES;
  let files = 0;
  let dirs = 0;
  let bytes = 0;
  let pending: Buffer = Buffer.alloc(0);
  const record = (entry: Buffer) => {
    const tab = entry.indexOf(0x09);
    const header = entry.subarray(0, tab).toString('latin1').split(/ +/);
    const entryPath = entry.subarray(tab + 1);
    if (entryPath.length > MAX_PATH_BYTES) throw tooMuch(MAX_PATH_BYTES, 'bytes of one path');
    const segments = entryPath.toString('latin1').split('/');
    if (segments.length > MAX_CHECKOUT_DEPTH) throw tooMuch(MAX_CHECKOUT_DEPTH, 'levels of directories');
    if (segments.some((s) => s.length > MAX_NAME_BYTES)) throw tooMuch(MAX_NAME_BYTES, 'bytes of one name');
    const type = header[1];
    // A submodule entry (gitlink) checks out as an empty directory of its own.
    if (type === 'tree' || type === 'commit') {
      dirs += 1;
      if (dirs > maxDirs) throw tooMuch(maxDirs, 'directories');
    } else if (type === 'blob') {
      const size = Number(header[3]);
      if (size > limits.maxFileBytes) throw tooMuch(limits.maxFileBytes, 'bytes in one file');
      files += 1;
      bytes += size;
      if (files > limits.maxEntries) throw tooMuch(limits.maxEntries, 'files and symlinks');
      if (bytes > maxTotalBytes) throw tooMuch(maxTotalBytes, 'bytes of files');
    }
  };
  const result = await runGit(['ls-tree', '-r', '-t', '-l', '-z', '--full-tree', commit], {
    cwd: dir,
    env,
    timeoutMs: LS_TREE_TIMEOUT_MS,
    stderrChars: STDERR_CHARS,
    ...(signal === undefined ? {} : { signal }),
    onStdout: (chunk) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let start = 0;
      for (let end = pending.indexOf(0, start); end >= 0; end = pending.indexOf(0, start)) {
        record(pending.subarray(start, end));
        start = end + 1;
      }
      pending = pending.subarray(start);
      if (pending.length > MAX_PATH_BYTES * 2) throw tooMuch(MAX_PATH_BYTES, 'bytes of one path');
    },
  });
  if (result.stdoutError !== undefined) throw result.stdoutError;
  signal?.throwIfAborted();
  if (result.code !== 0) {
    throw new HoldfastError('SETUP_FAILED', `the repository's commit ${commit} cannot be listed (git ls-tree exit ${result.code})`, {
      data: { commit, exitCode: result.code },
    });
  }
  return { files, dirs, bytes };
}

function tooMuch(limit: number, what: string): InputError {
  return new InputError('LIMIT_EXCEEDED', `the repository's tree has more than ${limit} ${what}: it is not checked out`, {
    data: { limit, what },
  });
}
