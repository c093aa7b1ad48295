import { localProcessSandbox } from '@tanstack/ai-sandbox-local-process';
import { DirectoryFiles } from '../../src/sandbox/file-api/directory-files.js';
import type { SandboxFiles } from '../../src/sandbox/file-api/sandbox-files.js';
import { TanStackFiles } from '../../src/sandbox/file-api/tanstack-files.js';
import type { SandboxHandle, SandboxProvider } from '../../src/sandbox/sandbox-provider.js';

/** How a test reaches a host directory's files: the node:fs adapter, or TanStack's local-process provider rooted there. */
export type FilesOver = 'directory' | 'tanstack';

/** The file API of host directory `dir`, through the chosen adapter (a real TanStack local-process sandbox for `tanstack`). */
export async function filesOf(dir: string, over: FilesOver): Promise<SandboxFiles> {
  if (over === 'directory') return new DirectoryFiles(dir);
  const sandbox = await localProcessSandbox({ dir, removeOnDestroy: false }).create({});
  return new TanStackFiles(sandbox);
}

/**
 * A provider whose sandboxes expose their workspace through a file API only, as a remote
 * provider does: a real local provider with its host path hidden, declaring `files` and
 * handing out `files` over the sandbox's directory. Holdfast must choose the file-API route.
 */
export function filesOnlyProvider(inner: SandboxProvider, over: FilesOver): SandboxProvider {
  const wrap = async (h: SandboxHandle): Promise<SandboxHandle> => {
    const { localPath, ...rest } = h;
    const files = await filesOf(localPath as string, over);
    return Object.freeze({ ...rest, exec: h.exec.bind(h), run: h.run.bind(h), files });
  };
  return {
    name: inner.name,
    capabilities: Object.freeze({ ...inner.capabilities, localPath: false, files: true }),
    create: async (spec) => wrap(await inner.create(spec)),
    get: async (id) => {
      const h = await inner.get(id);
      return h === undefined ? undefined : wrap(h);
    },
    destroy: (id) => inner.destroy(id),
    list: () => inner.list(),
  };
}
