import { randomBytes } from 'node:crypto';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { BACKENDS } from './support/backends.js';
import { expectDockerInstalled, nodeImage } from './support/docker-images.js';
import { sandboxEndpointCase } from './support/sandbox-endpoint-case.js';

describeWorkspaceEndpointContract({
  name: 'in-sandbox agent through docker',
  open: sandboxEndpointCase(async () => {
    expectDockerInstalled();
    const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    const provider = new DockerSandboxProvider({
      image: nodeImage(),
      scope: `test-endpoints-${process.pid}-${randomBytes(3).toString('hex')}`,
    });
    return { b, provider };
  }),
});
