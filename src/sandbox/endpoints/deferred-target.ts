import type { RestorePlan, TargetSession, WorkspaceTarget } from '../../snapshot/workspace-target.js';

/**
 * A {@link WorkspaceTarget} whose real target is still being made (a sandbox probed, its agent
 * staged and started) while the engine reads and validates the checkpoint's trees: `begin`
 * waits for it, then everything is the real target's. A target that could not be made fails
 * `begin` with that error; one never begun (the trees failed first) is dropped quietly.
 */
export class DeferredTarget implements WorkspaceTarget {
  constructor(
    readonly label: string,
    private readonly ready: Promise<WorkspaceTarget>,
  ) {
    // Awaited by begin; a restore that fails before begin must not leave it "unhandled".
    ready.catch(() => undefined);
  }

  async begin(plan: RestorePlan): Promise<TargetSession> {
    return (await this.ready).begin(plan);
  }
}
