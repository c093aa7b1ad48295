import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalSandboxProvider } from './providers/local.js';
import { runBuffered } from './run-buffered.js';
import { checkNetworkIsolation, checkStdin } from './sandbox.contract.js';
import type { ExecOptions, SandboxCapabilities, SandboxHandle, SandboxProvider, SandboxSpec } from './sandbox-provider.js';

/**
 * A provider that lies about what it can do: it declares the capabilities in `claims` over
 * the real provider's and, with `dropStdin`, silently runs every command without its stdin.
 */
class LyingProvider implements SandboxProvider {
  readonly name: string;
  readonly capabilities: SandboxCapabilities;

  constructor(
    private readonly inner: SandboxProvider,
    claims: Partial<SandboxCapabilities>,
    private readonly dropStdin: boolean,
  ) {
    this.name = inner.name;
    this.capabilities = { ...inner.capabilities, ...claims };
  }

  async create(spec?: SandboxSpec): Promise<SandboxHandle> {
    return this.wrap(await this.inner.create(spec));
  }

  async get(id: string): Promise<SandboxHandle | undefined> {
    const handle = await this.inner.get(id);
    return handle === undefined ? undefined : this.wrap(handle);
  }

  destroy(id: string): Promise<void> {
    return this.inner.destroy(id);
  }

  list() {
    return this.inner.list();
  }

  private wrap(handle: SandboxHandle): SandboxHandle {
    if (!this.dropStdin) return handle;
    const exec = (argv: readonly string[], options: ExecOptions = {}) => {
      const { stdin: _dropped, ...rest } = options;
      const proc = handle.exec(argv, rest);
      // Looks like a pipe to the caller, goes nowhere.
      const sink = options.stdin === 'pipe' ? new PassThrough() : undefined;
      sink?.resume();
      return { stdin: sink, stdout: proc.stdout, stderr: proc.stderr, exit: proc.exit, kill: proc.kill, pid: proc.pid };
    };
    return { ...handle, exec, run: (argv, options) => runBuffered(exec, argv, options) };
  }
}

describe('capability checks fail a provider that declares what it lacks', () => {
  let root: string;
  let honest: LocalSandboxProvider;
  beforeAll(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-caps-'));
    honest = new LocalSandboxProvider({ root });
  });
  afterAll(() => {
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('stdin: the honest provider passes; one that declares stdin but drops it fails', async () => {
    const sandbox = await honest.create();
    await checkStdin(honest, sandbox);
    const liar = new LyingProvider(honest, { stdin: true }, true);
    await expect(checkStdin(liar, await liar.create())).rejects.toThrow();
    const truthful = new LyingProvider(honest, { stdin: false }, true);
    await checkStdin(truthful, await truthful.create());
  });

  it('networkIsolation: local passes as declared (no isolation); declaring isolation on local fails', async () => {
    await checkNetworkIsolation(honest);
    await expect(checkNetworkIsolation(new LyingProvider(honest, { networkIsolation: true }, false))).rejects.toThrow();
  }, 30_000);
});
