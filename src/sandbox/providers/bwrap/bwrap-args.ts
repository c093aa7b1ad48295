import fs from 'node:fs';
import path from 'node:path';

/** Where the workspace disk is mounted inside every bwrap sandbox. */
export const BWRAP_WORKSPACE = '/workspace';
/** The agent's home inside the sandbox, outside the workspace. */
export const BWRAP_HOME = '/home/agent';
/** The unprivileged user commands run as inside the sandbox's user namespace. */
export const BWRAP_UID = 1000;
export const BWRAP_GID = 1000;
/** PATH inside the sandbox: system directories only (they are all under the read-only /usr). */
export const BWRAP_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Size bound of the private /tmp (a tmpfs, so it is RAM). */
export const BWRAP_TMP_SIZE_BYTES = 512 * 1024 * 1024;
const HOSTNAME = 'sandbox';

/**
 * Top-level system paths that merged-/usr hosts keep as symlinks into /usr (re-created as the
 * same symlinks) and older hosts keep as directories (bound read-only).
 */
const SYSTEM_TOP_LEVEL = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/**
 * Host /etc entries the dynamic loader and common tools need, bound read-only. The rest of the
 * host's /etc (credentials, service configs, resolv.conf) stays out.
 */
const HOST_ETC_ENTRIES = ['/etc/ld.so.cache', '/etc/alternatives', '/etc/localtime'];

/** The identity files every sandbox gets instead of the host's (`agent` is uid 1000, home /home/agent). */
export const SANDBOX_ETC_FILES: Readonly<Record<string, string>> = Object.freeze({
  passwd: `root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:${BWRAP_UID}:${BWRAP_GID}:agent:${BWRAP_HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
  group: `root:x:0:\nagent:x:${BWRAP_GID}:\nnogroup:x:65534:\n`,
  hosts: `127.0.0.1 localhost ${HOSTNAME}\n::1 localhost ip6-localhost ip6-loopback\n`,
  'nsswitch.conf': 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n',
});

/** One exec as bwrap needs to know it. */
export interface BwrapInvocation {
  /** Host directory with `workspace/`, `home/` and `etc/` of this sandbox. */
  readonly diskPath: string;
  /** Absolute working directory inside the sandbox. */
  readonly cwd: string;
  /** Mount arguments for the host's system directories, from {@link systemMountArgs}. */
  readonly systemMounts: readonly string[];
}

/**
 * The bwrap options (everything before `--`) for one exec. Every namespace is new: user (the
 * command runs as uid 1000 with no capabilities, and may not create further user namespaces),
 * pid (killing bwrap takes every process of the exec down), network (loopback only), ipc, uts,
 * cgroup. The root is an empty tmpfs made read-only once everything is mounted, so the only
 * writable places are the sandbox's own disk and a size-bounded private /tmp.
 */
export function bwrapArgs(inv: BwrapInvocation): string[] {
  const etc = path.join(inv.diskPath, 'etc');
  return [
    ...['--unshare-user', '--uid', String(BWRAP_UID), '--gid', String(BWRAP_GID), '--disable-userns'],
    ...['--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--hostname', HOSTNAME],
    // SIGKILL to the command when bwrap or its parent (Holdfast) dies; a new session so the command cannot push input into a host terminal.
    ...['--die-with-parent', '--new-session'],
    ...inv.systemMounts,
    ...Object.keys(SANDBOX_ETC_FILES).flatMap((name) => ['--ro-bind', path.join(etc, name), `/etc/${name}`]),
    ...['--proc', '/proc', '--dev', '/dev'],
    ...['--perms', '1777', '--size', String(BWRAP_TMP_SIZE_BYTES), '--tmpfs', '/tmp'],
    ...['--bind', path.join(inv.diskPath, 'workspace'), BWRAP_WORKSPACE],
    ...['--bind', path.join(inv.diskPath, 'home'), BWRAP_HOME],
    ...['--remount-ro', '/'],
    ...['--chdir', inv.cwd],
  ];
}

/**
 * Makes bwrap close `fd` before it starts the command: `--args FD` reads further arguments from
 * FD and closes it, and the `/dev/null` placeholder Holdfast puts at every descriptor bwrap would
 * otherwise inherit holds none. So the sandboxed process holds only its stdio.
 */
export function bwrapCloseFdArgs(fd: number): string[] {
  return ['--args', String(fd)];
}

/**
 * Read-only mounts of the host's system: /usr, the top-level directories or their merged-/usr
 * symlinks, the needed /etc entries, and `extraPaths` (for example a Node installed under
 * /opt). Computed once per provider, from the host as it is.
 */
export function systemMountArgs(extraPaths: readonly string[] = []): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const top of SYSTEM_TOP_LEVEL) {
    const stat = fs.lstatSync(top, { throwIfNoEntry: false });
    if (stat?.isSymbolicLink() === true) args.push('--symlink', fs.readlinkSync(top), top);
    else if (stat?.isDirectory() === true) args.push('--ro-bind', top, top);
  }
  for (const entry of HOST_ETC_ENTRIES) args.push('--ro-bind-try', entry, entry);
  for (const extra of extraPaths) args.push('--ro-bind', extra, extra);
  return args;
}

/** Writes the sandbox's identity files into `diskPath/etc`. */
export async function writeSandboxEtc(diskPath: string): Promise<void> {
  const etc = path.join(diskPath, 'etc');
  await fs.promises.mkdir(etc);
  for (const [name, content] of Object.entries(SANDBOX_ETC_FILES)) {
    await fs.promises.writeFile(path.join(etc, name), content, { mode: 0o644 });
  }
}
