import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { ConflictError, InputError, NotFoundError } from '../errors.js';
import { writeFileAtomic } from '../workspace-fs/atomic-file.js';
import { removeTree as removeDeepTree } from '../workspace-fs/remove-tree.js';
import type { SandboxInfo, SandboxSpec } from './sandbox-provider.js';
import { checkedEnv, checkedLabels, checkedSandboxId, SANDBOX_ID_PATTERN } from './sandbox-spec.js';
import { type KillMode, killTrackedProcesses, trackProcess, untrackProcess } from './tracked-processes.js';

/**
 * Host-side state of providers whose sandboxes are directories (local, bwrap):
 *
 * ```text
 * ROOT/<id>/sandbox.json           the record (id: `sbx-<16 hex>` or the caller's own); its presence is what makes the sandbox exist
 *                   workspace/     the workspace disk
 *                   home/          the agent's home
 *                   procs/<pid>    one file per running exec (see tracked-processes.ts)
 * ROOT/.trash-…                    sandboxes being destroyed
 * ```
 *
 * `destroy` first renames the directory into the trash, which makes the sandbox gone in one
 * atomic step for every process on the host; it then kills the tracked processes and deletes.
 */

/** What is kept about one sandbox. */
export interface SandboxRecord {
  readonly version: 1;
  readonly id: string;
  readonly provider: string;
  readonly createdAt: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly env: Readonly<Record<string, string>>;
}

/** Host paths of one sandbox. */
export interface SandboxLayout {
  readonly dir: string;
  readonly record: string;
  readonly workspace: string;
  readonly home: string;
  readonly procs: string;
}

/** Ids of sandboxes: generated `sbx-<16 hex>` ones and callers' own both match it (see `SANDBOX_ID_PATTERN`). */
const ID_PATTERN = SANDBOX_ID_PATTERN;
const TRASH_PREFIX = '.trash-';

/** The sandboxes of one directory-backed provider under `root`. */
export class SandboxDirs {
  constructor(
    readonly root: string,
    readonly provider: string,
  ) {}

  /** Host paths of sandbox `id` (which must have the id shape). */
  layout(id: string): SandboxLayout {
    const dir = path.join(this.root, id);
    return {
      dir,
      record: path.join(dir, 'sandbox.json'),
      workspace: path.join(dir, 'workspace'),
      home: path.join(dir, 'home'),
      procs: path.join(dir, 'procs'),
    };
  }

  /**
   * Creates the directories and, last, the record. `prepare` adds provider-specific files
   * first; if anything fails, nothing is left behind.
   */
  async create(spec: SandboxSpec, prepare?: (layout: SandboxLayout) => Promise<void>): Promise<SandboxRecord> {
    if (spec.image !== undefined) {
      throw new InputError('INVALID_INPUT', `[${this.provider}] sandboxes have no images; leave SandboxSpec.image unset`, {
        data: { provider: this.provider },
      });
    }
    const record: SandboxRecord = {
      version: 1,
      id: checkedSandboxId(spec.id, this.provider, () => `sbx-${randomBytes(8).toString('hex')}`),
      provider: this.provider,
      createdAt: Date.now(),
      labels: checkedLabels(spec.labels),
      env: checkedEnv(spec.env),
    };
    const layout = this.layout(record.id);
    await fsp.mkdir(this.root, { recursive: true, mode: 0o700 });
    try {
      await fsp.mkdir(layout.dir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      throw new ConflictError('ALREADY_EXISTS', `[${this.provider}] sandbox ${record.id} already exists: choose another id`, {
        data: { provider: this.provider, id: record.id },
      });
    }
    try {
      for (const dir of [layout.workspace, layout.home, layout.procs]) await fsp.mkdir(dir);
      await prepare?.(layout);
      // A crash leaves either no record or the whole record.
      writeFileAtomic(layout.record, `${JSON.stringify(record, null, 2)}\n`);
    } catch (error) {
      await fsp.rm(layout.dir, { recursive: true, force: true });
      throw error;
    }
    return record;
  }

  /** The record of `id`, or undefined when it does not exist or belongs to another provider. */
  async read(id: string): Promise<SandboxRecord | undefined> {
    if (!ID_PATTERN.test(id)) return undefined;
    let text: string;
    try {
      text = await fsp.readFile(this.layout(id).record, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const record = JSON.parse(text) as SandboxRecord;
    return record.provider === this.provider && record.id === id ? record : undefined;
  }

  /** Every sandbox, oldest first. */
  async list(): Promise<SandboxInfo[]> {
    let names: string[];
    try {
      names = await fsp.readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const records = await Promise.all(names.filter((n) => ID_PATTERN.test(n)).map((n) => this.read(n)));
    return records
      .filter((r): r is SandboxRecord => r !== undefined)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
      .map((r) => ({ id: r.id, provider: r.provider, createdAt: r.createdAt, labels: { ...r.labels }, state: 'running' }));
  }

  /** Throws `NOT_FOUND` unless sandbox `id` exists right now. Synchronous, for `exec`. */
  assertLive(id: string): void {
    if (!fs.existsSync(this.layout(id).record)) {
      throw new NotFoundError(`[${this.provider}] sandbox ${id} does not exist (destroyed?): create a new one`, {
        data: { provider: this.provider, id },
      });
    }
  }

  /** Registers a running exec; throws `NOT_FOUND` when the sandbox was destroyed meanwhile. */
  track(id: string, pid: number, mode: KillMode): void {
    try {
      trackProcess(this.layout(id).procs, pid, mode);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      this.assertLive(id);
      throw error;
    }
  }

  /** Forgets a finished exec. */
  untrack(id: string, pid: number): void {
    untrackProcess(this.layout(id).procs, pid);
  }

  /** Idempotent destroy: makes the sandbox gone atomically, then kills its processes and deletes its files. */
  async destroy(id: string): Promise<void> {
    if (ID_PATTERN.test(id)) {
      const trash = path.join(this.root, `${TRASH_PREFIX}${id}-${randomBytes(4).toString('hex')}`);
      try {
        await fsp.rename(this.layout(id).dir, trash);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    await this.emptyTrash();
  }

  /** Finishes every destroy on record, including ones interrupted by a crash. */
  private async emptyTrash(): Promise<void> {
    let names: string[];
    try {
      names = await fsp.readdir(this.root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const name of names.filter((n) => n.startsWith(TRASH_PREFIX))) {
      const dir = path.join(this.root, name);
      await killTrackedProcesses(path.join(dir, 'procs'));
      await removeTree(dir);
    }
  }
}

/**
 * Deletes a sandbox's files even if commands inside made directories unreadable (a non-root
 * host user cannot delete inside a mode-000 directory it owns until it restores the mode) or
 * paths longer than PATH_MAX.
 */
async function removeTree(dir: string): Promise<void> {
  try {
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A path past PATH_MAX inside (a workspace may hold one) is reached entry by entry, through open directories.
    if (code === 'ENAMETOOLONG') return removeDeepTree(dir);
    if (code !== 'EACCES' && code !== 'EPERM') throw error;
    await restoreOwnerAccess(dir);
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

async function restoreOwnerAccess(dir: string): Promise<void> {
  await fsp.chmod(dir, 0o700);
  for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) await restoreOwnerAccess(path.join(dir, entry.name));
  }
}
