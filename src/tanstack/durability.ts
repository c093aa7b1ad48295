import { createHash } from 'node:crypto';
import type {
  SnapshotRef,
  SandboxCapabilities as TanStackCapabilities,
  SandboxHandle as TanStackSandboxHandle,
  SandboxProvider as TanStackSandboxProvider,
} from '@tanstack/ai-sandbox';
import { InputError, NotFoundError } from '../errors.js';
import type { Holdfast } from '../holdfast.js';
import { SandboxEndpoints } from '../sandbox/endpoints/sandbox-endpoints.js';
import type { SandboxCapabilities, SandboxHandle, SandboxProvider } from '../sandbox/sandbox-provider.js';
import type { CheckpointResult } from '../snapshot/checkpoint/checkpoint.js';
import type { RestoreReceipt } from '../snapshot/restore/restore.js';
import { commandHandle } from './command-handle.js';
import { holdfastBacking } from './holdfast-provider.js';

/** Longest workspace name Holdfast accepts. */
const MAX_WORKSPACE_NAME_LENGTH = 128;
const SAFE_NAME = /^[A-Za-z0-9._:@-]+$/;

/** Options of {@link withHoldfastDurability}. */
export interface HoldfastDurabilityOptions {
  /**
   * How the workspace is reached. `auto` (default): a sandbox of {@link holdfastSandboxProvider}
   * through its own Holdfast provider (a host path, or the agent over stdin), any other through
   * its commands; `commands`: always through the TanStack handle's `process.exec`.
   */
  readonly route?: 'auto' | 'commands';
  /** The workspace root in sandboxes whose handle names none; default TanStack's `/workspace`. */
  readonly workspaceRoot?: string;
  /** Called with every checkpoint a `snapshot()` took (its stats and exclusions: secrets are reported, never stored). */
  readonly onCheckpoint?: (result: CheckpointResult) => void;
  /** Called with every restore receipt of a `restoreSnapshot()` (verified file by file). */
  readonly onRestore?: (receipt: RestoreReceipt) => void;
}

/** The workspace name of a sandbox: `tanstack:<provider>:<id>`, or its hash when the id is not a valid name. */
export function workspaceNameFor(provider: string, id: string): string {
  const plain = `tanstack:${provider}:${id}`;
  if (SAFE_NAME.test(plain) && plain.length <= MAX_WORKSPACE_NAME_LENGTH) return plain;
  const hash = createHash('sha256').update(`${provider}\0${id}`).digest('hex').slice(0, 40);
  return `tanstack:sha256-${hash}`;
}

const COMMAND_CAPABILITIES: SandboxCapabilities = Object.freeze({
  exec: true,
  stdin: false,
  resume: false,
  localPath: false,
  nativeSnapshots: false,
  durableFilesystem: false,
  killableProcesses: false,
  networkIsolation: false,
  workspaceRootsUnder: null,
});

/**
 * Gives any TanStack provider durable `snapshot()` / `restoreSnapshot()` backed by Holdfast
 * checkpoints in `hf`'s stores and tenant:
 *
 * - `handle.snapshot(label)` checkpoints the sandbox's workspace (Holdfast's scan rules apply:
 *   credentials and secret-bearing files are left out and reported, never stored; caches are
 *   excluded) into the workspace `tanstack:<provider>:<sandbox id>`, and records the label, the
 *   sandbox key and the thread and run of the key's record (when `store` knows it) by checkpoint
 *   id. The snapshot id is the checkpoint id: a restore needs nothing else.
 * - `restoreSnapshot({ snapshotId })` creates a fresh sandbox with the given env and workspace
 *   definition, restores the checkpoint into it (every file verified where it lands; a failed
 *   restore destroys the new sandbox and rejects), and returns it, itself durable.
 *   `NOT_FOUND` for a snapshot id this tenant never recorded.
 *
 * Everything else is the wrapped provider's own. The provider's name is kept, so TanStack's
 * sandbox keys do not change when durability is added.
 */
export function withHoldfastDurability(
  provider: TanStackSandboxProvider,
  hf: Holdfast,
  options: HoldfastDurabilityOptions & {
    readonly store?: { get(key: string): Promise<{ threadId: string; latestRunId?: string } | null> };
  } = {},
): TanStackSandboxProvider {
  const keys = new WeakMap<TanStackSandboxHandle, string>();
  const backing = async (handle: TanStackSandboxHandle): Promise<{ handle: SandboxHandle; capabilities: SandboxCapabilities }> => {
    const own = options.route === 'commands' ? undefined : holdfastBacking.get(handle);
    if (own !== undefined) return { handle: own.handle, capabilities: own.provider.capabilities };
    return { handle: await commandHandle(handle, options.workspaceRoot), capabilities: COMMAND_CAPABILITIES };
  };
  const endpointsFor = (name: string, capabilities: SandboxCapabilities): SandboxEndpoints =>
    new SandboxEndpoints((asked) => {
      if (asked !== name) throw new InputError('INVALID_INPUT', `unknown sandbox provider ${asked}`, { data: { provider: asked } });
      return { name, capabilities } as SandboxProvider;
    });

  const snapshot = async (handle: TanStackSandboxHandle, label: string | undefined): Promise<SnapshotRef> => {
    const reached = await backing(handle);
    const workspace = workspaceNameFor(provider.name, handle.id);
    const result = await endpointsFor(reached.handle.provider, reached.capabilities).checkpoint(hf.snapshots, reached.handle, {
      workspace,
      reason: 'manual',
    });
    options.onCheckpoint?.(result);
    const key = keys.get(handle) ?? null;
    const record = key === null || options.store === undefined ? null : await options.store.get(key);
    await hf.meta.sandboxInstances.putSnapshotLabel(hf.tenant.id, {
      checkpointId: result.checkpoint.id,
      workspaceId: result.checkpoint.workspaceId,
      label: label ?? null,
      threadId: record?.threadId ?? null,
      runId: record?.latestRunId ?? null,
      sandboxKey: key,
    });
    return label === undefined ? { id: result.checkpoint.id } : { id: result.checkpoint.id, label };
  };

  const durable = (handle: TanStackSandboxHandle, key: string | undefined): TanStackSandboxHandle => {
    const capabilities: TanStackCapabilities = { ...handle.capabilities, snapshots: true };
    const wrapped: TanStackSandboxHandle = Object.assign(Object.create(Object.getPrototypeOf(handle) as object) as object, handle, {
      capabilities,
      snapshot: (label?: string) => snapshot(wrapped, label),
    });
    const own = holdfastBacking.get(handle);
    if (own !== undefined) holdfastBacking.set(wrapped, own);
    if (key !== undefined) keys.set(wrapped, key);
    return wrapped;
  };

  return {
    name: provider.name,
    capabilities: () => ({ ...provider.capabilities(), snapshots: true }),
    async create(input) {
      return durable(await provider.create(input), input.id);
    },
    async resume(input) {
      const handle = await provider.resume(input);
      return handle === null ? null : durable(handle, undefined);
    },
    async restoreSnapshot(input) {
      const label = await hf.meta.sandboxInstances.findSnapshotLabel(hf.tenant.id, input.snapshotId);
      if (label === undefined) {
        throw new NotFoundError(`no snapshot ${input.snapshotId} in tenant ${hf.tenant.name}: take one with handle.snapshot()`, {
          data: { snapshot: input.snapshotId },
        });
      }
      const workspace = await hf.meta.workspaces.get(label.workspaceId);
      // The checkpoint is resolved before a sandbox is made: a deleted one creates nothing.
      await hf.snapshots.restorePoint(workspace.name, input.snapshotId);
      const { snapshotId: _s, ...create } = input;
      const created = await provider.create(create);
      try {
        const reached = await backing(created);
        const receipt = await endpointsFor(reached.handle.provider, reached.capabilities).restore(hf.snapshots, reached.handle, {
          workspace: workspace.name,
          checkpoint: input.snapshotId,
          replace: true,
        });
        options.onRestore?.(receipt);
      } catch (error) {
        await provider.destroy({ id: created.id }).catch(() => undefined);
        throw error;
      }
      return durable(created, label.sandboxKey ?? undefined);
    },
    destroy: (input) => provider.destroy(input),
  };
}
