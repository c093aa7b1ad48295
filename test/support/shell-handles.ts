import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { InputError } from '../../src/errors.js';
import { runBuffered } from '../../src/sandbox/run-buffered.js';
import type { ExecOptions, ExecProcess, RunOptions, RunResult, SandboxHandle } from '../../src/sandbox/sandbox-provider.js';

/**
 * A fault double around a real handle for a provider that cannot stream stdin: it declares
 * `stdin: false` and throws `INVALID_INPUT` when stdin is passed, so a transport that needs
 * stdin fails loudly instead of working by accident. `execs` counts the calls.
 */
export function withoutStdin(inner: SandboxHandle): SandboxHandle & { readonly capabilities: { stdin: false }; execs: number } {
  const refuse = (options?: ExecOptions): void => {
    if (options?.stdin !== undefined) throw new InputError('INVALID_INPUT', 'this provider takes no stdin');
  };
  const handle = {
    capabilities: { stdin: false as const },
    execs: 0,
    id: inner.id,
    provider: inner.provider,
    workspaceRoot: inner.workspaceRoot,
    agentHome: inner.agentHome,
    exec(argv: readonly string[], options?: ExecOptions): ExecProcess {
      refuse(options);
      handle.execs += 1;
      return inner.exec(argv, options);
    },
    run(argv: readonly string[], options?: RunOptions): Promise<RunResult> {
      refuse(options);
      handle.execs += 1;
      return inner.run(argv, options);
    },
  };
  return handle;
}

/**
 * A fault double that lets a test rewrite what the sandbox prints for commands whose script
 * contains `marker` (a lying sandbox); every other command runs unchanged.
 */
export function lyingHandle(inner: SandboxHandle, marker: string, lie: (stdout: Buffer) => Buffer): SandboxHandle {
  return {
    id: inner.id,
    provider: inner.provider,
    workspaceRoot: inner.workspaceRoot,
    agentHome: inner.agentHome,
    exec: (argv, options) => inner.exec(argv, options),
    run: async (argv, options) => {
      const got = await inner.run(argv, options);
      return argv.some((a) => a.includes(marker)) ? { ...got, stdout: lie(got.stdout) } : got;
    },
  };
}

/** Image tag of the busybox-only root file system the tests build. */
export const BUSYBOX_IMAGE = 'holdfast-test-busybox:1';

/**
 * Builds (once per daemon) an image that holds nothing but a static busybox with its applets
 * as symlinks, /tmp, /etc/passwd and an empty /workspace owned by uid 1000: `docker import` of
 * a root file system assembled here (no registry is reachable). Fails when docker is missing.
 */
export function ensureBusyboxImage(): string {
  try {
    execFileSync('docker', ['image', 'inspect', BUSYBOX_IMAGE], { stdio: 'ignore' });
    return BUSYBOX_IMAGE;
  } catch {
    // Not built yet.
  }
  const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), 'holdfast-bb-rootfs-'));
  try {
    for (const d of ['bin', 'tmp', 'etc', 'workspace', 'home/user']) fs.mkdirSync(path.join(rootfs, d), { recursive: true });
    fs.copyFileSync('/bin/busybox', path.join(rootfs, 'bin/busybox'));
    fs.chmodSync(path.join(rootfs, 'bin/busybox'), 0o755);
    const applets = execFileSync('/bin/busybox', ['--list'], { encoding: 'utf8' })
      .split('\n')
      .filter((a) => a !== '' && a !== 'busybox');
    for (const a of applets) fs.symlinkSync('busybox', path.join(rootfs, 'bin', a));
    fs.chmodSync(path.join(rootfs, 'tmp'), 0o1777);
    fs.writeFileSync(path.join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n');
    fs.writeFileSync(path.join(rootfs, 'etc/group'), 'root:x:0:\nuser:x:1000:\n');
    fs.chownSync(path.join(rootfs, 'workspace'), 1000, 1000);
    fs.chownSync(path.join(rootfs, 'home/user'), 1000, 1000);
    const tar = execFileSync('tar', ['-C', rootfs, '--numeric-owner', '-cf', '-', '.'], { maxBuffer: 64 * 1024 * 1024 });
    execFileSync('docker', ['import', '-c', 'ENV PATH=/bin', '-', BUSYBOX_IMAGE], { input: tar, stdio: ['pipe', 'ignore', 'inherit'] });
    return BUSYBOX_IMAGE;
  } finally {
    fs.rmSync(rootfs, { recursive: true, force: true });
  }
}

/**
 * A test double of a sandbox handle over the `docker exec` CLI (the Docker provider proper is
 * built elsewhere): a container of {@link ensureBusyboxImage} running as uid 1000, without
 * network, with /workspace on an anonymous volume (a mount point, as a provider gives it).
 * `destroy` removes the container with its volume.
 */
export class DockerExecHandle implements SandboxHandle {
  readonly provider = 'docker-test';
  readonly workspaceRoot = '/workspace';
  readonly agentHome = '/home/user';

  private constructor(readonly id: string) {}

  /** Starts a fresh container. */
  static create(): DockerExecHandle {
    const image = ensureBusyboxImage();
    const name = `holdfast-shell-test-${randomBytes(6).toString('hex')}`;
    execFileSync(
      'docker',
      ['run', '-d', '--name', name, '--network', 'none', '--user', '1000:1000', '-v', '/workspace', image, 'sleep', '1000000'],
      {
        stdio: 'ignore',
      },
    );
    return new DockerExecHandle(name);
  }

  exec(argv: readonly string[], options: ExecOptions = {}): ExecProcess {
    const env = Object.entries(options.env ?? {}).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    const child: ChildProcess = spawn(
      'docker',
      ['exec', ...(options.stdin === undefined ? [] : ['-i']), ...env, '-w', options.cwd ?? this.workspaceRoot, this.id, ...argv],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const stdin = child.stdin as NonNullable<ChildProcess['stdin']>;
    stdin.on('error', () => undefined);
    const given = options.stdin;
    if (given === undefined) stdin.end();
    else if (given === 'pipe') {
      // The caller writes.
    } else if (typeof given === 'string' || given instanceof Uint8Array) stdin.end(given);
    else Readable.from(given as AsyncIterable<Uint8Array>).pipe(stdin);
    let timedOut = false;
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, options.timeoutMs);
    const exit = new Promise<{ code: number | null; signal: string | null; timedOut: boolean }>((resolve) => {
      child.once('close', (code, signal) => {
        if (timer !== undefined) clearTimeout(timer);
        resolve({ code, signal, timedOut });
      });
    });
    return {
      stdout: child.stdout as NonNullable<ChildProcess['stdout']>,
      stderr: child.stderr as NonNullable<ChildProcess['stderr']>,
      stdin: given === 'pipe' ? stdin : undefined,
      exit,
      kill: () => child.kill('SIGKILL'),
    };
  }

  run(argv: readonly string[], options?: RunOptions): Promise<RunResult> {
    return runBuffered((a, o) => this.exec(a, o), argv, options);
  }

  /** Removes the container and its volume. */
  destroy(): void {
    execFileSync('docker', ['rm', '-f', '-v', this.id], { stdio: 'ignore' });
  }
}
