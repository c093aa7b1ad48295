import type { CheckpointResult } from '../../snapshot/checkpoint/checkpoint.js';
import type { RestoreReceipt } from '../../snapshot/restore/restore.js';
import type { Snapshots } from '../../snapshot/snapshots.js';
import type { EndpointContext } from '../../snapshot/workspace-source.js';
import type { WorkspaceTarget } from '../../snapshot/workspace-target.js';
import type { AgentClient } from '../agent/host/agent-client.js';
import { AgentPool, type AgentSource, ONE_SHOT_AGENTS } from '../agent/host/agent-pool.js';
import { fileApiEndpoints } from '../file-api/file-api-endpoints.js';
import { findSandbox, openSandboxProvider } from '../open-provider.js';
import type { SandboxHandle, SandboxProvider } from '../sandbox-provider.js';
import { AgentWorkspaceSource } from './agent-source.js';
import { AgentWorkspaceTarget } from './agent-target.js';
import { DeferredTarget } from './deferred-target.js';
import { chooseTransport, ProbeCache, requireExec, type Transport } from './shell/probe.js';
import { shellEndpoints } from './shell/shell-endpoints.js';

type CheckpointInput = Omit<Parameters<Snapshots['checkpoint']>[0], 'dir' | 'source'>;
type RestoreInput = Omit<Parameters<Snapshots['restore']>[0], 'dir' | 'target'>;

/** Which sandbox: its id (or a unique prefix, or `latest`) and, optionally, its provider (otherwise every shipped provider name is asked). */
export interface SandboxSelector {
  readonly sandbox: string;
  readonly provider?: string;
}

/** Turns a provider name into a provider: the shipped ones by default, or those a library user injected (`openHoldfast({ providers })`). */
export type ProviderLookup = (name: string) => SandboxProvider;

/** How a sandbox's workspace is reached: its host path, its declared file API, or one of the exec transports. */
export type WorkspaceRoute = 'local' | 'files' | Transport;

/** Options of {@link SandboxEndpoints}. */
export interface SandboxEndpointsOptions {
  /** How the agent is reached: a pool keeps one connection per sandbox (runs); default a connection per operation. */
  readonly agents?: AgentSource;
}

/**
 * How Holdfast reaches sandboxes' workspaces for checkpoints and restores: the one place the
 * route to a sandbox is chosen. A provider that exposes the workspace as a host path
 * (`localPath`) is read and written directly; one that declares a file API (`files`, see
 * `file-api/sandbox-files.ts`) is reached through it, with no probe and no exec; otherwise the sandbox is probed once (one exec,
 * no stdin; remembered per sandbox) and, with the provider's declared `stdin`, gets the
 * in-sandbox agent (Node >= 18 and stdin), the shell transport with stdin, or the shell
 * transport over exec arguments alone (see `chooseTransport`). Whatever the route, the
 * engine's guarantees are the same: what comes out of the sandbox is checked and hashed on
 * this side, and every restored file is verified where it lands.
 */
export class SandboxEndpoints {
  private readonly probes = new ProbeCache();
  private readonly agents: AgentSource;

  constructor(
    private readonly providers: ProviderLookup = openSandboxProvider,
    options: SandboxEndpointsOptions = {},
  ) {
    this.agents = options.agents ?? ONE_SHOT_AGENTS;
  }

  /** The route to `handle`'s workspace (probing the sandbox the first time). `STORE_UNAVAILABLE` when none fits, listing what is missing. */
  async route(handle: SandboxHandle): Promise<WorkspaceRoute> {
    const direct = this.directRoute(handle);
    if (direct !== undefined) return direct;
    const { capabilities } = this.providers(handle.provider);
    requireExec(capabilities);
    return chooseTransport(capabilities, await this.probes.get(handle));
  }

  /** The routes that need no probe: a host path, a declared file API. */
  private directRoute(handle: SandboxHandle): 'local' | 'files' | undefined {
    if (handle.localPath !== undefined) return 'local';
    const { capabilities } = this.providers(handle.provider);
    return capabilities.files === true && handle.files !== undefined ? 'files' : undefined;
  }

  /** Checkpoints the workspace of the sandbox `ref` names (found through this instance's providers). */
  async checkpointSandbox(snapshots: Snapshots, options: CheckpointInput & SandboxSelector): Promise<CheckpointResult> {
    const { sandbox, provider, ...rest } = options;
    return this.checkpoint(snapshots, await findSandbox(sandbox, provider, this.providers), rest);
  }

  /** Restores a checkpoint (default: the head) into the workspace of the sandbox `ref` names. */
  async restoreSandbox(snapshots: Snapshots, options: RestoreInput & SandboxSelector): Promise<RestoreReceipt> {
    const { sandbox, provider, ...rest } = options;
    return this.restore(snapshots, await findSandbox(sandbox, provider, this.providers), rest);
  }

  /** Checkpoints the workspace of a sandbox in hand, by its {@link route}. */
  async checkpoint(snapshots: Snapshots, handle: SandboxHandle, input: CheckpointInput): Promise<CheckpointResult> {
    const route = await this.route(handle);
    if (route === 'local') return snapshots.checkpoint({ ...input, dir: handle.localPath as string });
    if (route === 'files') return snapshots.checkpoint({ ...input, source: this.files(handle).source });
    if (route === 'agent') {
      return this.agents.use(handle, (client) =>
        snapshots.checkpoint({ ...input, source: (context) => new AgentWorkspaceSource(client, handle.workspaceRoot, handle.id, context) }),
      );
    }
    return snapshots.checkpoint({ ...input, source: (await this.shell(handle, route)).source });
  }

  /** Restores into the workspace of a sandbox in hand, by its {@link route}. */
  async restore(snapshots: Snapshots, handle: SandboxHandle, input: RestoreInput): Promise<RestoreReceipt> {
    // The restore point is resolved first, so a missing workspace or checkpoint never probes or stages anything.
    await snapshots.restorePoint(input.workspace, input.checkpoint);
    const direct = this.directRoute(handle);
    if (direct === 'local') return snapshots.restore({ ...input, dir: handle.localPath as string });
    if (direct === 'files') return snapshots.restore({ ...input, target: this.files(handle).target });
    return this.restoreOverExec(snapshots, handle, input);
  }

  /**
   * A restore over exec: the probe and, for the agent, its staging and start run while the
   * engine reads and validates the checkpoint's trees (see {@link DeferredTarget}). The agent
   * is lent for the whole restore and handed back (or dropped, after a failure) once it is over.
   */
  private async restoreOverExec(snapshots: Snapshots, handle: SandboxHandle, input: RestoreInput): Promise<RestoreReceipt> {
    const route = this.route(handle);
    const lent = settleable<AgentClient>();
    const over = settleable<void>();
    const lease = route.then((r) =>
      r === 'agent'
        ? this.agents.use(handle, (client) => {
            lent.resolve(client);
            return over.promise;
          })
        : undefined,
    );
    lease.catch((error: unknown) => lent.reject(error));
    const made = async (context: EndpointContext): Promise<WorkspaceTarget> => {
      const r = await route;
      if (r === 'agent') return new AgentWorkspaceTarget(await lent.promise, handle.workspaceRoot, handle.id);
      return (await this.shell(handle, r as Exclude<Transport, 'agent'>)).target(context);
    };
    const label = `sandbox ${handle.id}:${handle.workspaceRoot}`;
    try {
      const receipt = await snapshots.restore({ ...input, target: (context) => new DeferredTarget(label, made(context)) });
      over.resolve();
      await lease;
      return receipt;
    } catch (error) {
      over.reject(error);
      await lease.catch(() => undefined);
      throw error;
    }
  }

  /** Forgets what is kept for a sandbox (its agent connection, its probe): call it when the sandbox is destroyed. */
  forget(provider: string, id: string): void {
    if (this.agents instanceof AgentPool) this.agents.evict(provider, id);
    this.probes.forget(provider, id);
  }

  /** Closes pooled agent connections. */
  async close(): Promise<void> {
    if (this.agents instanceof AgentPool) await this.agents.close();
  }

  /** The file-API endpoints of a handle that declares them; the host's stat cache is keyed by provider, sandbox and root. */
  private files(handle: SandboxHandle) {
    return fileApiEndpoints(handle.files as NonNullable<SandboxHandle['files']>, `${handle.provider}/${handle.id}${handle.workspaceRoot}`);
  }

  private async shell(handle: SandboxHandle, transport: Exclude<Transport, 'agent'>) {
    return shellEndpoints(handle, { transport, probe: await this.probes.get(handle) });
  }
}

/** A promise with its settle functions, marked handled: whoever awaits it sees its outcome. */
function settleable<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve: (value: T) => void = () => undefined;
  let reject: (error: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** The shipped providers, an agent connection per operation: what the free functions below use. */
const SHIPPED = new SandboxEndpoints();

/** Checkpoints a sandbox's workspace through the shipped providers; see {@link SandboxEndpoints}. */
export function checkpointSandbox(snapshots: Snapshots, options: CheckpointInput & SandboxSelector): Promise<CheckpointResult> {
  return SHIPPED.checkpointSandbox(snapshots, options);
}

/** Restores into a sandbox's workspace through the shipped providers; see {@link SandboxEndpoints}. */
export function restoreSandbox(snapshots: Snapshots, options: RestoreInput & SandboxSelector): Promise<RestoreReceipt> {
  return SHIPPED.restoreSandbox(snapshots, options);
}

/** {@link checkpointSandbox} for a sandbox in hand (of a shipped provider). */
export function checkpointHandle(snapshots: Snapshots, handle: SandboxHandle, input: CheckpointInput): Promise<CheckpointResult> {
  return SHIPPED.checkpoint(snapshots, handle, input);
}

/** {@link restoreSandbox} for a sandbox in hand (of a shipped provider). */
export function restoreHandle(snapshots: Snapshots, handle: SandboxHandle, input: RestoreInput): Promise<RestoreReceipt> {
  return SHIPPED.restore(snapshots, handle, input);
}
