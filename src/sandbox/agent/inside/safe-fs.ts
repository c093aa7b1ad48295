import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { splitRelativePath } from '../../../core/paths.js';
import { type ErrorCode, errorFor, HoldfastError, InputError, NotFoundError } from '../../../errors.js';
import { LongPaths } from '../../../workspace-fs/long-paths.js';
import { UNLINKED_ROOT } from '../wire/protocol.js';

export { fsyncDir, writeFileAtomic } from '../../../workspace-fs/atomic-file.js';
/** Shared with the host, which removes restore staging the same way. */
export { removeTree } from '../../../workspace-fs/remove-tree.js';

const { O_RDONLY, O_NOFOLLOW } = fs.constants;
const HASH_BLOCK_BYTES = 4 * 1024 * 1024;

/**
 * Resolves workspace-relative paths under `base` without ever following a symlink: every
 * parent segment must be a real directory (checked with `lstat`), and callers open the last
 * segment with `O_NOFOLLOW`. Directories verified once are remembered for the resolver's life,
 * which is one request: long enough to save repeated `lstat`s, short enough that a directory
 * replaced between requests is seen.
 *
 * Paths are text whose byte escapes stand for bytes that are not UTF-8 (`core/name-bytes.ts`)
 * and may be longer than one system call takes: every `fs` call goes through {@link at}, which
 * gives the raw bytes and reaches deep paths through open directories (`workspace-fs/long-paths.ts`).
 * {@link close} releases those directories; {@link withResolver} does it when a request ends.
 */
export class NoFollowResolver {
  private readonly dirs = new Set<string>(['']);
  private readonly long = new LongPaths();

  constructor(readonly base: string) {}

  /** Records a directory this request created itself. */
  markDir(rel: string): void {
    this.dirs.add(rel);
  }

  /**
   * The absolute path of the validated root-relative `rel` (`INVALID_PATH` / `NOT_FOUND`), as
   * text: hand it to `fs` only through {@link at}. Parents in `planned` are taken as
   * directories a batch will create before using them.
   */
  resolve(rel: string, planned?: ReadonlySet<string>): string {
    return this.walk(rel, planned, false);
  }

  /** Like `resolve`, but creates missing parents (mode 0700, one segment at a time). */
  resolveCreatingParents(rel: string): string {
    return this.walk(rel, undefined, true);
  }

  /** What to hand to one `fs` call for the absolute path `abs` (from {@link resolve}, or the base). */
  at(abs: string): string | Buffer {
    return this.long.at(abs);
  }

  /** Closes the directories held open for long paths; the resolver stays usable. */
  close(): void {
    this.long.close();
  }

  private walk(rel: string, planned: ReadonlySet<string> | undefined, create: boolean): string {
    const segments = splitRelativePath(rel);
    let prefix = '';
    for (let i = 0; i < segments.length - 1; i += 1) {
      prefix = prefix === '' ? (segments[i] as string) : `${prefix}/${segments[i]}`;
      if (this.dirs.has(prefix) || planned?.has(prefix) === true) continue;
      const abs = this.at(path.join(this.base, prefix));
      let st = fs.lstatSync(abs, { throwIfNoEntry: false });
      if (st === undefined && create) {
        fs.mkdirSync(abs, { mode: 0o700 });
        st = fs.lstatSync(abs);
      }
      if (st === undefined) {
        throw new NotFoundError(`parent directory "${prefix}" of "${rel}" does not exist`, { data: { path: rel, parent: prefix } });
      }
      if (!st.isDirectory()) {
        throw new InputError('INVALID_PATH', `"${rel}" leads through "${prefix}", which is not a directory (symlinks are never followed)`, {
          data: { path: rel, parent: prefix },
        });
      }
      this.dirs.add(prefix);
    }
    return path.join(this.base, ...segments);
  }
}

/** Runs `use` with a resolver for `base`, closed afterwards (also when `use` throws or its promise rejects). */
export function withResolver<T>(base: string, use: (resolver: NoFollowResolver) => T): T {
  const resolver = new NoFollowResolver(base);
  let result: T;
  try {
    result = use(resolver);
  } catch (error) {
    resolver.close();
    throw error;
  }
  if (result instanceof Promise) return result.finally(() => resolver.close()) as T;
  resolver.close();
  return result;
}

/** SHA-256 of a regular file read block by block, never following a symlink at `abs`. */
/**
 * Refuses a directory that has been removed while this process still reaches it (a link count
 * of 0): a host tool that deleted and recreated a sandbox's workspace leaves a long-lived agent
 * looking at the old, empty directory its sandbox had mounted, and a scan of it would record an
 * empty tree as the workspace. `NOT_FOUND` with `data.reason` {@link UNLINKED_ROOT}.
 */
export function refuseUnlinkedDir(abs: string): void {
  const st = fs.statSync(abs, { throwIfNoEntry: false });
  if (st?.isDirectory() === true && st.nlink === 0) {
    throw new NotFoundError(`${abs} was removed while this agent ran: a new agent sees the directory there now`, {
      data: { root: abs, reason: UNLINKED_ROOT },
    });
  }
}

export function hashFile(abs: string | Buffer): string {
  const fd = fs.openSync(abs, O_RDONLY | O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    const block = Buffer.allocUnsafe(HASH_BLOCK_BYTES);
    for (;;) {
      const n = fs.readSync(fd, block, 0, HASH_BLOCK_BYTES, null);
      if (n === 0) return hash.digest('hex');
      hash.update(block.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
}

const ERRNO_CODES: Readonly<Record<string, ErrorCode>> = {
  ENOENT: 'NOT_FOUND',
  EEXIST: 'ALREADY_EXISTS',
  ENOTEMPTY: 'CONFLICT',
  ELOOP: 'INVALID_PATH',
  ENOTDIR: 'INVALID_PATH',
  EISDIR: 'INVALID_PATH',
  ENAMETOOLONG: 'INVALID_PATH',
  ENOSPC: 'LIMIT_EXCEEDED',
  EDQUOT: 'LIMIT_EXCEEDED',
  EFBIG: 'LIMIT_EXCEEDED',
  EACCES: 'FORBIDDEN',
  EPERM: 'FORBIDDEN',
  EROFS: 'FORBIDDEN',
};

/** Any thrown value as a `HoldfastError`: filesystem errnos get their closest code, the rest `INTERNAL`. */
export function toHoldfastError(error: unknown, op: string): HoldfastError {
  if (error instanceof HoldfastError) return error;
  const errno = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof errno === 'string') {
    const code = ERRNO_CODES[errno] ?? 'INTERNAL';
    return errorFor(code, `[agent] ${op}: ${message}`, {
      data: { errno, syscall: (error as { syscall?: unknown }).syscall ?? null },
    });
  }
  return new HoldfastError('INTERNAL', `[agent] ${op} failed: ${message}`);
}
