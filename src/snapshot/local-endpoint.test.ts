import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { BACKENDS } from '../../test/support/backends.js';
import { fillLocal } from '../../test/support/endpoint-fixture.js';
import { describeWorkspaceEndpointContract } from './workspace-endpoint.contract.js';

describeWorkspaceEndpointContract({
  name: 'local directory',
  open: async () => {
    const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    return {
      snapshots: b.snapshots,
      blobs: b.blobs,
      meta: b.meta,
      fresh: async () => {
        const dir = mkdtempSync(path.join(b.dir, 'ws-'));
        return {
          fill: async (fixture) => fillLocal(dir, fixture),
          checkpoint: (workspace, o = {}) => b.snapshots.checkpoint({ dir, workspace, ...o }),
          restore: (workspace, o = {}) => b.snapshots.restore({ dir, workspace, ...o }),
        };
      },
      cleanup: () => b.cleanup(),
    };
  },
});
