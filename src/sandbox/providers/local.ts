import path from 'node:path';
import { InputError } from '../../errors.js';
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
import { killProcess, signalProcess } from '../tracked-processes.js';

/** Settings of {@link LocalSandboxProvider}. */
export interface LocalSandboxProviderConfig {
  /** Host directory holding one subdirectory per sandbox; created on first use. */
  readonly root: string;
}

/**
 * Development-only sandboxes: a sandbox is a directory `root/<id>/{workspace,home}` and its
 * commands run directly on the host, as the host user, with full access to the host's files
 * and network. There is **no isolation**; use `bwrap` (or a cloud provider) for agents.
 *
 * What it does keep consistent with the isolating providers: the environment is the same
 * allowlist (host PATH, HOME = the sandbox home, LANG, TERM, plus the spec's env), each exec
 * runs in its own process group that is killed on timeout, abort, exit and destroy.
 */
export class LocalSandboxProvider implements SandboxProvider {
  readonly name = 'local';
  readonly capabilities: SandboxCapabilities = Object.freeze({
    exec: true,
    stdin: true,
    resume: true,
    localPath: true,
    nativeSnapshots: false,
    durableFilesystem: false,
    killableProcesses: true,
    networkIsolation: false,
    workspaceRootsUnder: null,
  });
  private readonly dirs: SandboxDirs;

  constructor(config: LocalSandboxProviderConfig) {
    this.dirs = new SandboxDirs(path.resolve(config.root), this.name);
  }

  async create(spec: SandboxSpec = {}): Promise<SandboxHandle> {
    return this.handle(await this.dirs.create(spec));
  }

  async get(id: string): Promise<SandboxHandle | undefined> {
    const record = await this.dirs.read(id);
    return record === undefined ? undefined : this.handle(record);
  }

  destroy(id: string): Promise<void> {
    return this.dirs.destroy(id);
  }

  list(): Promise<SandboxInfo[]> {
    return this.dirs.list();
  }

  private handle(record: SandboxRecord): SandboxHandle {
    const { dirs } = this;
    const layout = dirs.layout(record.id);
    const baseEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: layout.home,
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      ...record.env,
    };
    const exec = (argv: readonly string[], options: ExecOptions = {}): ExecProcess => {
      const [command, ...args] = argv;
      if (command === undefined || command === '') throw new InputError('INVALID_INPUT', '[local] exec needs a command: argv is empty');
      dirs.assertLive(record.id);
      return startHostProcess(
        {
          command,
          args,
          env: { ...baseEnv, ...checkedEnv(options.env) },
          cwd: path.resolve(layout.workspace, options.cwd ?? '.'),
          // A new process group per exec: the unit that timeouts, abort and destroy kill.
          detached: true,
        },
        options,
        {
          start: (child) => {
            dirs.track(record.id, child.pid, 'group');
            return {
              kill: (signal) => signalProcess(child.pid, 'group', signal),
              exited: () => {
                // Background children die with the command, as they do in a bwrap pid namespace.
                killProcess(child.pid, 'group');
                dirs.untrack(record.id, child.pid);
              },
            };
          },
        },
      );
    };
    return {
      id: record.id,
      provider: this.name,
      workspaceRoot: layout.workspace,
      agentHome: layout.home,
      localPath: layout.workspace,
      labels: { ...record.labels },
      exec,
      run: (argv: readonly string[], options?: RunOptions): Promise<RunResult> => runBuffered(exec, argv, options),
    };
  }
}
