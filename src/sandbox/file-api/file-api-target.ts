import { randomBytes } from 'node:crypto';
import { ConflictError, InputError } from '../../errors.js';
import type { RestorePlan, TargetSession, WorkspaceTarget } from '../../snapshot/workspace-target.js';
import { FileApiRestoreSession, STAGING_PREFIX } from './file-api-restore-session.js';
import type { SandboxFiles } from './sandbox-files.js';

/** What {@link FileApiWorkspaceTarget} needs. */
export interface FileApiTargetConfig {
  readonly files: SandboxFiles;
  /** The key of this workspace's host stat cache (the one its source uses). */
  readonly cacheKey: string;
  /** Where the host keeps stat caches: the restore records what it wrote, for the next checkpoint. */
  readonly cacheDir: string;
}

/**
 * Restores into a sandbox through its file API ({@link SandboxFiles}). The tree is built in a
 * staging directory inside the workspace root (the API is rooted there, so the root itself is
 * never renamed), every file is written in bounded pieces, then given its mode and mtime, read
 * back and hashed here, and stated again (`INTEGRITY` with `{path, field}` for what the
 * sandbox did not keep); `publish` moves the previous entries aside, the staged ones in, and
 * removes the previous copy only once the new one is in place. Until then the target is as
 * it was, and a failure, `abort` or a crash leaves it so.
 */
export class FileApiWorkspaceTarget implements WorkspaceTarget {
  readonly label: string;

  constructor(private readonly config: FileApiTargetConfig) {
    this.label = config.files.label;
  }

  async begin(plan: RestorePlan): Promise<TargetSession> {
    const { files } = this.config;
    const top = await files.lstat('');
    if (top === undefined || top.type !== 'dir') {
      throw new InputError('INVALID_INPUT', `${this.label} is not a directory`, { data: { path: this.label } });
    }
    let previous: 'empty' | 'non-empty' = 'empty';
    for await (const e of files.list('')) {
      if (typeof e?.name === 'string' && !e.name.startsWith(STAGING_PREFIX)) {
        previous = 'non-empty';
        break;
      }
    }
    if (previous === 'non-empty' && !plan.replace) {
      throw new ConflictError('CONFLICT', `${this.label} is not empty; pass replace to overwrite it`, {
        data: { reason: 'target-not-empty', path: this.label },
      });
    }
    const id = randomBytes(8).toString('hex');
    const session = new FileApiRestoreSession(this.config, plan, previous, `${STAGING_PREFIX}${id}`, `${STAGING_PREFIX}old-${id}`);
    await session.open();
    return session;
  }
}
