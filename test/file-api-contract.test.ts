import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { fileApiEndpoints } from '../src/sandbox/file-api/file-api-endpoints.js';
import { LocalSandboxProvider } from '../src/sandbox/providers/local.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { BACKENDS } from './support/backends.js';
import { fillLocal } from './support/endpoint-fixture.js';
import { type FilesOver, filesOf, filesOnlyProvider } from './support/file-api-handles.js';

// The file-API endpoints over each adapter, called directly: the node:fs adapter rooted at a
// directory, and TanStack's real local-process provider (bytes through its fs, the rest through its exec).
for (const over of ['directory', 'tanstack'] as const satisfies readonly FilesOver[]) {
  describeWorkspaceEndpointContract({
    name: `file API (${over})`,
    open: async () => {
      const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
      return {
        snapshots: b.snapshots,
        blobs: b.blobs,
        meta: b.meta,
        fresh: async () => {
          const dir = mkdtempSync(path.join(b.dir, 'ws-'));
          const { source, target } = fileApiEndpoints(await filesOf(dir, over));
          return {
            fill: async (fixture) => fillLocal(dir, fixture),
            checkpoint: (workspace, o = {}) => b.snapshots.checkpoint({ workspace, ...o, source }),
            restore: (workspace, o = {}) => b.snapshots.restore({ workspace, ...o, target }),
          };
        },
        cleanup: () => b.cleanup(),
      };
    },
  });
}

// A provider that declares `files` (its host path hidden): SandboxEndpoints chooses the file-API route itself.
describeWorkspaceEndpointContract({
  name: 'file API chosen by SandboxEndpoints for a provider that declares files (TanStack local-process)',
  open: async () => {
    const b = await (BACKENDS[0] as (typeof BACKENDS)[number]).open();
    const local = new LocalSandboxProvider({ root: path.join(b.dir, 'sandboxes') });
    const provider = filesOnlyProvider(local, 'tanstack');
    const endpoints = new SandboxEndpoints(() => provider);
    const made: SandboxHandle[] = [];
    return {
      snapshots: b.snapshots,
      blobs: b.blobs,
      meta: b.meta,
      fresh: async () => {
        const inner = await local.create();
        const sandbox = (await provider.get(inner.id)) as SandboxHandle;
        made.push(sandbox);
        expect(await endpoints.route(sandbox)).toBe('files');
        return {
          fill: async (fixture) => fillLocal(inner.localPath as string, fixture),
          checkpoint: (workspace, o = {}) => endpoints.checkpoint(b.snapshots, sandbox, { workspace, ...o }),
          restore: (workspace, o = {}) => endpoints.restore(b.snapshots, sandbox, { workspace, ...o }),
        };
      },
      cleanup: async () => {
        for (const s of made) await local.destroy(s.id);
        await b.cleanup();
      },
    };
  },
});
