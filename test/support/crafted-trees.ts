import { type Sha256Hex, sha256Hex } from '../../src/core/hash.js';
import type { Checkpoint, MetadataStore } from '../../src/metadata/metadata-store.js';
import type { ObjectKind } from '../../src/objects/pack-format.js';
import { uploadPack } from '../../src/objects/pack-uploader.js';
import { PackWriter } from '../../src/objects/pack-writer.js';
import type { OpenedBackends } from './backends.js';

/** One object an attacker stores: its id is the hash of its bytes, whatever the bytes say. */
export interface CraftedObject {
  readonly id: Sha256Hex;
  readonly kind: ObjectKind;
  readonly bytes: Buffer;
}

/**
 * A tree object with exactly the entries given, in the given order, written the way the
 * canonical encoder would lay out keys (so only what the entries say can make it invalid).
 * Nothing is validated: this is the attacker's encoder.
 */
export function rawTree(entries: readonly Record<string, unknown>[]): CraftedObject {
  const bytes = Buffer.from(JSON.stringify({ v: 1, entries }));
  return { id: sha256Hex(bytes), kind: 'tree', bytes };
}

/** A data object (one chunk) holding `content`. */
export function rawChunk(content: string | Buffer): CraftedObject {
  const bytes = Buffer.from(content);
  return { id: sha256Hex(bytes), kind: 'data', bytes };
}

/** A file entry for `chunk`, keys in canonical order. */
export function fileEntry(name: string, chunk: CraftedObject, mode = 0o644, mtimeMs = 0): Record<string, unknown> {
  return { name, type: 'file', mode, size: chunk.bytes.length, mtimeMs, sha256: chunk.id, chunks: [chunk.id] };
}

/** A directory entry for `tree`, keys in canonical order. */
export function dirEntry(name: string, tree: CraftedObject | Sha256Hex, mode = 0o755, mtimeMs = 0): Record<string, unknown> {
  return { name, type: 'dir', mode, mtimeMs, tree: typeof tree === 'string' ? tree : tree.id };
}

/** A symlink entry, keys in canonical order. */
export function symlinkEntry(name: string, target: string, mtimeMs = 0): Record<string, unknown> {
  return { name, type: 'symlink', target, mtimeMs };
}

/** Packs `objects` with the real pack writer, uploads the packs and registers them in the index. */
export async function storeObjects(b: Pick<OpenedBackends, 'blobs' | 'meta'>, objects: readonly CraftedObject[]): Promise<void> {
  for (const kind of ['data', 'tree'] as const) {
    const writer = new PackWriter(kind);
    for (const o of objects) if (o.kind === kind) writer.add(o.id, o.bytes, o.bytes.length, 'none');
    if (writer.count === 0) continue;
    const pack = writer.seal();
    await uploadPack(b.blobs, pack);
    await b.meta.objects.insertPacksAndObjects(
      [{ id: pack.id, kind, size: pack.size, objectCount: pack.objects.length }],
      pack.objects.map(({ id, offset, length, rawLength, codec }) => ({ id, packId: pack.id, kind, offset, length, rawLength, codec })),
    );
  }
}

/**
 * Stores `objects` and makes `root` the root of a new ready checkpoint at the head of
 * `workspace` (created if needed), as a compromised writer of the store could.
 */
export async function commitCrafted(
  b: Pick<OpenedBackends, 'blobs' | 'meta' | 'snapshots'>,
  workspace: string,
  objects: readonly CraftedObject[],
  root: CraftedObject,
): Promise<Checkpoint> {
  await storeObjects(b, [...objects, root]);
  const meta: MetadataStore = b.meta;
  const ws = await b.snapshots.workspace(workspace, true);
  const pending = await meta.checkpoints.createPending({ workspaceId: ws.id, parentId: ws.headCheckpointId, reason: 'manual' });
  const ready = await meta.checkpoints.markReady(pending.id, { rootTree: root.id });
  await meta.workspaces.casHead(ws.id, ws.headVersion, ready.id);
  return ready;
}
