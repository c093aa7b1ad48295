import type { EndpointContext, WorkspaceSource } from '../../snapshot/workspace-source.js';
import type { WorkspaceTarget } from '../../snapshot/workspace-target.js';
import { FileApiWorkspaceSource } from './file-api-source.js';
import { FileApiWorkspaceTarget } from './file-api-target.js';
import type { SandboxFiles } from './sandbox-files.js';

/**
 * The `source` and `target` factories `Snapshots.checkpoint` / `Snapshots.restore` take, for
 * a workspace reached through a file API. `cacheKey` names the workspace among the host's stat
 * caches (stable for one sandbox: `provider/id/root`; default the API's label).
 *
 * Fidelity: names are bytes both ways (as the adapter carries them), bytes, permission bits,
 * mtimes to the millisecond (before 1970 too), hard links and symlinks are exact, each checked
 * after it lands; a warm restore sends every file again (`reuse` keeps nothing).
 */
export function fileApiEndpoints(
  files: SandboxFiles,
  cacheKey: string = files.label,
): { source: (context: EndpointContext) => WorkspaceSource; target: (context: EndpointContext) => WorkspaceTarget } {
  return {
    source: (context) => new FileApiWorkspaceSource({ files, cacheKey, cacheDir: context.cacheDir }, context),
    target: (context) => new FileApiWorkspaceTarget({ files, cacheKey, cacheDir: context.cacheDir }),
  };
}
