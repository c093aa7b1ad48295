import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { sandboxEndpointCase } from './support/sandbox-endpoint-case.js';

describeWorkspaceEndpointContract({ name: 'in-sandbox agent through bwrap', open: sandboxEndpointCase(openBwrapBackends) });
