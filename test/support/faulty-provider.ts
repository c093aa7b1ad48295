import { StoreError } from '../../src/errors.js';
import type { SandboxCapabilities, SandboxHandle, SandboxInfo, SandboxProvider, SandboxSpec } from '../../src/sandbox/sandbox-provider.js';

/** How `destroy` misbehaves: pass through, report success without doing it, or fail. */
export type DestroyMode = 'real' | 'lie' | 'fail';

/**
 * Wraps a real provider to fake an uncertain stop: `lie` reports a destroy that never happened
 * (the split-brain case fencing exists for), `fail` rejects it as a provider outage would.
 */
export class FaultyProvider implements SandboxProvider {
  destroyMode: DestroyMode = 'real';
  readonly destroyed: string[] = [];

  constructor(private readonly inner: SandboxProvider) {}

  get name(): string {
    return this.inner.name;
  }

  get capabilities(): SandboxCapabilities {
    return this.inner.capabilities;
  }

  create(spec?: SandboxSpec): Promise<SandboxHandle> {
    return this.inner.create(spec);
  }

  get(id: string): Promise<SandboxHandle | undefined> {
    return this.inner.get(id);
  }

  async destroy(id: string): Promise<void> {
    if (this.destroyMode === 'fail') throw new StoreError(`[faulty-provider] injected failure destroying ${id}`, { transient: true });
    if (this.destroyMode === 'lie') return;
    this.destroyed.push(id);
    await this.inner.destroy(id);
  }

  list(): Promise<SandboxInfo[]> {
    return this.inner.list();
  }
}
