import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../blob-store/blob-store.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import { ObjectReader } from '../objects/object-reader.js';
import type { ExcludeOptions } from '../rules/excludes.js';
import { MAX_IGNORE_FILE_BYTES } from '../rules/ignore-files.js';
import { codeOf } from '../testkit/code-of.js';
import {
  endpointFixture,
  FIXTURE_SECRETS,
  type FixtureEntry,
  fixtureBytes,
  fixtureSha256,
  GITIGNORE_EXCLUDES,
  GITIGNORE_IGNORED,
  GITIGNORE_KEPT,
  gitignoreFixture,
} from '../testkit/endpoint-fixture.js';
import type { CheckpointResult } from './checkpoint/checkpoint.js';
import type { RestoreProgress, RestoreReceipt } from './restore/restore.js';
import type { Snapshots } from './snapshots.js';
import { type FlatTree, flattenTree } from './tree-walk.js';

/** One workspace reached through the endpoint under test (a host directory, a sandbox's workspace). */
export interface EndpointUnderTest {
  /** Fills the (empty) workspace with `fixture`, by means independent of the endpoint's transport. */
  fill(fixture: readonly FixtureEntry[]): Promise<void>;
  /** A checkpoint of this workspace through the endpoint's source (with `excludes` when given). */
  checkpoint(workspace: string, options?: { excludes?: ExcludeOptions }): Promise<CheckpointResult>;
  /** A restore into this workspace through the endpoint's target. */
  restore(
    workspace: string,
    options?: { checkpoint?: string; replace?: boolean; onProgress?: (p: RestoreProgress) => void; signal?: AbortSignal },
  ): Promise<RestoreReceipt>;
}

/** How an endpoint's test file plugs into the shared suite. */
export interface WorkspaceEndpointContractOptions {
  /** Shown in the test titles. */
  readonly name: string;
  /** The mtime precision the endpoint keeps, in milliseconds: 1, or 1000 for tools that set whole seconds. */
  readonly mtimePrecisionMs?: 1 | 1000;
  /** Opens the stores and a way to get fresh, empty workspaces at the endpoint; `cleanup` removes them all. */
  readonly open: () => Promise<{
    snapshots: Snapshots;
    blobs: BlobStore;
    meta: MetadataStore;
    fresh(): Promise<EndpointUnderTest>;
    cleanup(): Promise<void>;
  }>;
}

/**
 * The WorkspaceSource + WorkspaceTarget contract: every endpoint (local, the agent through
 * bwrap and Docker, the shell transport with and without stdin) checkpoints the same fixture
 * to the same tree and restores it exactly, keeps secrets out, does not re-read an unchanged
 * workspace, applies `.gitignore` files as git does when asked (the same paths on every
 * endpoint), refuses a non-empty target without `replace`, and leaves the previous copy
 * intact when a restore fails. Exactness is proven by the tree: a restored workspace
 * checkpointed again has the very root tree of the checkpoint it came from (names, bytes,
 * modes, mtimes, links and the root's own mode and mtime all hash into it).
 */
export function describeWorkspaceEndpointContract(options: WorkspaceEndpointContractOptions): void {
  const precision = options.mtimePrecisionMs ?? 1;
  const fixture = endpointFixture(precision);

  describe(`workspace endpoint contract: ${options.name}`, () => {
    let opened: Awaited<ReturnType<WorkspaceEndpointContractOptions['open']>>;
    let origin: EndpointUnderTest;
    let first: CheckpointResult;
    let reader: ObjectReader;

    beforeAll(async () => {
      opened = await options.open();
      reader = new ObjectReader(opened.blobs, opened.meta);
      origin = await opened.fresh();
      await origin.fill(fixture);
      first = await origin.checkpoint('contract');
    }, 180_000);
    afterAll(async () => {
      await opened?.cleanup();
    }, 180_000);

    const treeOf = async (result: CheckpointResult): Promise<FlatTree> =>
      flattenTree(reader, result.checkpoint.rootTree as string, { mode: 0o755, mtimeMs: 0 });

    it('a checkpoint holds every file, directory and link of the fixture as it is, and no secret', async () => {
      const flat = await treeOf(first);
      const files = new Map(flat.files.map((f) => [f.path, f]));
      const dirs = new Map(flat.dirs.map((d) => [d.path, d]));
      const links = new Map(flat.symlinks.map((l) => [l.path, l]));
      for (const e of fixture) {
        if (FIXTURE_SECRETS.includes(e.path)) {
          expect(files.has(e.path), e.path).toBe(false);
          continue;
        }
        if (e.type === 'file') {
          expect(files.get(e.path), e.path).toMatchObject({
            size: fixtureBytes(e).length,
            sha256: fixtureSha256(e),
            mode: e.mode,
            mtimeMs: e.mtimeMs,
          });
        } else if (e.type === 'hardlink') {
          const leader = fixture.find((l) => l.path === e.leader) as Extract<FixtureEntry, { type: 'file' }>;
          expect(files.get(e.path), e.path).toMatchObject({ sha256: fixtureSha256(leader) });
          // The group's first member in path order leads; the other names it.
          const [lead, member] = [e.path, e.leader].sort();
          expect(files.get(member as string)?.hardlink, e.path).toBe(lead);
        } else if (e.type === 'dir') {
          expect(dirs.get(e.path), e.path).toMatchObject({ mode: e.mode, mtimeMs: e.mtimeMs });
        } else {
          expect(links.get(e.path)?.target, e.path).toBe(e.target);
        }
      }
      expect(flat.files.length).toBe(
        fixture.filter((e) => (e.type === 'file' || e.type === 'hardlink') && !FIXTURE_SECRETS.includes(e.path)).length,
      );
      expect(first.excluded.map((x) => x.path)).toEqual(expect.arrayContaining(FIXTURE_SECRETS));
    });

    it('an unchanged workspace is checkpointed again without reading a file, to the same tree', async () => {
      const again = await origin.checkpoint('contract');
      expect(again.stats.filesHashed).toBe(0);
      expect(again.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    });

    it('with gitignore, keeps what git keeps: .gitignore at every depth, negations, .git/info/exclude, nothing applied in .git', async () => {
      const ws = await opened.fresh();
      await ws.fill(gitignoreFixture());
      const result = await ws.checkpoint('contract-gitignore', { excludes: GITIGNORE_EXCLUDES });
      const flat = await treeOf(result);
      expect(flat.files.map((f) => f.path).sort()).toEqual(GITIGNORE_KEPT);
      const ignored = result.excluded.filter((x) => x.reason === 'gitignore').map((x) => x.path);
      expect(ignored.sort()).toEqual(GITIGNORE_IGNORED);
    });

    it('with gitignore, a .gitignore over the bound fails the checkpoint with LIMIT_EXCEEDED', async () => {
      const ws = await opened.fresh();
      const line = '# a comment that makes the file long\n';
      await ws.fill([
        {
          type: 'file',
          path: 'sub/.gitignore',
          mode: 0o644,
          mtimeMs: Date.UTC(2024, 0, 1),
          content: { repeat: line, size: MAX_IGNORE_FILE_BYTES + 1 },
        },
      ]);
      expect(await codeOf(ws.checkpoint('contract-big-gitignore', { excludes: GITIGNORE_EXCLUDES }))).toBe('LIMIT_EXCEEDED');
    });

    it('restores exactly into a fresh workspace: checkpointed again it is the same root tree', async () => {
      const copy = await opened.fresh();
      const receipt = await copy.restore('contract', { checkpoint: first.checkpoint.id });
      expect(receipt).toMatchObject({ checkpointId: first.checkpoint.id, verified: true, filesReused: 0, hardlinks: 1 });
      expect(receipt.bytesFetched).toBeGreaterThan(33 * 1024 * 1024);
      const back = await copy.checkpoint('contract-copy');
      expect(back.checkpoint.rootTree).toBe(first.checkpoint.rootTree);
      // The root has no entry of its own: its mode and mtime are recorded beside the tree.
      expect(back.stats.root).toEqual(first.stats.root);
    });

    it('refuses a non-empty target without replace (CONFLICT) and leaves it as it was', async () => {
      const other = await opened.fresh();
      await other.fill([{ type: 'file', path: 'mine.txt', mode: 0o644, mtimeMs: Date.UTC(2020, 0, 1), content: { bytes: 'keep me\n' } }]);
      const before = await other.checkpoint('contract-other');
      expect(await codeOf(other.restore('contract', { checkpoint: first.checkpoint.id }))).toBe('CONFLICT');
      const after = await other.checkpoint('contract-other');
      expect(after.checkpoint.rootTree).toBe(before.checkpoint.rootTree);
    });

    it('a warm restore with replace makes the target the checkpoint; a failed one leaves the previous copy', async () => {
      const other = await opened.fresh();
      await other.fill([
        { type: 'file', path: 'mine.txt', mode: 0o644, mtimeMs: Date.UTC(2020, 0, 1), content: { bytes: 'keep me\n' } },
        ...fixture.filter((e) => e.path === 'README.md'),
      ]);
      const before = await other.checkpoint('contract-warm');
      // Aborted once the first round of files is written: nothing is published.
      const abort = new AbortController();
      const failed = other.restore('contract', {
        checkpoint: first.checkpoint.id,
        replace: true,
        signal: abort.signal,
        onProgress: () => abort.abort(),
      });
      await expect(failed).rejects.toMatchObject({ name: 'AbortError' });
      expect((await other.checkpoint('contract-warm')).checkpoint.rootTree).toBe(before.checkpoint.rootTree);
      const receipt = await other.restore('contract', { checkpoint: first.checkpoint.id, replace: true });
      expect(receipt.verified).toBe(true);
      expect((await other.checkpoint('contract-warm')).checkpoint.rootTree).toBe(first.checkpoint.rootTree);
    });
  });
}
