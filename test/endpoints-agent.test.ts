import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { checkpointHandle, restoreHandle } from '../src/sandbox/transport/sandbox-snapshots.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { fillScriptNode } from './support/endpoint-fixture.js';
import { runNode } from './support/sandbox-processes.js';

describeWorkspaceEndpointContract({
  name: 'in-sandbox agent through bwrap',
  open: async () => {
    const { b, provider } = await openBwrapBackends();
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
          checkpoint: (workspace) => checkpointHandle(b.snapshots, sandbox, { workspace }),
          restore: (workspace, o = {}) => restoreHandle(b.snapshots, sandbox, { workspace, ...o }),
        };
      },
      cleanup: async () => {
        for (const s of made) await provider.destroy(s.id);
        await b.cleanup();
      },
    };
  },
});
