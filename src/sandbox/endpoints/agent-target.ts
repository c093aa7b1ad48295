import { createHash } from 'node:crypto';
import { ConflictError } from '../../errors.js';
import type { PathedFile } from '../../snapshot/restore/restore-files.js';
import {
  type FlatDir,
  type FlatSymlink,
  NOTHING_REUSED,
  type RestorePlan,
  type TargetReuse,
  type TargetSession,
  type WorkspaceTarget,
} from '../../snapshot/workspace-target.js';
import { type AgentClient, agentCacheKey } from '../agent/host/agent-client.js';
import { BatchWriter, type FileMeta } from '../agent/host/batch-writer.js';
import type { StageBeginResult } from '../agent/wire/protocol.js';

/**
 * A workspace inside a sandbox, written through the in-sandbox agent over exec, with the
 * guarantees of a local restore: the agent builds the tree in a staging directory beside the
 * target and publishes it in one step, verifies every file's hash where it lands, sets and
 * reads back modes and whole-millisecond mtimes (pre-1970 ones included; `INTEGRITY` data
 * `{path, field}` when the sandbox's filesystem did not keep one), links hard-link members
 * to their leader and gives the root its recorded mode and mtime last. Unchanged files
 * already at the target are reused by path and hash rather than sent.
 *
 * The staging id is derived from the checkpoint and the target, so a restore retried after a
 * lost agent resumes where the last one stopped: completed write batches are not sent twice,
 * and a publish that had begun is only completed. Once published, the same id begins a new
 * restore: restoring a checkpoint again puts back what was changed since. (A lost agent cannot be asked to abort, so
 * its staging stays for that retry; any other failure removes it.)
 */
export class AgentWorkspaceTarget implements WorkspaceTarget {
  readonly label: string;

  constructor(
    private readonly client: AgentClient,
    private readonly root: string,
    sandboxId: string,
  ) {
    this.label = `sandbox ${sandboxId}:${root}`;
  }

  async begin(plan: RestorePlan): Promise<TargetSession> {
    const { client, root } = this;
    const stagingId = `r${createHash('sha256').update(`${plan.checkpoint.id}\0${root}`).digest('hex').slice(0, 24)}`;
    const begin = await client.stageBegin({
      stagingId,
      target: root,
      replace: plan.replace,
      cacheKey: agentCacheKey(plan.workspace.id, root),
    });
    if (begin.targetState === 'non-empty' && !plan.replace && begin.phase === 'staging') {
      await client.abort(stagingId);
      throw new ConflictError('CONFLICT', `the sandbox workspace ${root} is not empty: pass --replace to replace it`, {
        data: { target: root, reason: 'target-not-empty' },
      });
    }
    return new AgentSession(client, root, stagingId, begin, plan);
  }
}

/** One restore through the agent; see {@link AgentWorkspaceTarget}. */
class AgentSession implements TargetSession {
  readonly complete: boolean;
  readonly previous: TargetSession['previous'];
  private readonly writer: BatchWriter;

  constructor(
    private readonly client: AgentClient,
    private readonly root: string,
    private readonly stagingId: string,
    begin: StageBeginResult,
    private readonly plan: RestorePlan,
  ) {
    this.complete = begin.phase !== 'staging';
    this.previous = begin.targetState;
    this.writer = new BatchWriter(client, stagingId, { completed: begin.completedBatchIds });
  }

  async directories(dirs: readonly FlatDir[]): Promise<void> {
    for (const dir of dirs) await this.writer.mkdir(dir.path);
    // The agent reuses into existing directories: they must be there first. Into an empty
    // target, files follow in later batches, which the agent applies after these.
    if (this.previous === 'non-empty') await this.writer.flush();
  }

  async reuse(files: readonly PathedFile[]): Promise<TargetReuse> {
    if (this.previous !== 'non-empty') return NOTHING_REUSED;
    const done = new Set(await this.client.stageReuse(this.stagingId, files.map(meta)));
    // The agent's reuse is by path and whole file: it links or leaves, never copies.
    return { done, filesReused: done.size, bytesFetched: 0, bytesCopiedLocally: 0 };
  }

  file(file: PathedFile, content: readonly Uint8Array[] | AsyncIterable<Uint8Array>): Promise<void> {
    const bytes = Array.isArray(content) ? joined(content as readonly Uint8Array[]) : (content as AsyncIterable<Uint8Array>);
    return this.writer.file(meta(file), bytes);
  }

  async links(members: readonly PathedFile[]): Promise<void> {
    for (const member of members) await this.writer.link(meta(member), member.hardlink as string);
  }

  async symlinks(links: readonly FlatSymlink[]): Promise<void> {
    for (const link of links) await this.writer.symlink(link.path, link.target, link.mtimeMs);
  }

  async publish(): Promise<void> {
    const { flat, rootRecorded, checkpoint } = this.plan;
    if (!this.complete) {
      for (const dir of [...flat.dirs].reverse()) if (dir.path !== '') await this.writer.dir(dir.path, dir.mode, dir.mtimeMs);
      await this.writer.flush();
    }
    const root = flat.dirs[0] as FlatDir;
    await this.client.publish({
      stagingId: this.stagingId,
      target: this.root,
      base: checkpoint.id,
      ...(rootRecorded ? { root: { mode: root.mode, mtimeMs: root.mtimeMs } } : {}),
    });
  }

  async abort(): Promise<void> {
    if (this.client.alive) await this.client.abort(this.stagingId);
  }
}

function joined(pieces: readonly Uint8Array[]): Uint8Array {
  return pieces.length === 1 ? (pieces[0] as Uint8Array) : Buffer.concat(pieces);
}

function meta(file: PathedFile): FileMeta & { chunks: readonly string[] } {
  return { path: file.path, size: file.size, sha256: file.sha256, mode: file.mode, mtimeMs: file.mtimeMs, chunks: file.chunks };
}
