import { randomBytes } from 'node:crypto';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { checkpointHandle, restoreHandle } from '../src/sandbox/transport/sandbox-snapshots.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { BACKENDS } from './support/backends.js';
import { expectDockerInstalled, nodeImage } from './support/docker-images.js';
import { fillScriptNode } from './support/endpoint-fixture.js';
import { runNode } from './support/sandbox-processes.js';

describeWorkspaceEndpointContract({
  name: 'in-sandbox agent through docker',
  open: async () => {
    expectDockerInstalled();
    const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    const provider = new DockerSandboxProvider({
      image: nodeImage(),
      scope: `test-endpoints-${process.pid}-${randomBytes(3).toString('hex')}`,
    });
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
