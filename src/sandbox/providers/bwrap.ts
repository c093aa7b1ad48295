import fs from 'node:fs';
import path from 'node:path';
import { InputError, StoreError } from '../../errors.js';
import { startHostProcess } from '../host-process.js';
import { runBuffered } from '../run-buffered.js';
import { SandboxDirs, type SandboxRecord } from '../sandbox-dirs.js';
import type {
  ExecOptions,
  ExecProcess,
  RunOptions,
  RunResult,
  SandboxCapabilities,
  SandboxHandle,
  SandboxInfo,
  SandboxProvider,
  SandboxSpec,
} from '../sandbox-provider.js';
import { checkedEnv } from '../sandbox-spec.js';
import {
  BWRAP_HOME,
  BWRAP_PATH,
  BWRAP_WORKSPACE,
  bwrapArgs,
  bwrapCloseFdArgs,
  systemMountArgs,
  writeSandboxEtc,
} from './bwrap/bwrap-args.js';
import { BWRAP_INFO_FD, bwrapProcessTree } from './bwrap/bwrap-process-tree.js';

/** Settings of {@link BwrapSandboxProvider}. */
export interface BwrapSandboxProviderConfig {
  /** Host directory holding each sandbox's private disk; created on first use (mode 0700). */
  readonly root: string;
  /** The bwrap executable; default: `bwrap` on PATH, else /usr/bin/bwrap. */
  readonly bwrapPath?: string;
  /** Extra absolute host paths mounted read-only at the same place, e.g. a Node installed under /opt. */
  readonly readOnlyPaths?: readonly string[];
}

/** A bwrap sandbox handle; `hostDiskPath` is for tests and diagnostics, the engine goes through `exec`. */
export interface BwrapSandboxHandle extends SandboxHandle {
  /** Host directory of the sandbox's disk: `workspace/` is mounted at /workspace, `home/` at /home/agent. */
  readonly hostDiskPath: string;
}

/**
 * Sandboxes made with bubblewrap: each has a private disk on the host mounted at /workspace
 * and /home/agent, and every exec runs in fresh user, pid, network, ipc, uts and cgroup
 * namespaces over a read-only view of the host's /usr (see `bwrap/bwrap-args.ts` for the exact
 * arguments). There is no long-lived sandbox process: the disk persists between execs until
 * `destroy`, and each exec's processes die with it.
 *
 * Commands get only PATH, HOME, LANG, TERM and the spec's and exec's variables. They are passed
 * as bwrap's environment rather than `--setenv` arguments, because any host user can read a
 * process's arguments but only its owner can read its environment.
 */
export class BwrapSandboxProvider implements SandboxProvider {
  readonly name = 'bwrap';
  readonly capabilities: SandboxCapabilities = Object.freeze({
    exec: true,
    stdin: true,
    resume: true,
    localPath: false,
    nativeSnapshots: false,
    durableFilesystem: false,
    killableProcesses: true,
    networkIsolation: true,
    workspaceRootsUnder: BWRAP_WORKSPACE,
  });
  private readonly dirs: SandboxDirs;
  private systemMounts: string[] | undefined;
  private bwrap: string | undefined;
  private probed = false;

  constructor(private readonly config: BwrapSandboxProviderConfig) {
    for (const extra of config.readOnlyPaths ?? []) {
      if (!path.isAbsolute(extra))
        throw new InputError('INVALID_INPUT', `[bwrap] readOnlyPaths must be absolute: ${extra}`, { data: { path: extra } });
    }
    this.dirs = new SandboxDirs(path.resolve(config.root), this.name);
  }

  /**
   * Creates the disk, then (once per provider) runs `true` inside to prove bwrap works here, so a
   * host without user namespaces fails at create with bwrap's own explanation.
   */
  async create(spec: SandboxSpec = {}): Promise<BwrapSandboxHandle> {
    this.executable();
    const handle = this.handle(await this.dirs.create(spec, (layout) => writeSandboxEtc(layout.dir)));
    if (!this.probed) {
      const probe = await handle.run(['true']);
      if (probe.code !== 0) {
        await this.dirs.destroy(handle.id);
        throw new StoreError(
          `[bwrap] cannot start a sandbox here (exit ${probe.code}): ${probe.stderr.toString().trim()}; bwrap needs user namespaces (sysctl user.max_user_namespaces > 0) and bubblewrap >= 0.8`,
          {
            data: { provider: this.name, code: probe.code },
          },
        );
      }
      this.probed = true;
    }
    return handle;
  }

  async get(id: string): Promise<BwrapSandboxHandle | undefined> {
    const record = await this.dirs.read(id);
    return record === undefined ? undefined : this.handle(record);
  }

  destroy(id: string): Promise<void> {
    return this.dirs.destroy(id);
  }

  list(): Promise<SandboxInfo[]> {
    return this.dirs.list();
  }

  /** The bwrap executable, found once; `STORE_UNAVAILABLE` with an install hint when there is none. */
  private executable(): string {
    this.bwrap ??= locateBwrap(this.config.bwrapPath);
    return this.bwrap;
  }

  private handle(record: SandboxRecord): BwrapSandboxHandle {
    const { dirs } = this;
    const layout = dirs.layout(record.id);
    const baseEnv = { PATH: BWRAP_PATH, HOME: BWRAP_HOME, LANG: 'C.UTF-8', TERM: 'dumb', ...record.env };
    const exec = (argv: readonly string[], options: ExecOptions = {}): ExecProcess => {
      if (argv.length === 0 || argv[0] === '') throw new InputError('INVALID_INPUT', '[bwrap] exec needs a command: argv is empty');
      const env = { ...baseEnv, ...checkedEnv(options.env) };
      dirs.assertLive(record.id);
      this.systemMounts ??= systemMountArgs(this.config.readOnlyPaths);
      const cwd = path.posix.resolve(BWRAP_WORKSPACE, options.cwd ?? '.');
      const args = [
        ...bwrapArgs({ diskPath: layout.dir, cwd, systemMounts: this.systemMounts }),
        '--info-fd',
        String(BWRAP_INFO_FD),
        '--',
        ...argv,
      ];
      return startHostProcess(
        { command: this.executable(), args, env, detached: false, extraPipes: 1, closeFdArgs: bwrapCloseFdArgs },
        options,
        { start: (child) => bwrapProcessTree(child, dirs, record.id) },
      );
    };
    return {
      id: record.id,
      provider: this.name,
      workspaceRoot: BWRAP_WORKSPACE,
      agentHome: BWRAP_HOME,
      hostDiskPath: layout.dir,
      labels: { ...record.labels },
      exec,
      run: (argv: readonly string[], options?: RunOptions): Promise<RunResult> => runBuffered(exec, argv, options),
    };
  }
}

/** Finds bwrap: the configured path, else `bwrap` on PATH, else /usr/bin/bwrap. */
function locateBwrap(configured: string | undefined): string {
  const candidates =
    configured !== undefined
      ? [configured]
      : [
          ...(process.env.PATH ?? '')
            .split(path.delimiter)
            .filter((d) => path.isAbsolute(d))
            .map((d) => path.join(d, 'bwrap')),
          '/usr/bin/bwrap',
        ];
  for (const candidate of candidates) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not this one
    }
  }
  throw new StoreError(
    `[bwrap] bubblewrap not found (looked for ${candidates.join(', ')}): install it (Debian/Ubuntu: apt-get install bubblewrap) or use --provider local for development`,
    {
      data: { provider: 'bwrap' },
    },
  );
}
