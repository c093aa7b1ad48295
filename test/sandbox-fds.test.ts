import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBwrapInstalled } from './support/sandbox-processes.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'bin', 'main.js');

/**
 * Where the parent puts its extra descriptors in the Holdfast process. Node's start-up marks
 * fds 0-15 and the unbroken run after them close-on-exec, so a supervisor's descriptor past a
 * gap stays inheritable; these are past one.
 */
const HOST_FILE_FD = 40;
const HOST_DIR_FD = 41;
const LEAKED_FDS = [HOST_FILE_FD, HOST_DIR_FD];
const HOST_BYTES = 'host file: must not change\n';
/** Linux's O_CLOEXEC in /proc/<pid>/fdinfo `flags:` (octal). */
const O_CLOEXEC = 0o2000000;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The attacker's script, run by the shell bwrap (or the local provider) starts: list the
 * shell's own open descriptors, then read, overwrite and create through every leaked number.
 */
const ATTACK = [
  'for f in /proc/$$/fd/*; do [ -e "$f" ] && echo "fd $(basename "$f") $(readlink "$f")"; done',
  `cat /proc/self/fd/${HOST_FILE_FD}`,
  `echo pwned > /proc/self/fd/${HOST_FILE_FD}`,
  `echo pwned >> /proc/self/fd/${HOST_FILE_FD}`,
  `echo pwned > /proc/self/fd/${HOST_DIR_FD}/created`,
  `mkdir /proc/self/fd/${HOST_DIR_FD}/created-dir`,
  'true',
].join('; ');

/** The `fd N target` lines the attack printed, as [N, target]. */
function fdLines(stdout: string): Array<[number, string]> {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('fd '))
    .map((line) => {
      const [, fd, target] = line.split(' ');
      return [Number(fd), target ?? ''];
    });
}

describe('sandboxes inherit no descriptor from the process that started Holdfast', () => {
  let dir: string;
  let hostFile: string;
  let hostDir: string;
  let fileFd: number;
  let dirFd: number;

  /** Runs `node <stdio-less script>` or the holdfast bin as a supervisor would: with the host file and directory open at 40 and 41. */
  const withLeakedFds = (args: string[]): Promise<Run> =>
    new Promise((resolve, reject) => {
      const stdio: Array<'pipe' | 'ignore' | number> = ['ignore', 'pipe', 'pipe'];
      while (stdio.length < HOST_FILE_FD) stdio.push('ignore');
      stdio.push(fileFd, dirFd);
      const env = { ...process.env, HOLDFAST_SANDBOX_DIR: path.join(dir, 'sandboxes') };
      const child = spawn(process.execPath, args, { env, stdio });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, stdout, stderr }));
    });
  const holdfast = (args: string[]): Promise<Run> => withLeakedFds([bin, ...args]);

  beforeAll(() => {
    expectBwrapInstalled();
    expect(fs.existsSync(bin), `${bin} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-sbx-fds-'));
    hostFile = path.join(dir, 'host-file');
    hostDir = path.join(dir, 'host-dir');
    fs.writeFileSync(hostFile, HOST_BYTES);
    fs.mkdirSync(hostDir);
    fileFd = fs.openSync(hostFile, 'r+');
    dirFd = fs.openSync(hostDir, 'r');
  });
  afterAll(() => {
    if (fileFd !== undefined) fs.closeSync(fileFd);
    if (dirFd !== undefined) fs.closeSync(dirFd);
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the setup is real: a Node process started this way holds both host descriptors, inheritable', async () => {
    const script = `const fs = require('fs'); for (const fd of ${JSON.stringify(LEAKED_FDS)}) console.log(fd, fs.readlinkSync('/proc/self/fd/' + fd), (parseInt(/flags:\\s*([0-7]+)/.exec(fs.readFileSync('/proc/self/fdinfo/' + fd, 'utf8'))[1], 8) & ${O_CLOEXEC}) === 0)`;
    const run = await withLeakedFds(['-e', script]);
    expect(run.stdout).toBe(`${HOST_FILE_FD} ${hostFile} true\n${HOST_DIR_FD} ${hostDir} true\n`);
  });

  it('bwrap: the sandbox holds only its stdio and reads, writes and creates nothing through the host descriptors', async () => {
    const created = await holdfast(['sandbox', 'create', '--provider', 'bwrap']);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const attack = await holdfast(['sandbox', 'exec', id, '--', 'sh', '-c', ATTACK]);
    expect(attack.code, attack.stderr).toBe(0);
    expect(fdLines(attack.stdout).map(([fd]) => fd)).toEqual([0, 1, 2]);
    expect(attack.stdout).not.toContain(HOST_BYTES.trim());
    expect(fs.readFileSync(hostFile, 'utf8')).toBe(HOST_BYTES);
    expect(fs.readdirSync(hostDir)).toEqual([]);
    expect((await holdfast(['sandbox', 'destroy', id])).code).toBe(0);
  });

  it('local: the command holds nothing of the host at those numbers, only read-only /dev/null placeholders', async () => {
    const created = await holdfast(['sandbox', 'create', '--provider', 'local']);
    expect(created.code, created.stderr).toBe(0);
    const id = created.stdout.trim();
    const attack = await holdfast(['sandbox', 'exec', id, '--', 'sh', '-c', ATTACK]);
    expect(attack.code, attack.stderr).toBe(0);
    const held = fdLines(attack.stdout).filter(([fd]) => fd > 2);
    expect(held.map(([fd]) => fd)).toEqual(expect.arrayContaining(LEAKED_FDS));
    expect(held.map(([, target]) => target)).toEqual(held.map(() => '/dev/null'));
    expect(attack.stdout).not.toContain(HOST_BYTES.trim());
    expect(fs.readFileSync(hostFile, 'utf8')).toBe(HOST_BYTES);
    expect(fs.readdirSync(hostDir)).toEqual([]);
    expect((await holdfast(['sandbox', 'destroy', id])).code).toBe(0);
  });
});
