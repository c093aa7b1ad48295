import type { MetadataStore } from '../../metadata/metadata-store.js';
import type { LiveRootSource } from './gc-mark.js';

/** Folder rows read per page while collecting their chunks. */
export const FOLDER_ROOT_PAGE_ROWS = 5000;

/**
 * Work-folder files as GC roots (DESIGN section 10): every chunk of every file row, live and
 * trashed, of every collection must survive; only a purge (or an overwrite) lets them go.
 */
export function folderRootSource(meta: Pick<MetadataStore, 'folders'>): LiveRootSource {
  return {
    name: 'work folders',
    async roots() {
      const objects: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await meta.folders.chunkRootsPage(after, FOLDER_ROOT_PAGE_ROWS);
        for (const id of page.chunks) objects.push(id);
        if (page.lastId === null) break;
        after = page.lastId;
      }
      return { trees: [], objects };
    },
  };
}
