import path from 'node:path';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { fillScriptNode } from './support/endpoint-fixture.js';
import { runNode } from './support/sandbox-processes.js';
import { fillScriptBusybox, type ShellEndpointOptions, shellCheckpoint, shellRestore } from './support/shell-endpoints.js';
import { DockerExecHandle, withoutStdin } from './support/shell-handles.js';

// The shell transport with stdin and without (a provider wrapper that refuses stdin), through bwrap.
for (const mode of ['stdin', 'args'] as const) {
  describeWorkspaceEndpointContract({
    name: `shell transport (${mode}) through bwrap`,
    open: async () => {
      const { b, provider } = await openBwrapBackends();
      const made: SandboxHandle[] = [];
      const options: ShellEndpointOptions = { mode, cacheDir: path.join(b.dir, 'shell-cache') };
      return {
        snapshots: b.snapshots,
        blobs: b.blobs,
        meta: b.meta,
        fresh: async () => {
          const sandbox = await provider.create();
          made.push(sandbox);
          const handle = mode === 'args' ? withoutStdin(sandbox) : sandbox;
          return {
            fill: async (fixture) => {
              await runNode(sandbox, fillScriptNode(sandbox.workspaceRoot, fixture));
            },
            checkpoint: (workspace) => shellCheckpoint(b.snapshots, handle, workspace, options),
            restore: (workspace, o = {}) => shellRestore(b.snapshots, handle, workspace, options, o),
          };
        },
        cleanup: async () => {
          for (const s of made) await provider.destroy(s.id);
          await b.cleanup();
        },
      };
    },
  });
}

// A busybox-only container (no Node, no coreutils) over `docker exec`, without stdin: busybox's
// `touch` sets whole seconds, so the fixture's times are whole seconds and the target accepts them.
describeWorkspaceEndpointContract({
  name: 'shell transport (args) in a busybox-only Docker container',
  mtimePrecisionMs: 1000,
  open: async () => {
    const { b } = await openBwrapBackends();
    const made: DockerExecHandle[] = [];
    const options: ShellEndpointOptions = { mode: 'args', cacheDir: path.join(b.dir, 'shell-cache'), acceptSecondMtimes: true };
    return {
      snapshots: b.snapshots,
      blobs: b.blobs,
      meta: b.meta,
      fresh: async () => {
        const container = DockerExecHandle.create();
        made.push(container);
        const handle = withoutStdin(container);
        return {
          fill: async (fixture) => {
            const r = await container.run(['sh', '-c', fillScriptBusybox(container.workspaceRoot, fixture)]);
            if (r.code !== 0) throw new Error(`fill failed: ${r.stderr.toString()}`);
          },
          checkpoint: (workspace) => shellCheckpoint(b.snapshots, handle, workspace, options),
          restore: (workspace, o = {}) => shellRestore(b.snapshots, handle, workspace, options, o),
        };
      },
      cleanup: async () => {
        for (const c of made) c.destroy();
        await b.cleanup();
      },
    };
  },
});
