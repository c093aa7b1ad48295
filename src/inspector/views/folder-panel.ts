/**
 * One collection `(scope, owner)` in the work folders view: its save state (see
 * `save-state.ts`), Files as a checkbox tree with "Move N items to trash", Trash with Restore
 * (a collision is shown on the item), previews and verified downloads. Files are listed again
 * every FILES_REFRESH_MS and the save state every SYNC_REFRESH_MS; each says when it last was.
 */
import { ApiError, json, post, seg } from '../api.js';
import { type Child, h, link, message, replace } from '../dom.js';
import { fetchVerified, MAX_PREVIEW_BYTES, previewOf } from '../files.js';
import { buildTree, type TreeNode, toggleSelection, topMost, trashUnits } from '../folder-tree.js';
import { formatBytes, formatTime } from '../format.js';
import type { FolderEntry, FolderPage, Scope, SyncSandbox, WhoAmI } from '../model.js';
import { type SaveInputs, saveLabel } from '../save-state.js';
import { route, type View } from '../view.js';
import { downloadButton } from './checkpoint.js';
import { describe } from './runs-list.js';

/** The text of a failed save's link to its run: what the link opens, not just an id. */
export const FAILED_SAVE_RUN_LINK = "View the failed save's run";

/** How often the file listing is read again. */
export const FILES_REFRESH_MS = 15_000;
/** How often the save state is read again. */
export const SYNC_REFRESH_MS = 5_000;
/** Rows read per listing request (the route's maximum). */
const LIST_PAGE_ROWS = 1000;
/** Most rows the page lists for one collection. */
const MAX_LISTED_ROWS = 10_000;

/** What {@link folderPanel} draws. */
export interface FolderPanelOptions {
  readonly host: HTMLElement;
  readonly tenant: string;
  readonly scope: Scope;
  readonly owner: string;
  readonly who: WhoAmI;
  readonly view: 'files' | 'trash';
  /** A link to this same place with other query values (`view`). */
  readonly link: (query: Record<string, string | null>) => string;
}

/** Draws the collection into `host` and keeps it fresh until disposed. */
export function folderPanel(options: FolderPanelOptions): View {
  const { host, scope, owner, who, view } = options;
  const base = `/api/companies/${seg(options.tenant)}/work-folders/${scope}/${seg(owner)}`;
  let disposed = false;
  /** The listing was refused (404): nothing more of this collection is drawn. */
  let refused = false;
  let live: FolderEntry[] = [];
  let trash: FolderEntry[] = [];
  let lastOperationAt: number | null = null;
  let filesAt: number | null = null;
  let truncated = false;
  let listed = false;
  let signature = '';
  let selected = new Set<string>();
  let mutation: SaveInputs['mutation'] = { state: 'idle' };
  let sync: SaveInputs['sync'] = { state: 'loading' };
  let syncAt: number | null = null;
  const collisions = new Map<string, string>();

  const saveState = h('section', { class: 'save-state', 'aria-label': 'Save state', 'aria-live': 'polite' });
  const subtabs = h(
    'nav',
    { class: 'subtabs', 'aria-label': 'Files or trash' },
    link(options.link({ view: null }), 'Files', view === 'files' ? { 'aria-current': 'page' } : {}),
    link(options.link({ view: 'trash' }), 'Trash', view === 'trash' ? { 'aria-current': 'page' } : {}),
  );
  const toolbar = h('div', { class: 'toolbar', 'aria-live': 'polite' });
  const freshness = h('p', { class: 'detail freshness' });
  const body = h('div', { class: 'folder-body' });
  const preview = h('section', { class: 'preview-pane', 'aria-label': 'Preview' });
  replace(host, saveState, subtabs, toolbar, freshness, h('div', { class: 'split' }, body, preview));

  async function listAll(trashed: boolean): Promise<{ rows: FolderEntry[]; lastOperationAt: number | null; truncated: boolean }> {
    const rows: FolderEntry[] = [];
    let cursor: string | null = null;
    let last: number | null = null;
    do {
      const page: FolderPage = await json<FolderPage>(
        `${base}?trash=${trashed}&limit=${LIST_PAGE_ROWS}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      rows.push(...page.files);
      last = page.lastOperationAt;
      cursor = page.nextCursor;
    } while (cursor !== null && rows.length < MAX_LISTED_ROWS);
    return { rows, lastOperationAt: last, truncated: cursor !== null };
  }

  async function refreshFiles(): Promise<void> {
    try {
      const answer = await listAll(view === 'trash');
      if (disposed) return;
      if (view === 'trash') trash = answer.rows;
      else live = answer.rows;
      if (view === 'files') selected = new Set([...selected].filter((p) => live.some((e) => e.path === p)));
      lastOperationAt = answer.lastOperationAt;
      truncated = answer.truncated;
      filesAt = Date.now();
      listed = true;
      const next = JSON.stringify(answer.rows.map((e) => [e.id, e.path, e.updatedAt]));
      if (next !== signature) {
        signature = next;
        drawBody();
      }
      drawFreshness();
      drawSaveState();
    } catch (error) {
      if (disposed) return;
      if (error instanceof ApiError && error.status === 404) {
        stop();
        refused = true;
        replace(freshness);
        replace(saveState);
        replace(toolbar);
        replace(subtabs);
        replace(
          body,
          message(
            scope === 'user'
              ? `These files are private: ${owner}’s user folder is visible only to ${owner} and to a run bound to them.`
              : 'This folder is not visible to this token.',
          ),
        );
        return;
      }
      replace(freshness, `Could not list the files (${describe(error)}); trying again in ${FILES_REFRESH_MS / 1000} s.`);
    }
  }

  async function refreshSync(): Promise<void> {
    try {
      const answer = await json<{ sandboxes: SyncSandbox[] }>(`${base}/sync`);
      sync = { state: 'ok', sandboxes: answer.sandboxes };
    } catch (error) {
      sync = {
        state: 'unavailable',
        error: error instanceof ApiError ? { code: error.code, message: error.message } : { code: 'NETWORK', message: String(error) },
      };
    }
    if (disposed || refused) return;
    syncAt = Date.now();
    drawSaveState();
    drawFreshness();
  }

  function drawFreshness(): void {
    freshness.textContent = `Listing refreshed ${filesAt === null ? '…' : formatTime(filesAt)} (every ${FILES_REFRESH_MS / 1000} s) · save state checked ${syncAt === null ? '…' : formatTime(syncAt)} (every ${SYNC_REFRESH_MS / 1000} s)${truncated ? ` · only the first ${MAX_LISTED_ROWS} rows are listed` : ''}`;
  }

  function drawSaveState(): void {
    const label = saveLabel({ mutation, sync, lastOperationAt, fileCount: listed ? live.length : 0 });
    const runLink = (runId: string): Node =>
      who.kind === 'service'
        ? link(route(`runs/${encodeURIComponent(runId)}`), runId, { class: 'mono' })
        : h('span', { class: 'mono' }, runId);
    // A failed save's link says what it opens (the run whose save failed), with the run's id beside it.
    const failedRunLink = (runId: string): Child[] =>
      who.kind === 'service'
        ? [' · ', link(route(`runs/${encodeURIComponent(runId)}`), FAILED_SAVE_RUN_LINK), ' ', h('span', { class: 'mono' }, runId)]
        : [' · run ', h('span', { class: 'mono' }, runId)];
    const head = h(
      'p',
      { class: `save-label state-${label.kind}` },
      h('strong', { 'data-save-state': label.kind }, label.text),
      label.kind === 'saved' && (label.lastSavedAt ?? lastOperationAt) !== null
        ? ` ${formatTime(label.lastSavedAt ?? lastOperationAt)}`
        : '',
    );
    const lines: Node[] = [head];
    if (label.error !== undefined)
      lines.push(
        h(
          'p',
          { class: 'flag', role: label.kind === 'failed' ? 'alert' : null },
          `${label.error.code}: ${label.error.message}`,
          ...(label.runId === undefined ? [] : failedRunLink(label.runId)),
        ),
      );
    lines.push(
      h('p', { class: 'detail' }, `Last agent save: ${label.lastSavedAt === null ? 'none known' : formatTime(label.lastSavedAt)}`),
    );
    if (lastOperationAt !== null && (label.lastSavedAt === null || lastOperationAt > label.lastSavedAt))
      lines.push(h('p', { class: 'detail' }, `Files updated: ${formatTime(lastOperationAt)}`));
    for (const s of label.interrupted) {
      lines.push(
        h(
          'p',
          { class: 'flag' },
          'The run ',
          runLink(s.runId),
          ` ended before its final save finished; its last successful save was ${s.lastSavedAt === null ? 'never' : formatTime(s.lastSavedAt)}.`,
        ),
      );
    }
    if (sync.state === 'ok' && sync.sandboxes.length > 0) {
      const list = h('ul', { class: 'plain sandboxes' });
      for (const s of sync.sandboxes) {
        list.appendChild(
          h(
            'li',
            {},
            runLink(s.runId),
            ` · ${s.sandbox === null ? 'no sandbox' : `${s.sandbox.provider} ${s.sandbox.id}`} · ${s.state.replaceAll('_', ' ')}${s.active ? '' : ' (run ended)'}`,
            s.refresh.state === 'none'
              ? ''
              : ` · refresh ${s.refresh.state}${s.refresh.error === null ? '' : ` (${s.refresh.error.code})`}`,
          ),
        );
      }
      lines.push(list);
    }
    replace(saveState, ...lines);
  }

  function drawToolbar(): void {
    if (view !== 'files' || selected.size === 0) {
      replace(toolbar);
      return;
    }
    const units = topMost(selected);
    const button = h('button', { type: 'button', class: 'danger' }, `Move ${units.length} item${units.length === 1 ? '' : 's'} to trash`);
    button.addEventListener('click', () => void moveToTrash(units));
    const clear = h('button', { type: 'button' }, 'Clear selection');
    clear.addEventListener('click', () => {
      selected = new Set();
      syncChecks();
      drawToolbar();
    });
    replace(toolbar, button, ' ', clear);
  }

  async function mutate(work: () => Promise<void>): Promise<void> {
    mutation = { state: 'pending' };
    drawSaveState();
    try {
      await work();
      mutation = { state: 'idle' };
    } catch (error) {
      mutation = {
        state: 'failed',
        error: error instanceof ApiError ? { code: error.code, message: error.message } : { code: 'NETWORK', message: String(error) },
      };
    }
    if (disposed) return;
    drawSaveState();
    await refreshFiles();
  }

  async function moveToTrash(paths: readonly string[]): Promise<void> {
    await mutate(async () => {
      for (const path of paths) await post(`${base}/operations`, { action: 'delete', path });
      selected = new Set();
      drawToolbar();
    });
  }

  async function restore(row: FolderEntry): Promise<void> {
    collisions.delete(row.id);
    await mutate(async () => {
      try {
        await post(`${base}/operations`, { action: 'restore', fileId: row.id });
      } catch (error) {
        // A collision is the item's to show; it is not a failed save.
        if (!(error instanceof ApiError && error.code === 'CONFLICT')) throw error;
        const at = (error.data as { path?: unknown } | null)?.path;
        collisions.set(
          row.id,
          `Not restored: ${typeof at === 'string' ? at : row.path} exists again among the files (a collision). Move that one to the trash first.`,
        );
        signature = '';
      }
    });
  }

  function syncChecks(): void {
    for (const box of body.querySelectorAll<HTMLInputElement>('input[type=checkbox][data-path]'))
      box.checked = selected.has(box.dataset.path ?? '');
  }

  function drawBody(): void {
    if (view === 'trash') {
      drawTrash();
      return;
    }
    if (live.length === 0) {
      replace(body, message('No saved files in this folder.'));
      drawToolbar();
      return;
    }
    const allPaths = live.map((e) => e.path);
    const byPath = new Map(live.map((e) => [e.path, e]));
    let counter = 0;
    const render = (nodes: readonly TreeNode[]): HTMLUListElement => {
      const list = h('ul', { class: 'tree' });
      for (const node of nodes) {
        const id = `sel-${scope}-${counter++}`;
        const box = h('input', { type: 'checkbox', id, 'data-path': node.path, 'aria-label': `Select ${node.path}` });
        box.checked = selected.has(node.path);
        box.addEventListener('change', () => {
          selected = toggleSelection(selected, allPaths, node.path, box.checked);
          syncChecks();
          drawToolbar();
        });
        const entry = byPath.get(node.path);
        const name =
          node.kind === 'directory'
            ? h('span', { class: 'entry-dir' }, `${node.name}/`)
            : h('button', { type: 'button', class: 'link-button entry-file', 'aria-label': `Preview ${node.path}` }, node.name);
        if (node.kind === 'file' && entry !== undefined) name.addEventListener('click', () => showPreview(entry));
        const item = h(
          'li',
          {},
          h(
            'span',
            { class: 'tree-row' },
            box,
            ' ',
            name,
            node.kind === 'file' && entry !== undefined ? h('span', { class: 'detail' }, ` ${formatBytes(entry.size)}`) : '',
          ),
        );
        if (node.children.length > 0) item.appendChild(render(node.children));
        list.appendChild(item);
      }
      return list;
    };
    replace(body, h('h2', { class: 'visually-hidden' }, 'Files'), render(buildTree(live)));
    drawToolbar();
  }

  function drawTrash(): void {
    const units = trashUnits(trash).sort((a, b) => (b.deletedAt ?? 0) - (a.deletedAt ?? 0));
    if (units.length === 0) {
      replace(body, message('The trash is empty.'));
      return;
    }
    const list = h('ul', { class: 'trash' });
    for (const row of units) {
      const inside = trash.filter((r) => r !== row && r.deletedAt === row.deletedAt && r.path.startsWith(`${row.path}/`)).length;
      const button = h('button', { type: 'button', 'aria-label': `Restore ${row.path}` }, 'Restore');
      button.addEventListener('click', () => void restore(row));
      const collision = collisions.get(row.id);
      list.appendChild(
        h(
          'li',
          {},
          h('span', { class: 'mono' }, row.kind === 'directory' ? `${row.path}/` : row.path),
          h(
            'span',
            { class: 'detail' },
            ` ${row.kind === 'directory' ? `directory with ${inside} item${inside === 1 ? '' : 's'}` : formatBytes(row.size)} · deleted ${formatTime(row.deletedAt)} `,
          ),
          button,
          collision === undefined ? null : h('p', { class: 'flag', role: 'alert' }, collision),
        ),
      );
    }
    replace(body, h('h2', { class: 'visually-hidden' }, 'Trash'), list);
  }

  function showPreview(entry: FolderEntry): void {
    const url = `${base}/content?path=${encodeURIComponent(entry.path)}`;
    const name = entry.path.slice(entry.path.lastIndexOf('/') + 1);
    const head = [
      h('h2', { class: 'mono' }, entry.path),
      h('p', { class: 'detail' }, `${formatBytes(entry.size)} · saved ${formatTime(entry.updatedAt)}`),
      downloadButton(url, { sha256: entry.sha256, name }, entry.path),
    ];
    if (entry.size > MAX_PREVIEW_BYTES) {
      replace(preview, ...head, message(`Larger than ${formatBytes(MAX_PREVIEW_BYTES)}: download it to look at it.`));
      return;
    }
    replace(preview, ...head, message('Downloading and verifying…'));
    fetchVerified(url, entry.sha256, MAX_PREVIEW_BYTES).then(
      (file) => {
        if (!disposed)
          replace(preview, ...head, h('p', { class: 'verified' }, 'Verified: the bytes match the listed SHA-256.'), previewOf(name, file));
      },
      (error: unknown) => {
        if (!disposed) replace(preview, ...head, message(`Could not preview: ${describe(error)}`, 'error'));
      },
    );
  }

  const timers = [setInterval(() => void refreshFiles(), FILES_REFRESH_MS), setInterval(() => void refreshSync(), SYNC_REFRESH_MS)];
  const stop = (): void => {
    for (const t of timers) clearInterval(t);
  };
  drawSaveState();
  drawFreshness();
  void refreshFiles();
  void refreshSync();
  return {
    dispose() {
      disposed = true;
      stop();
    },
  };
}
