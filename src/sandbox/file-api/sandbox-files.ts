/**
 * The port for sandboxes that expose their files through a byte-safe file API (list, stat,
 * read and write bytes) rather than through a byte-clean exec: TanStack AI sandboxes
 * (`handle.fs`), E2B (`sandbox.files`), Daytona (`sandbox.fs`), Modal and Cloudflare. Holdfast
 * checkpoints and restores a workspace through it (`file-api-source.ts`, `file-api-target.ts`);
 * an adapter maps each call onto the provider's own API, and may use the provider's text-only
 * exec for the few calls it lacks (modes, times, links), since those answer in numbers.
 *
 * Paths are relative POSIX paths under the workspace root the adapter is rooted at: `''` is the
 * root itself, `src/a.txt` a file in it; never absolute, never with `.` or `..` segments. Names
 * are Holdfast's text (`core/name-bytes.ts`): a name that is not UTF-8 carries byte escapes.
 * Holdfast builds every path it passes from names it validated, so an adapter never sees an
 * escaping one; whatever an adapter returns is untrusted and checked by the host (DESIGN
 * section 14). No call follows a symlink in the path it is given, the last name included
 * (`lstat`, `remove`, `utimes` act on the link itself): an adapter whose provider cannot help
 * following one keeps that inside the sandbox, never on the host.
 */
export interface SandboxFiles {
  /** Shown in messages and receipts, e.g. `sandbox 1f2e:/workspace`. */
  readonly label: string;

  /**
   * The workspace root's absolute path as processes in the sandbox see it: absolute symlink
   * targets under it are kept (made relative), as a local scan keeps them. Absent: every
   * absolute target counts as escaping the workspace.
   */
  readonly workspaceRoot?: string;

  /**
   * The entries of directory `dir` with their `lstat`, in any order, without `.` and `..`.
   * Streamed: the host stops reading once a scan's bounds are passed, so an adapter should
   * yield as it pages through the provider's listing. Rejects (any error) when `dir` is not a
   * directory or cannot be read.
   */
  list(dir: string): AsyncIterable<ListedEntry>;

  /** The `lstat` of `path` (a symlink is reported as itself), or `undefined` when nothing is there. */
  lstat(path: string): Promise<FileStat | undefined>;

  /**
   * At most `length` bytes of regular file `path` from byte `offset` (fewer only at its end).
   * Holdfast never asks for more than {@link FILE_API_READ_BYTES} at once. Rejects when `path`
   * is not a regular file.
   */
  read(path: string, offset: number, length: number): Promise<Uint8Array>;

  /**
   * Writes `bytes` to regular file `path`: with `append` false a new file is created (owner
   * read and write only) and an existing entry of that name is an error; with `append` true
   * the bytes go at the end of the file an earlier `write` created. Holdfast never sends more
   * than {@link FILE_API_WRITE_BYTES} at once. Never follows a symlink.
   */
  write(path: string, bytes: Uint8Array, options: { readonly append: boolean }): Promise<void>;

  /** Creates directory `path` (its parent exists; an existing entry is an error), owner-only. */
  mkdir(path: string): Promise<void>;

  /** Renames `from` to `to`, replacing an empty directory or a file at `to` as `rename(2)` does. */
  rename(from: string, to: string): Promise<void>;

  /** Removes `path` and everything under it; never follows a symlink; nothing there is not an error. */
  remove(path: string): Promise<void>;

  /** The target of symlink `path`, as stored (bytes not UTF-8 as byte escapes). */
  readlink(path: string): Promise<string>;

  /** Creates symlink `path` with `target` as stored (no check, no resolution). */
  symlink(target: string, path: string): Promise<void>;

  /** Makes `path` a new hard link to regular file `existing`. */
  link(existing: string, path: string): Promise<void>;

  /** Sets the permission bits (`0o7777` at most) of `path`, a file or directory (never a symlink's target). */
  chmod(path: string, mode: number): Promise<void>;

  /** Sets the modification time of `path` to `mtimeMs` (whole milliseconds, before 1970 too); a symlink's own time. */
  utimes(path: string, mtimeMs: number): Promise<void>;
}

/** What `lstat` says of one entry. Every field is a claim the host checks. */
export interface FileStat {
  /** `other`: a socket, FIFO or device (left out of checkpoints as a special file). */
  readonly type: 'file' | 'dir' | 'symlink' | 'other';
  /** Permission bits with setuid, setgid and sticky (`st_mode & 0o7777`). */
  readonly mode: number;
  /** Bytes of a regular file; of a symlink, its target's length. */
  readonly size: number;
  /** Modification time in milliseconds since the epoch, with the fraction the filesystem keeps (as Node's `mtimeMs`). */
  readonly mtimeMs: number;
  /** Status-change time, the same way: a file rewritten with its old mtime still moves it. */
  readonly ctimeMs: number;
  /** Inode and device numbers (only compared: kept modulo 2^53 where they are larger). */
  readonly ino: number;
  readonly dev: number;
  /** Hard links to this inode. */
  readonly nlink: number;
}

/** One entry of a {@link SandboxFiles.list}: its name in the listed directory and its `lstat`. */
export interface ListedEntry extends FileStat {
  readonly name: string;
}

/** Most bytes Holdfast asks of one {@link SandboxFiles.read}: larger files are read in pieces. */
export const FILE_API_READ_BYTES = 16 * 1024 * 1024;

/** Most bytes Holdfast sends in one {@link SandboxFiles.write}: larger files are written in appended pieces. */
export const FILE_API_WRITE_BYTES = 16 * 1024 * 1024;
