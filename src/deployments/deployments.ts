/**
 * `deployments/`: immutable deployments and their channels, deployment specs, and deployment
 * bundles (capture, tar upload, install into a sandbox).
 */
import { posixWithin } from '../core/paths.js';
import { InputError, isHoldfastError, NotFoundError } from '../errors.js';
import type { Channel, MetadataStore } from '../metadata/metadata-store.js';
import type { TenantScope } from '../model/tenants.js';
import type { SandboxCapabilities } from '../sandbox/sandbox-provider.js';
import type { BundleRecord } from './bundle-record.js';
import { findCapturedBundle } from './bundles.js';
import {
  canonicalSpecJson,
  type DeploymentSpec,
  type DeploymentSpecInput,
  deploymentId,
  normalizeDeploymentSpec,
  parseDeploymentSpecInput,
  parseStoredSpec,
} from './deployment-spec.js';

/** A deployment as the API returns it. */
export interface Deployment {
  readonly id: string;
  readonly spec: DeploymentSpec;
  readonly createdAt: number;
}

/**
 * What {@link Deployments.create} takes: a spec whose `bundle` is a bundle this tenant captured,
 * named by the record `Bundles.capture` returned or by its `rootTree` alone.
 */
export type DeploymentCreateInput = Omit<DeploymentSpecInput, 'bundle'> & {
  readonly bundle?: BundleRecord | string | null | undefined;
};

const CHANNEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * Deployments and channels of one tenant. Deployments are immutable and content-addressed:
 * creating the same spec twice returns the same deployment. Publishing moves a channel.
 */
export class Deployments {
  /**
   * `openProvider` resolves a provider name as runs will (throwing for an unknown one), so a
   * deployment naming a provider this service cannot open, or a `workspaceRoot` that provider
   * cannot host (see `SandboxCapabilities.workspaceRootsUnder`), is refused when it is created,
   * not at its first turn.
   */
  constructor(
    private readonly meta: MetadataStore,
    readonly tenant: TenantScope,
    private readonly openProvider?: (name: string) => { readonly capabilities: SandboxCapabilities },
  ) {}

  /**
   * Stores a deployment (idempotent). `INVALID_INPUT`/`LIMIT_EXCEEDED`/`SECRET_EXCLUDED` for a
   * bad spec, `INVALID_INPUT` for a provider this service cannot open or a `workspaceRoot` it
   * cannot host (`data.field` `workspaceRoot`), `NOT_FOUND` for a
   * `bundle` this tenant did not capture. The bundle's file count and bytes are taken from its
   * capture, never from the input.
   */
  async create(input: DeploymentCreateInput): Promise<Deployment & { readonly created: boolean }> {
    // The one spec schema first, so a malformed field is named before any bundle is looked up.
    const checked = parseDeploymentSpecInput(input);
    const spec = normalizeDeploymentSpec({ ...checked, bundle: await this.capturedBundle(checked.bundle) });
    this.requireHostable(spec, this.requireProvider(spec.provider));
    const id = deploymentId(spec);
    const { deployment, created } = await this.meta.deployments.put({ tenantId: this.tenant.id, id, spec: canonicalSpecJson(spec) });
    return { id, spec, createdAt: deployment.createdAt, created };
  }

  /** The captured bundle `ref` names (`null` for none); `INVALID_INPUT` for a malformed one, `NOT_FOUND` for one not captured. */
  private async capturedBundle(ref: DeploymentCreateInput['bundle']): Promise<BundleRecord | null> {
    if (ref === undefined || ref === null) return null;
    const rootTree = typeof ref === 'string' ? ref : typeof ref === 'object' ? ref.rootTree : undefined;
    if (typeof rootTree !== 'string' || !/^[0-9a-f]{64}$/.test(rootTree)) {
      throw new InputError('INVALID_INPUT', 'bundle must be a bundle record or its rootTree (64 lowercase hex)', {
        data: { field: 'bundle' },
      });
    }
    return findCapturedBundle(this.meta, this.tenant.id, rootTree);
  }

  /** The capabilities of provider `name` as runs will open it; `undefined` when this service opens none (a library without providers). */
  private requireProvider(name: string): SandboxCapabilities | undefined {
    if (this.openProvider === undefined) return undefined;
    try {
      return this.openProvider(name).capabilities;
    } catch (cause) {
      if (isHoldfastError(cause, 'INVALID_INPUT')) throw cause;
      throw new InputError('INVALID_INPUT', `this service has no sandbox provider ${JSON.stringify(name)}`, {
        data: { provider: name },
        cause,
      });
    }
  }

  /** Refuses a `workspaceRoot` outside what the provider declares it can host (`INVALID_INPUT` naming the field). */
  private requireHostable(spec: DeploymentSpec, capabilities: SandboxCapabilities | undefined): void {
    const root = spec.workspaceRoot;
    if (root === null || capabilities === undefined) return;
    const under = capabilities.workspaceRootsUnder;
    if (under !== null && posixWithin(root, under)) return;
    const hostable =
      under === null
        ? `each of its sandboxes has a workspace of its own, so leave workspaceRoot unset`
        : `use ${under} or a directory inside it`;
    throw new InputError('INVALID_INPUT', `provider ${spec.provider} cannot host workspaceRoot ${root}: ${hostable}`, {
      data: { field: 'workspaceRoot', provider: spec.provider, workspaceRoot: root, hostableUnder: under },
    });
  }

  /** The deployment `id`; `NOT_FOUND` when this tenant has none. */
  async get(id: string): Promise<Deployment> {
    const record = await this.meta.deployments.find(this.tenant.id, id);
    if (record === undefined) throw new NotFoundError(`deployment ${id} not found`, { data: { deploymentId: id } });
    return { id: record.id, spec: parseStoredSpec(record.spec), createdAt: record.createdAt };
  }

  /** The tenant's deployments, newest first. */
  async list(): Promise<Deployment[]> {
    const records = await this.meta.deployments.list(this.tenant.id);
    return records.map((r) => ({ id: r.id, spec: parseStoredSpec(r.spec), createdAt: r.createdAt }));
  }

  /** Makes `deploymentId` the active deployment of channel `name` (created on first publish). */
  async publish(name: string, deploymentId: string): Promise<Channel> {
    checkChannelName(name);
    await this.get(deploymentId);
    return this.meta.deployments.publish(this.tenant.id, name, deploymentId);
  }

  /** Channel `name`; `NOT_FOUND` when it was never published. */
  async channel(name: string): Promise<Channel> {
    checkChannelName(name);
    const channel = await this.meta.deployments.findChannel(this.tenant.id, name);
    if (channel === undefined) throw new NotFoundError(`channel ${name} not found`, { data: { channel: name } });
    return channel;
  }

  /** The tenant's channels by name. */
  channels(): Promise<Channel[]> {
    return this.meta.deployments.listChannels(this.tenant.id);
  }
}

function checkChannelName(name: string): void {
  if (typeof name !== 'string' || !CHANNEL_PATTERN.test(name)) {
    throw new InputError('INVALID_INPUT', `invalid channel name ${JSON.stringify(name)}: 1-64 of A-Z a-z 0-9 . _ -`, {
      data: { channel: name },
    });
  }
}
