import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type Checkpoint,
  type CheckpointMeta,
  type CheckpointNote,
  type CheckpointReason,
  type DirEntry,
  type EndpointContext,
  EXEC_SIGNALS,
  type ExecExit,
  type ExecOptions,
  type ExecProcess,
  type ExecSignal,
  type FileEntry,
  type ForkRunInput,
  LocalSandboxProvider,
  type RunOptions,
  type RunResult,
  runBuffered,
  SANDBOX_ID_PATTERN,
  type SandboxCapabilities,
  type SandboxHandle,
  type SandboxInfo,
  type SandboxLimits,
  type SandboxProvider,
  type SandboxSpec,
  type SourceScan,
  type SymlinkEntry,
  type TargetSession,
  type TreeEntry,
  type Workspace,
  type WorkspaceSource,
  type WorkspaceTarget,
} from './index.js';

/**
 * The package face holds every type a provider or adapter author touches: this file compiles
 * only if each is exported from `src/index.ts` (the type check runs over tests), and a provider
 * written against those exports alone satisfies the port.
 */
describe('the package face', () => {
  it('exports the provider and endpoint author types, and runBuffered', async () => {
    const capabilities: SandboxCapabilities = {
      exec: true,
      stdin: true,
      resume: false,
      localPath: true,
      nativeSnapshots: false,
      durableFilesystem: false,
      killableProcesses: true,
      networkIsolation: false,
      workspaceRootsUnder: null,
    };
    const spec: SandboxSpec = { id: 'my-sandbox', labels: { thread: 't' }, limits: {} satisfies SandboxLimits };
    const options: ExecOptions & RunOptions = { timeoutMs: 1000, maxOutputBytes: 10 };
    expectTypeOf<ExecProcess['pid']>().toEqualTypeOf<Promise<number | undefined>>();
    expectTypeOf<ExecProcess['kill']>().parameter(0).toEqualTypeOf<ExecSignal | undefined>();
    expectTypeOf<RunResult['stdout']>().toEqualTypeOf<Buffer>();
    expectTypeOf<ExecExit['timedOut']>().toEqualTypeOf<boolean>();
    expectTypeOf<SandboxHandle['labels']>().toEqualTypeOf<Readonly<Record<string, string>>>();
    expectTypeOf<SandboxProvider['list']>().returns.toEqualTypeOf<Promise<SandboxInfo[]>>();
    expectTypeOf<Checkpoint['reason']>().toEqualTypeOf<CheckpointReason>();
    expectTypeOf<Checkpoint['label']>().toEqualTypeOf<string | null>();
    expectTypeOf<CheckpointNote['meta']>().toEqualTypeOf<CheckpointMeta | undefined>();
    expectTypeOf<ForkRunInput['fromCheckpoint']>().toEqualTypeOf<string>();
    expectTypeOf<TreeEntry>().toEqualTypeOf<FileEntry | DirEntry | SymlinkEntry>();
    expectTypeOf<EndpointContext['workspace']>().toEqualTypeOf<Workspace>();
    expectTypeOf<WorkspaceSource['scan']>().returns.toEqualTypeOf<Promise<SourceScan>>();
    expectTypeOf<WorkspaceTarget>().toHaveProperty('label');
    expectTypeOf<TargetSession>().not.toBeNever();
    expect(capabilities.exec).toBe(true);
    expect(options.timeoutMs).toBe(1000);
    expect(SANDBOX_ID_PATTERN.test(spec.id ?? '')).toBe(true);
    expect(EXEC_SIGNALS).toContain('SIGTERM');

    // runBuffered over a provider's exec, from the face alone.
    const root = (await import('node:fs')).mkdtempSync(`${(await import('node:os')).tmpdir()}/hf-face-`);
    const provider: SandboxProvider = new LocalSandboxProvider({ root });
    const sandbox = await provider.create(spec);
    try {
      const result = await runBuffered((argv, o) => sandbox.exec(argv, o), ['sh', '-c', 'printf face'], {});
      expect(result.stdout.toString()).toBe('face');
      expect(sandbox.id).toBe('my-sandbox');
    } finally {
      await provider.destroy(sandbox.id);
      (await import('node:fs')).rmSync(root, { recursive: true, force: true });
    }
  });
});
