import type { Checkpoint, MetadataStore } from '../../metadata/metadata-store.js';

/**
 * Forgets every finished checkpoint of `head`'s workspace but `head` (which the engine just
 * made the head): a sync workspace keeps one checkpoint, so storage does not grow with every
 * save. Pending ones are left (retention fails abandoned ones); the delete itself never
 * removes a current head. GC then collects what only the forgotten ones held.
 */
export async function keepOnlyHead(meta: MetadataStore, head: Checkpoint): Promise<void> {
  const older = (await meta.checkpoints.listByWorkspace(head.workspaceId))
    .filter((c) => c.id !== head.id && c.status !== 'pending')
    .map((c) => c.id);
  if (older.length > 0) await meta.checkpoints.deleteMany(older);
}
