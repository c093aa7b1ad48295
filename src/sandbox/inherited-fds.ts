import fs from 'node:fs';
import { HoldfastError } from '../errors.js';

/**
 * Keeping the host's descriptors out of sandboxes (DESIGN §14: sandbox processes inherit
 * nothing from the host but their own stdio).
 *
 * A descriptor the process that started Holdfast left open without close-on-exec (a
 * supervisor's log file, a shell's `exec 30<>file`) is inherited by every child: libuv never
 * closes descriptors past the child's stdio, and Node's start-up marks only fds 0-15 and the
 * unbroken run after them close-on-exec. Node cannot set or clear close-on-exec itself, so at
 * each spawn we find every such descriptor and give the child a read-only `/dev/null` in its
 * place: what the child holds at that number is then a placeholder, never the host's file.
 * A command that can close descriptors before it starts anything (bwrap: `--args FD`) closes
 * the placeholders too, so the sandboxed process sees only its stdio.
 */

/** Linux's O_CLOEXEC as `/proc/<pid>/fdinfo/<fd>` prints it (the `flags:` line, octal). */
const O_CLOEXEC = 0o2000000;
/** Where Linux lists this process's descriptors, with their flags beside them. */
const PROC_FD_DIR = '/proc/self/fd';
const PROC_FDINFO_DIR = '/proc/self/fdinfo';
/** Where other systems list descriptors (without flags: every one counts as inheritable). */
const DEV_FD_DIR = '/dev/fd';
/** First descriptor past stdio. */
const FIRST_NON_STDIO_FD = 3;

/** One `stdio` entry as `child_process.spawn` takes it. */
export type StdioEntry = 'pipe' | 'ignore' | number;

/** A spawn's `stdio` with every inheritable host descriptor covered, and which numbers were covered. */
export interface SealedStdio {
  /** `base`, then a `/dev/null` placeholder at every inheritable descriptor number past it ('ignore' between). */
  readonly stdio: StdioEntry[];
  /** The descriptor numbers that hold a placeholder in the child, ascending. */
  readonly placeholders: readonly number[];
}

let devNullFd: number | undefined;

/**
 * Extends `base` (the child's own stdio and extra pipes, index = descriptor number) so that
 * no descriptor of this process reaches the child: every open descriptor at or past
 * `base.length` without close-on-exec becomes a read-only `/dev/null` in the child. Lists
 * this process's descriptor table on every call, so a descriptor opened since the last spawn
 * is covered too.
 * Throws `INTERNAL` when the table cannot be listed at all: a spawn that cannot be sealed
 * does not happen.
 */
export function sealedStdio(base: readonly StdioEntry[]): SealedStdio {
  const placeholders = inheritableFds().filter((fd) => fd >= base.length);
  const stdio: StdioEntry[] = [...base];
  if (placeholders.length === 0) return { stdio, placeholders };
  devNullFd ??= fs.openSync('/dev/null', 'r'); // opened close-on-exec, like every descriptor Node opens
  for (const fd of placeholders) {
    while (stdio.length < fd) stdio.push('ignore'); // past stdio, 'ignore' leaves the (close-on-exec) descriptor alone
    stdio[fd] = devNullFd;
  }
  return { stdio, placeholders };
}

/**
 * Whether each descriptor seen so far is inheritable, so a spawn reads the flags only of
 * descriptors new since the last one. A number that leaves the table is forgotten and read
 * again once reused. The answer cannot go stale in the unsafe direction: only fcntl clears
 * close-on-exec, and Node cannot call it; a number reused by Node (close-on-exec) while still
 * remembered as inheritable only gets a placeholder it did not need.
 */
const inheritable = new Map<number, boolean>();

/**
 * Descriptors of this process, from 3 up, that a child would inherit: open and without
 * close-on-exec. A descriptor whose flags cannot be read counts as inheritable. Costs one
 * listing of the table plus one read per descriptor not seen before.
 */
export function inheritableFds(): number[] {
  const procFds = listFds(PROC_FD_DIR);
  const fds = procFds ?? listFds(DEV_FD_DIR);
  if (fds === undefined) {
    throw new HoldfastError(
      'INTERNAL',
      `cannot list this process's open descriptors (${PROC_FD_DIR}, ${DEV_FD_DIR}), so a sandbox could inherit them: mount procfs`,
    );
  }
  const open = new Set(fds);
  for (const fd of inheritable.keys()) if (!open.has(fd)) inheritable.delete(fd);
  const found: number[] = [];
  for (const fd of fds) {
    if (fd < FIRST_NON_STDIO_FD) continue;
    let known = inheritable.get(fd);
    if (known === undefined) {
      const flags = procFds === undefined ? undefined : fdFlags(fd);
      if (flags === null) continue; // closed since the listing (the listing's own descriptor, for one)
      known = flags === undefined || (flags & O_CLOEXEC) === 0;
      inheritable.set(fd, known);
    }
    if (known) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}

function listFds(dir: string): number[] | undefined {
  try {
    return fs
      .readdirSync(dir)
      .map(Number)
      .filter((fd) => Number.isSafeInteger(fd));
  } catch {
    return undefined;
  }
}

/** Bytes read of an fdinfo file: `pos:` and `flags:` are its first two lines. */
const FDINFO_HEAD_BYTES = 64;
const fdinfoHead = Buffer.alloc(FDINFO_HEAD_BYTES);

/** The open flags of `fd`; null once it is closed; undefined when they cannot be read. */
function fdFlags(fd: number): number | null | undefined {
  let length: number;
  try {
    const info = fs.openSync(`${PROC_FDINFO_DIR}/${fd}`, 'r');
    try {
      length = fs.readSync(info, fdinfoHead, 0, FDINFO_HEAD_BYTES, null);
    } finally {
      fs.closeSync(info);
    }
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? null : undefined;
  }
  const match = /^flags:\s*([0-7]+)$/m.exec(fdinfoHead.toString('latin1', 0, length));
  return match?.[1] === undefined ? undefined : Number.parseInt(match[1], 8);
}
