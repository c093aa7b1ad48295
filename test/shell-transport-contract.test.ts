import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { SandboxEndpoints } from '../src/sandbox/endpoints/sandbox-endpoints.js';
import { DockerSandboxProvider } from '../src/sandbox/providers/docker.js';
import type { SandboxHandle } from '../src/sandbox/sandbox-provider.js';
import { describeWorkspaceEndpointContract } from '../src/snapshot/workspace-endpoint.contract.js';
import { openBwrapBackends } from './support/bwrap-backends.js';
import { busyboxImage, expectDockerInstalled } from './support/docker-images.js';
import { fillScriptNode } from './support/endpoint-fixture.js';
import { runNode } from './support/sandbox-processes.js';
import { fillScriptBusybox, type ShellEndpointOptions, shellCheckpoint, shellRestore } from './support/shell-endpoints.js';
import { withoutStdin, withoutStdinProvider } from './support/shell-handles.js';

// The shell transport with stdin and without (a provider wrapper that refuses stdin), through bwrap.
for (const mode of ['stdin', 'args'] as const) {
  describeWorkspaceEndpointContract({
    name: `shell transport (${mode}) through bwrap`,
    open: async () => {
      const { b, provider } = await openBwrapBackends();
      const made: SandboxHandle[] = [];
      const options: ShellEndpointOptions = { mode };
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
            checkpoint: (workspace, o = {}) => shellCheckpoint(b.snapshots, handle, workspace, options, o),
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

// A busybox-only Docker sandbox (no Node, no coreutils), reached by the route Holdfast chooses
// itself: the shell with stdin, and over arguments alone through a provider that takes no stdin.
// busybox's `touch` sets whole seconds, so the fixture's times are whole seconds and whole
// seconds are accepted.
for (const stdin of [true, false]) {
  describeWorkspaceEndpointContract({
    name: `shell transport chosen for a busybox-only Docker sandbox (${stdin ? 'stdin' : 'no stdin'})`,
    mtimePrecisionMs: 1000,
    open: async () => {
      expectDockerInstalled();
      const { b } = await openBwrapBackends();
      const docker = new DockerSandboxProvider({
        image: busyboxImage(),
        scope: `test-shell-contract-${process.pid}-${randomBytes(3).toString('hex')}`,
      });
      const provider = stdin ? docker : withoutStdinProvider(docker);
      const endpoints = new SandboxEndpoints(() => provider);
      return {
        snapshots: b.snapshots,
        blobs: b.blobs,
        meta: b.meta,
        fresh: async () => {
          const sandbox = await provider.create();
          expect(await endpoints.route(sandbox)).toBe(stdin ? 'shell-stdin' : 'shell-args');
          return {
            fill: async (fixture) => {
              const r = await sandbox.run(['sh', '-c', fillScriptBusybox(sandbox.workspaceRoot, fixture)]);
              if (r.code !== 0) throw new Error(`fill failed: ${r.stderr.toString()}`);
            },
            checkpoint: (workspace, o = {}) => endpoints.checkpoint(b.snapshots, sandbox, { workspace, ...o }),
            restore: (workspace, o = {}) => endpoints.restore(b.snapshots, sandbox, { workspace, ...o }),
          };
        },
        cleanup: async () => {
          for (const info of await docker.list()) await docker.destroy(info.id);
          await b.cleanup();
        },
      };
    },
  });
}
