import { checkpointHandle, restoreHandle } from '../../src/sandbox/endpoints/sandbox-endpoints.js';
import type { SandboxHandle, SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import type { WorkspaceEndpointContractOptions } from '../../src/snapshot/workspace-endpoint.contract.js';
import type { OpenedBackends } from './backends.js';
import { fillScriptNode } from './endpoint-fixture.js';
import { runNode } from './sandbox-processes.js';

/**
 * The endpoint contract's `open` for sandboxes of `provider` reached through the route Holdfast
 * chooses (the agent for a sandbox with Node): each fresh workspace is a new sandbox, filled by
 * a Node script over exec, and every sandbox made is destroyed at cleanup.
 */
export function sandboxEndpointCase(
  opened: () => Promise<{ b: OpenedBackends; provider: SandboxProvider }>,
): WorkspaceEndpointContractOptions['open'] {
  return async () => {
    const { b, provider } = await opened();
    const made: SandboxHandle[] = [];
    return {
      snapshots: b.snapshots,
      blobs: b.blobs,
      meta: b.meta,
      fresh: async () => {
        const sandbox = await provider.create();
        made.push(sandbox);
        return {
          fill: async (fixture) => {
            await runNode(sandbox, fillScriptNode(sandbox.workspaceRoot, fixture));
          },
          checkpoint: (workspace, o = {}) => checkpointHandle(b.snapshots, sandbox, { workspace, ...o }),
          restore: (workspace, o = {}) => restoreHandle(b.snapshots, sandbox, { workspace, ...o }),
        };
      },
      cleanup: async () => {
        for (const s of made) await provider.destroy(s.id);
        await b.cleanup();
      },
    };
  };
}
