import { InputError } from '../../src/errors.js';
import type {
  ExecOptions,
  ExecProcess,
  RunOptions,
  RunResult,
  SandboxHandle,
  SandboxProvider,
} from '../../src/sandbox/sandbox-provider.js';

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
    labels: inner.labels,
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
    labels: inner.labels,
    exec: (argv, options) => inner.exec(argv, options),
    run: async (argv, options) => {
      const got = await inner.run(argv, options);
      return argv.some((a) => a.includes(marker)) ? { ...got, stdout: lie(got.stdout) } : got;
    },
  };
}

/**
 * A provider that declares no stdin and whose handles refuse it ({@link withoutStdin}): a
 * fault double around a real provider, for a provider that takes a command's arguments only.
 */
export function withoutStdinProvider(inner: SandboxProvider): SandboxProvider {
  const wrap = (h: SandboxHandle | undefined) => (h === undefined ? undefined : withoutStdin(h));
  return {
    name: inner.name,
    capabilities: Object.freeze({ ...inner.capabilities, stdin: false }),
    create: async (spec) => withoutStdin(await inner.create(spec)),
    get: async (id) => wrap(await inner.get(id)),
    destroy: (id) => inner.destroy(id),
    list: () => inner.list(),
  };
}
