import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { ConflictError, InputError } from '../../../errors.js';
import type { RestorePlan, TargetSession, WorkspaceTarget } from '../../../snapshot/workspace-target.js';
import type { SandboxHandle } from '../../sandbox-provider.js';
import type { ShellMode } from './shell-exec.js';
import { abortInSandbox, beginInSandbox } from './shell-publish.js';
import { ShellRestoreSession } from './shell-restore-session.js';

/** How precisely the sandbox's `touch` sets times: `ms` (GNU `touch -d @s.fff`) or whole seconds (busybox). */
export type MtimePrecision = 'ms' | 's';

/** What {@link ShellWorkspaceTarget} needs. */
export interface ShellTargetConfig {
  readonly handle: SandboxHandle;
  /** The workspace root inside the sandbox (absolute). */
  readonly root: string;
  /** `stdin` streams file bytes; `args` passes every byte in bounded exec arguments (providers without stdin). */
  readonly mode: ShellMode;
  /**
   * What the sandbox's `touch` can set (from `probeSandbox`): with `s`, mtimes are kept and
   * verified to the second and the restore's receipt says so (`mtimePrecisionMs: 1000`).
   */
  readonly mtimePrecision: MtimePrecision;
  /** Where the host keeps stat caches (the restore records what it wrote, for the next checkpoint). */
  readonly cacheDir: string;
  /** The sandbox has `tar` (from `probeSandbox`): small files go in one tar stream per exec instead of a `dd` and a `touch` each. */
  readonly tar?: boolean;
}

/**
 * Restores into a sandbox with nothing but a POSIX shell and coreutils or busybox (see
 * `ShellWorkspaceSource` for reading). Files are written into staging (beside the target, or
 * inside it when the target is a mount point), then each one's SHA-256, mode and mtime are read
 * back with `sha256sum` and `stat` and checked here; hard links come from `ln`, symlinks from
 * `ln -s` (confinement checked again), and `publish` swaps staging in by rename. In `args` mode
 * nothing is sent on stdin: file bytes travel as base64 arguments of bounded size.
 */
export class ShellWorkspaceTarget implements WorkspaceTarget {
  readonly label: string;

  constructor(private readonly config: ShellTargetConfig) {
    if (!path.posix.isAbsolute(config.root))
      throw new InputError('INVALID_INPUT', `[shell] the sandbox root ${config.root} is not absolute`);
    this.label = `sandbox ${config.handle.id}:${config.root}`;
  }

  async begin(plan: RestorePlan): Promise<TargetSession> {
    const id = randomBytes(8).toString('hex');
    const stagingName = `.holdfast-stage-${id}`;
    const found = await beginInSandbox(this.config.handle, this.config.root, stagingName);
    if (found.previous === 'not-dir') {
      throw new InputError('INVALID_INPUT', `${this.label} is not a directory`, { data: { path: this.config.root } });
    }
    if (found.previous === 'non-empty' && !plan.replace) {
      await abortInSandbox(this.config.handle, this.config.root, stagingName, found.layout);
      throw new ConflictError('CONFLICT', `${this.label} is not empty; pass replace to overwrite it`, {
        data: { reason: 'target-not-empty', path: this.config.root },
      });
    }
    return new ShellRestoreSession(this.config, plan, found.previous, found.layout, stagingName, `.holdfast-stage-old-${id}`);
  }
}
