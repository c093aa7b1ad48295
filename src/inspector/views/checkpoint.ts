/**
 * One checkpoint: its facts, its tree a directory at a time, a preview of a file (text and
 * images up to MAX_PREVIEW_BYTES, verified against the listed SHA-256 first), a verified
 * download, and what changed against its parent.
 */
import { json, seg } from '../api.js';
import { h, link, message, replace, table } from '../dom.js';
import { fetchVerified, MAX_PREVIEW_BYTES, previewOf, saveBytes } from '../files.js';
import { formatBytes, formatDuration, formatTime, shortId } from '../format.js';
import type { CheckpointView, DiffView, TreeEntry, TreeLookup } from '../model.js';
import { route, titled, type View, type ViewContext } from '../view.js';
import { describe } from './runs-list.js';

/** The checkpoint view; `?path=` is the directory shown, `?file=` the file previewed, `?run=` the run it came from. */
export function checkpointView(context: ViewContext, id: string): View {
  titled(`Checkpoint ${shortId(id)}`);
  const { main, params } = context;
  const runId = params.get('run');
  const dir = params.get('path') ?? '';
  const file = params.get('file');
  let disposed = false;
  const here = (query: Record<string, string | null>): string => route(`checkpoints/${encodeURIComponent(id)}`, { run: runId, ...query });
  const base = `/v1/checkpoints/${seg(id)}`;

  const crumbs = h(
    'p',
    { class: 'crumbs' },
    link('#/runs', 'Runs'),
    runId === null ? null : ' / ',
    runId === null ? null : link(route(`runs/${encodeURIComponent(runId)}`), `Run ${shortId(runId)}`),
    ' / ',
    `Checkpoint ${shortId(id)}`,
  );
  const facts = h('section', { 'aria-label': 'Checkpoint facts' }, message('Loading the checkpoint…'));
  const tree = h('section', { 'aria-labelledby': 'tree-title' });
  const preview = h('section', { 'aria-labelledby': 'preview-title', class: 'preview-pane' });
  const diff = h('section', { 'aria-labelledby': 'diff-title' });
  replace(main, crumbs, h('h1', {}, `Checkpoint ${shortId(id)}`), facts, h('div', { class: 'split' }, tree, preview), diff);

  const fail = (where: HTMLElement, what: string) => (error: unknown) => {
    if (!disposed) replace(where, message(`${what}: ${describe(error)}`, 'error'));
  };

  json<CheckpointView>(base).then(
    (checkpoint) => {
      if (disposed) return;
      replace(facts, factsList(checkpoint, here));
      if (checkpoint.status !== 'ready') {
        replace(tree, message(`This checkpoint is ${checkpoint.status}: only a ready checkpoint has files to browse.`));
        return;
      }
      json<TreeLookup>(`${base}/tree?path=${encodeURIComponent(dir)}`).then(
        (lookup) => {
          if (!disposed) replace(tree, h('h2', { id: 'tree-title' }, 'Files'), breadcrumbs(dir, here), listing(dir, lookup, here, base));
        },
        fail(tree, 'Could not list this directory'),
      );
      json<DiffView>(`${base}/diff`).then(
        (answer) => {
          if (!disposed) replace(diff, h('h2', { id: 'diff-title' }, 'Changes since the parent checkpoint'), diffList(answer, here));
        },
        fail(diff, 'Could not compare with the parent'),
      );
      if (file !== null) showPreview(file);
    },
    fail(facts, 'Could not load the checkpoint'),
  );

  function showPreview(path: string): void {
    replace(preview, h('h2', { id: 'preview-title' }, path), message('Loading…'));
    json<TreeLookup>(`${base}/tree?path=${encodeURIComponent(path)}`).then(
      (lookup) => {
        if (disposed) return;
        if (lookup.kind !== 'entry' || lookup.entry.type !== 'file') {
          replace(
            preview,
            h('h2', { id: 'preview-title' }, path),
            message(
              lookup.kind === 'entry' && lookup.entry.type === 'symlink'
                ? `A symbolic link to ${lookup.entry.target ?? '?'}`
                : 'Not a file.',
            ),
          );
          return;
        }
        const entry = lookup.entry;
        const url = `${base}/file?path=${encodeURIComponent(path)}`;
        const download = downloadButton(url, entry, path);
        const head = [
          h('h2', { id: 'preview-title', class: 'mono' }, path),
          h('p', { class: 'detail' }, `${formatBytes(entry.size)} · SHA-256 ${entry.sha256 ?? '?'}`),
          download,
        ];
        if ((entry.size ?? 0) > MAX_PREVIEW_BYTES) {
          replace(preview, ...head, message(`Larger than ${formatBytes(MAX_PREVIEW_BYTES)}: download it to look at it.`));
          return;
        }
        replace(preview, ...head, message('Downloading and verifying…'));
        fetchVerified(url, entry.sha256 ?? null, MAX_PREVIEW_BYTES).then(
          (verified) => {
            if (!disposed)
              replace(
                preview,
                ...head,
                h('p', { class: 'verified' }, 'Verified: the bytes match the listed SHA-256.'),
                previewOf(entry.name, verified),
              );
          },
          fail(preview, 'Could not preview the file'),
        );
      },
      fail(preview, 'Could not find the file'),
    );
  }

  return {
    dispose() {
      disposed = true;
    },
  };
}

/** A button that downloads the file, checks its SHA-256, then saves it. */
export function downloadButton(url: string, entry: { readonly sha256?: string | null; readonly name: string }, label: string): HTMLElement {
  const button = h('button', { type: 'button' }, 'Download (verified)');
  button.setAttribute('aria-label', `Download ${label} (verified)`);
  const status = h('span', { class: 'detail', 'aria-live': 'polite' });
  button.addEventListener('click', () => {
    button.disabled = true;
    status.textContent = 'Downloading…';
    fetchVerified(url, entry.sha256 ?? null)
      .then(
        (verified) => {
          saveBytes(verified, entry.name);
          status.textContent = `Saved ${formatBytes(verified.bytes.length)}, SHA-256 verified.`;
        },
        (error: unknown) => {
          status.textContent = `Download failed: ${describe(error)}`;
        },
      )
      .finally(() => {
        button.disabled = false;
      });
  });
  return h('p', { class: 'download' }, button, ' ', status);
}

function factsList(c: CheckpointView, here: (q: Record<string, string | null>) => string): HTMLElement {
  const dl = h('dl', { class: 'facts' });
  const add = (k: string, v: Node | string): void => {
    dl.append(h('dt', {}, k), h('dd', {}, v));
  };
  add('Id', h('span', { class: 'mono' }, c.id));
  add('Status', c.status);
  add('Reason', c.reason);
  // Labels and metadata are the caller's text: shown as text nodes, never parsed as HTML.
  if (typeof c.label === 'string') add('Label', c.label);
  if (c.meta !== null && c.meta !== undefined && Object.keys(c.meta).length > 0) add('Metadata', metaList(c.meta));
  if (typeof c.forkedFrom === 'string') {
    add(
      'Forked from',
      link(route(`checkpoints/${encodeURIComponent(c.forkedFrom)}`), shortId(c.forkedFrom), { class: 'mono', title: c.forkedFrom }),
    );
  }
  add('Created', formatTime(c.createdAt));
  add('Duration', formatDuration(c.stats?.durationMs ?? (c.finishedAt === null ? null : c.finishedAt - c.createdAt)));
  add('Size', `${formatBytes(c.stats?.bytes)}${c.stats?.files === undefined ? '' : ` in ${c.stats.files} files`}`);
  add('New bytes stored', formatBytes(c.stats?.storedBytesWritten));
  add(
    'Parent',
    c.parentId === null
      ? 'none (first checkpoint)'
      : link(route(`checkpoints/${encodeURIComponent(c.parentId)}`), shortId(c.parentId), { class: 'mono', title: c.parentId }),
  );
  if (c.error !== null) add('Error', h('span', { class: 'flag' }, `${c.error.code ?? 'error'}: ${c.error.message ?? ''}`));
  void here;
  return dl;
}

/** A checkpoint's metadata as a list of `key: value` lines, every part a text node. */
function metaList(meta: NonNullable<CheckpointView['meta']>): HTMLElement {
  const list = h('ul', { class: 'meta' });
  for (const [key, value] of Object.entries(meta)) {
    list.appendChild(h('li', {}, h('span', { class: 'mono' }, key), ': ', typeof value === 'string' ? value : JSON.stringify(value)));
  }
  return list;
}

function breadcrumbs(dir: string, here: (q: Record<string, string | null>) => string): HTMLElement {
  const nav = h('nav', { 'aria-label': 'Directory', class: 'crumbs' }, link(here({ path: null }), 'workspace'));
  let at = '';
  for (const part of dir.split('/').filter((p) => p !== '')) {
    at = at === '' ? part : `${at}/${part}`;
    nav.append(' / ', link(here({ path: at }), part));
  }
  return nav;
}

function listing(dir: string, lookup: TreeLookup, here: (q: Record<string, string | null>) => string, base: string): HTMLElement {
  if (lookup.kind !== 'dir') return message('Not a directory.');
  if (lookup.entries.length === 0) return message('This directory is empty.');
  const pathOf = (e: TreeEntry): string => (dir === '' ? e.name : `${dir}/${e.name}`);
  const rows = lookup.entries.map((e) => {
    const name =
      e.type === 'dir'
        ? link(here({ path: pathOf(e) }), `${e.name}/`, { class: 'entry-dir' })
        : e.type === 'file'
          ? link(here({ path: dir === '' ? null : dir, file: pathOf(e) }), e.name, { class: 'entry-file' })
          : h('span', {}, `${e.name} → ${e.target ?? ''}`);
    return h(
      'tr',
      {},
      h('th', { scope: 'row' }, name),
      h('td', {}, e.type === 'dir' ? 'directory' : e.type),
      h('td', {}, e.type === 'file' ? formatBytes(e.size) : ''),
      h('td', {}, formatTime(e.mtimeMs)),
      h('td', {}, e.type === 'file' ? downloadButton(`${base}/file?path=${encodeURIComponent(pathOf(e))}`, e, pathOf(e)) : ''),
    );
  });
  return table(dir === '' ? 'Workspace root' : dir, ['Name', 'Type', 'Size', 'Modified', 'Download'], rows);
}

function diffList(answer: DiffView, here: (q: Record<string, string | null>) => string): HTMLElement {
  if (answer.baseId === null) return message('The first checkpoint of its workspace: nothing to compare with.');
  const intro = h(
    'p',
    {},
    'Compared with ',
    link(route(`checkpoints/${encodeURIComponent(answer.baseId)}`), shortId(answer.baseId), { class: 'mono', title: answer.baseId }),
    `: ${answer.changes.length} change${answer.changes.length === 1 ? '' : 's'}${answer.truncated ? ' (only the first ones shown)' : ''}.`,
  );
  if (answer.changes.length === 0) return h('div', {}, intro);
  const list = h('ul', { class: 'diff' });
  for (const c of answer.changes) {
    const slash = c.path.lastIndexOf('/');
    const target =
      c.change !== 'removed' && c.type === 'file'
        ? link(here({ path: slash < 0 ? null : c.path.slice(0, slash), file: c.path }), c.path, { class: 'mono' })
        : h('span', { class: 'mono' }, c.path);
    list.appendChild(
      h(
        'li',
        { class: `change-${c.change}` },
        h('span', { class: 'badge' }, c.change),
        ' ',
        target,
        c.type === 'dir' ? ' (directory)' : '',
      ),
    );
  }
  return h('div', {}, intro, list);
}
