import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Docker images for the tests, assembled from this host's files and loaded with `docker
 * import` (this machine reaches no registry, and nothing is ever pulled). Each image is tagged
 * by a hash of everything that goes into it, so building is idempotent: a tag that exists is
 * reused. Concurrent test workers may build the same tag at once; both imports produce the
 * same content and the last tag wins, which is harmless.
 */

/** Where the busybox-static package puts its binary. */
const BUSYBOX = '/bin/busybox';
/** Bumped whenever the layout below changes, so old tags are not reused. */
const LAYOUT_VERSION = 'v1';
const REPOSITORY = 'holdfast-test';

const PASSWD =
  'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n';
const GROUP = 'root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n';

/** Fails (never skips) when docker or busybox-static is missing, naming what to install. */
export function expectDockerInstalled(): void {
  const info = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8' });
  if (info.status !== 0) {
    throw new Error(
      `docker is not usable (${info.stderr.trim() || info.error?.message}): install docker.io and start dockerd (.ci/run does both)`,
    );
  }
  if (!fs.existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: apt-get install busybox-static`);
}

/** A busybox-only image: /bin/busybox and its applets, /tmp, /etc/passwd with the uid 1000 `agent`. */
export function busyboxImage(): string {
  expectDockerInstalled();
  return buildImage('busybox', [BUSYBOX], () => undefined);
}

/**
 * Busybox plus this host's Node (`process.execPath` at /usr/local/bin/node) with the shared
 * libraries `ldd` lists, so the in-sandbox agent runs.
 */
export function nodeImage(): string {
  expectDockerInstalled();
  const libs = sharedLibraries(process.execPath);
  const inputs = [BUSYBOX, process.execPath, ...libs, '/etc/ld.so.cache'];
  return buildImage('node', inputs, (root) => {
    copyInto(root, process.execPath, '/usr/local/bin/node');
    for (const lib of libs) copyInto(root, lib, lib);
    if (fs.existsSync('/etc/ld.so.cache')) copyInto(root, '/etc/ld.so.cache', '/etc/ld.so.cache');
  });
}

/** Where Debian puts git's helper programs (`git --exec-path`): most are symlinks to `git`. */
const GIT_CORE = '/usr/lib/git-core';
const GIT = '/usr/bin/git';

/**
 * {@link nodeImage} plus this host's git: `/usr/bin/git`, `/usr/lib/git-core/` (its symlinks
 * kept as symlinks) and the shared libraries `ldd` lists for every program in it, so repository
 * checkouts can be used in the sandbox. Fails, naming the package, when the host has no git.
 */
export function gitImage(): string {
  expectDockerInstalled();
  if (!fs.existsSync(GIT) || !fs.existsSync(GIT_CORE)) throw new Error(`${GIT} or ${GIT_CORE} is missing: apt-get install git`);
  const core = treeFiles(GIT_CORE);
  const programs = [GIT, process.execPath, ...core.filter(isElf)];
  const libs = [...new Set(programs.flatMap(sharedLibraries))].sort();
  const inputs = [BUSYBOX, ...programs, ...core, ...libs, '/etc/ld.so.cache'];
  return buildImage('git', [...new Set(inputs)], (root) => {
    copyInto(root, process.execPath, '/usr/local/bin/node');
    copyInto(root, GIT, GIT);
    copyTree(root, GIT_CORE);
    for (const lib of libs) copyInto(root, lib, lib);
    if (fs.existsSync('/etc/ld.so.cache')) copyInto(root, '/etc/ld.so.cache', '/etc/ld.so.cache');
  });
}

/** Every regular file under `dir` (symlinks not followed). */
function treeFiles(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[])
    .map((rel) => path.join(dir, rel))
    .filter((p) => fs.lstatSync(p).isFile())
    .sort();
}

/** True for an ELF binary (git-core also holds shell and Perl scripts). */
function isElf(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(4);
    fs.readSync(fd, head, 0, 4, 0);
    return head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    fs.closeSync(fd);
  }
}

/** Copies host directory `dir` to the same path inside `root`, symlinks as symlinks, modes kept. */
function copyTree(root: string, dir: string): void {
  fs.mkdirSync(path.join(root, dir), { recursive: true });
  for (const name of fs.readdirSync(dir)) {
    const from = path.join(dir, name);
    const to = path.join(root, from);
    const st = fs.lstatSync(from);
    if (st.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
    else if (st.isDirectory()) copyTree(root, from);
    else copyInto(root, from, from);
  }
}

/** Builds `holdfast-test/<name>:<hash>` unless it exists; `extra` adds files to the busybox root. */
function buildImage(name: string, inputs: readonly string[], extra: (root: string) => void): string {
  const hash = createHash('sha256').update(`${LAYOUT_VERSION}\n${PASSWD}${GROUP}`);
  for (const input of inputs) {
    const stat = fs.statSync(input);
    hash.update(`${input}\0${stat.size}\0${stat.mtimeMs}\n`);
  }
  const tag = `${REPOSITORY}/${name}:${hash.digest('hex').slice(0, 16)}`;
  if (spawnSync('docker', ['image', 'inspect', tag], { stdio: 'ignore' }).status === 0) return tag;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `hf-image-${name}-`));
  try {
    busyboxRoot(root);
    extra(root);
    const tar = path.join(os.tmpdir(), `hf-image-${name}-${process.pid}-${Date.now()}.tar`);
    try {
      execFileSync('tar', ['--numeric-owner', '--owner=0', '--group=0', '-C', root, '-cf', tar, '.']);
      execFileSync('docker', ['import', tar, tag], { stdio: ['ignore', 'ignore', 'pipe'] });
    } finally {
      fs.rmSync(tar, { force: true });
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  return tag;
}

/** The busybox root: every applet as a symlink in /bin, identity files, an empty /tmp. */
function busyboxRoot(root: string): void {
  for (const dir of ['bin', 'etc', 'tmp', 'proc', 'dev', 'sys', 'home', 'usr/local/bin'])
    fs.mkdirSync(path.join(root, dir), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.copyFileSync(BUSYBOX, path.join(root, 'bin', 'busybox'));
  fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
  const applets = execFileSync(BUSYBOX, ['--list'], { encoding: 'utf8' })
    .split('\n')
    .filter((a) => /^[a-z0-9_.[-]+$/.test(a));
  for (const applet of applets) {
    if (applet !== 'busybox') fs.symlinkSync('busybox', path.join(root, 'bin', applet));
  }
  fs.writeFileSync(path.join(root, 'etc', 'passwd'), PASSWD);
  fs.writeFileSync(path.join(root, 'etc', 'group'), GROUP);
}

/** Absolute paths of the shared libraries (and the loader) `ldd` lists for `binary`. */
function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  const libs: string[] = [];
  for (const line of out.split('\n')) {
    const match = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (match?.[1] !== undefined) libs.push(match[1]);
  }
  if (libs.length === 0) throw new Error(`ldd listed no libraries for ${binary}:\n${out}`);
  return libs;
}

/** Copies host file `from` (following symlinks) to `to` inside `root`. */
function copyInto(root: string, from: string, to: string): void {
  const target = path.join(root, to);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(fs.realpathSync(from), target);
  fs.chmodSync(target, fs.statSync(from).mode & 0o777);
}
