/**
 * Runs at a glance: every run of the tenant with its state, sandbox and provider, lease owner,
 * the age of its last ready checkpoint and of its last work-folder save, and any failed
 * checkpoint or save flagged with its error. Sortable by column, filterable, a page at a time
 * (`nextCursor` when the service gives one, else a larger `limit`).
 */
import { ApiError, json, seg } from '../api.js';
import { eachLimited } from '../concurrency.js';
import { h, link, message, replace, table } from '../dom.js';
import { formatAge, formatTime, shortId } from '../format.js';
import type { CheckpointView, RunView, Scope, SyncSandbox } from '../model.js';
import { route, titled, type View, type ViewContext } from '../view.js';

/** Runs per page. */
export const RUNS_PAGE_SIZE = 25;
/** Checkpoints read per run to find its last ready one and recent failures. */
const CHECKPOINTS_PER_RUN = 20;
/** Most runs the page asks for when the service pages by `limit` alone (its own maximum). */
const MAX_RUNS_LIMIT = 1000;

interface RunFacts {
  lastReadyAt?: number | null;
  failed?: CheckpointView | null;
  savedAt?: number | null;
  saveError?: { code: string; message: string } | null;
  /** The save state could not be read (no save status route, or it failed). */
  saveUnknown?: boolean;
}

type SortKey = 'id' | 'state' | 'sandbox' | 'owner' | 'checkpoint' | 'save' | 'created';

const COLUMNS: readonly (readonly [SortKey, string])[] = [
  ['id', 'Run'],
  ['state', 'State'],
  ['sandbox', 'Sandbox'],
  ['owner', 'Lease owner'],
  ['checkpoint', 'Last ready checkpoint'],
  ['save', 'Last work-folder save'],
  ['created', 'Created'],
];

/** The runs list view. */
export function runsView(context: ViewContext): View {
  titled('Runs');
  const { main, who } = context;
  const facts = new Map<string, RunFacts>();
  let runs: RunView[] = [];
  let page = 0;
  let cursors: (string | null)[] = [null];
  let hasNext = false;
  let sort: { key: SortKey; dir: 1 | -1 } = { key: 'created', dir: -1 };
  let filter = '';
  let stateFilter = 'all';
  let disposed = false;
  let syncMissing = false;

  const status = h('div', { 'aria-live': 'polite' });
  const body = h('div');
  const filterInput = h('input', { id: 'run-filter', type: 'search', placeholder: 'id, provider, sandbox, owner…' });
  const stateSelect = h(
    'select',
    { id: 'run-state' },
    ...[
      ['all', 'All runs'],
      ['active', 'Active'],
      ['ended', 'Ended'],
      ['problems', 'With a failure'],
    ].map(([value, text]) => h('option', { value }, text ?? '')),
  );
  filterInput.addEventListener('input', () => {
    filter = filterInput.value.trim().toLowerCase();
    draw();
  });
  stateSelect.addEventListener('change', () => {
    stateFilter = stateSelect.value;
    draw();
  });
  const prev = h('button', { type: 'button' }, 'Previous page');
  const next = h('button', { type: 'button' }, 'Next page');
  const pageLabel = h('span', { class: 'page-label', 'aria-live': 'polite' });
  prev.addEventListener('click', () => void load(page - 1));
  next.addEventListener('click', () => void load(page + 1));

  replace(
    main,
    h('h1', {}, 'Runs'),
    h(
      'div',
      { class: 'toolbar', role: 'search' },
      h('label', { for: 'run-filter' }, 'Filter'),
      filterInput,
      h('label', { for: 'run-state' }, 'Show'),
      stateSelect,
    ),
    status,
    body,
    h('div', { class: 'pager' }, prev, pageLabel, next),
  );

  async function load(target: number): Promise<void> {
    replace(status, message('Loading runs…'));
    try {
      const cursor = cursors[target] ?? null;
      // Without a cursor from the service, page N is the tail of a larger `limit`.
      const limit = cursor === null && target > 0 ? Math.min((target + 1) * RUNS_PAGE_SIZE, MAX_RUNS_LIMIT) : RUNS_PAGE_SIZE;
      const answer = await json<{ runs: RunView[]; nextCursor?: string | null }>(
        `/v1/runs?limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      if (disposed) return;
      const pageRuns = cursor === null && target > 0 ? answer.runs.slice(target * RUNS_PAGE_SIZE) : answer.runs;
      if (pageRuns.length === 0 && target > 0) {
        hasNext = false;
        replace(status, message('No more runs.'));
        draw();
        return;
      }
      page = target;
      runs = pageRuns;
      if (typeof answer.nextCursor === 'string') {
        cursors = [...cursors.slice(0, target + 1), answer.nextCursor];
        hasNext = true;
      } else {
        hasNext = answer.nextCursor === undefined && answer.runs.length === limit && limit < MAX_RUNS_LIMIT;
      }
      replace(status);
      draw();
      await eachLimited(runs, enrich);
    } catch (error) {
      if (!disposed) replace(status, message(`Could not list runs: ${describe(error)}`, 'error'));
    }
  }

  async function enrich(run: RunView): Promise<void> {
    if (disposed || facts.has(run.id)) return;
    const known: RunFacts = {};
    facts.set(run.id, known);
    try {
      const { checkpoints } = await json<{ checkpoints: CheckpointView[] }>(
        `/v1/runs/${seg(run.id)}/checkpoints?limit=${CHECKPOINTS_PER_RUN}`,
      );
      const ready = checkpoints.filter((c) => c.status === 'ready');
      known.lastReadyAt = ready.length === 0 ? null : Math.max(...ready.map((c) => c.finishedAt ?? c.createdAt));
      known.failed = checkpoints.find((c) => c.status === 'failed') ?? null;
    } catch {
      // left unknown: the row shows … for it
    }
    const scope = (['task', 'project', 'agent', 'user'] as const).find((s: Scope) => run.bindings?.[s] !== undefined);
    if (scope !== undefined && !syncMissing) {
      try {
        const base = `/api/companies/${seg(who.tenant)}/work-folders/${scope}/${seg(run.bindings?.[scope] ?? '')}`;
        const { sandboxes } = await json<{ sandboxes: SyncSandbox[] }>(`${base}/sync`);
        const mine = sandboxes.filter((s) => s.runId === run.id);
        const saved = mine.map((s) => s.lastSavedAt).filter((t): t is number => t !== null);
        known.savedAt = saved.length === 0 ? null : Math.max(...saved);
        known.saveError = mine.find((s) => s.state === 'failed')?.error ?? null;
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) syncMissing = true;
      }
    }
    if (known.savedAt === undefined) known.saveUnknown = true;
    if (!disposed) draw();
  }

  function sortValue(run: RunView, key: SortKey): string | number {
    const f = facts.get(run.id) ?? {};
    switch (key) {
      case 'id':
        return run.id;
      case 'state':
        return stateText(run);
      case 'sandbox':
        return run.sandbox === null ? '' : `${run.sandbox.provider} ${run.sandbox.id}`;
      case 'owner':
        return run.lease.owner ?? '';
      case 'checkpoint':
        return f.lastReadyAt ?? 0;
      case 'save':
        return f.savedAt ?? 0;
      case 'created':
        return run.createdAt;
    }
  }

  function visible(): RunView[] {
    const out = runs.filter((run) => {
      const f = facts.get(run.id) ?? {};
      if (stateFilter === 'active' && run.endedAt !== null) return false;
      if (stateFilter === 'ended' && run.endedAt === null) return false;
      if (stateFilter === 'problems' && !f.failed && !f.saveError && run.lease.state !== 'release_recovery_required') return false;
      if (filter === '') return true;
      const hay = [run.id, run.sandbox?.provider, run.sandbox?.id, run.lease.owner, run.channel, stateText(run)].join(' ').toLowerCase();
      return hay.includes(filter);
    });
    const { key, dir } = sort;
    return out.sort((a, b) => {
      const x = sortValue(a, key);
      const y = sortValue(b, key);
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
  }

  function draw(): void {
    const headers = COLUMNS.map(([key, text]) => {
      const active = sort.key === key;
      const button = h('button', { type: 'button', class: 'sort' }, text, active ? (sort.dir === 1 ? ' ▲' : ' ▼') : '');
      button.addEventListener('click', () => {
        sort = { key, dir: active ? (sort.dir === 1 ? -1 : 1) : key === 'id' || key === 'owner' || key === 'sandbox' ? 1 : -1 };
        draw();
        (body.querySelector(`button[data-sort="${key}"]`) as HTMLButtonElement | null)?.focus();
      });
      button.dataset.sort = key;
      return h('th', { scope: 'col', 'aria-sort': active ? (sort.dir === 1 ? 'ascending' : 'descending') : 'none' }, button);
    });
    const rows = visible().map((run) => row(run, facts.get(run.id) ?? {}));
    const headerCells = [...headers, h('th', { scope: 'col' }, 'Problems')];
    replace(
      body,
      rows.length === 0
        ? message(runs.length === 0 ? 'No runs yet.' : 'No run matches the filter.')
        : table(`Runs, page ${page + 1}`, headerCells, rows),
    );
    prev.disabled = page === 0;
    next.disabled = !hasNext;
    pageLabel.textContent = `Page ${page + 1}`;
  }

  void load(0);
  return {
    dispose() {
      disposed = true;
    },
  };
}

function stateText(run: RunView): string {
  const life = run.endedAt === null ? 'active' : 'ended';
  return run.lease.state === 'free' ? life : `${life}, lease ${run.lease.state.replaceAll('_', ' ')}`;
}

function row(run: RunView, f: RunFacts): HTMLTableRowElement {
  const problems: HTMLElement[] = [];
  if (f.failed)
    problems.push(
      h(
        'span',
        { class: 'flag' },
        `Checkpoint failed: ${f.failed.error?.code ?? 'error'}`,
        h('span', { class: 'detail' }, ` ${f.failed.error?.message ?? ''}`),
      ),
    );
  if (f.saveError)
    problems.push(
      h('span', { class: 'flag' }, `Save failed: ${f.saveError.code}`, h('span', { class: 'detail' }, ` ${f.saveError.message}`)),
    );
  if (run.lease.state === 'release_recovery_required') problems.push(h('span', { class: 'flag' }, 'Needs lease resolve'));
  const pending = (value: number | null | undefined, none: string): string =>
    value === undefined ? '…' : value === null ? none : formatAge(value);
  return h(
    'tr',
    {},
    h('th', { scope: 'row' }, link(route(`runs/${encodeURIComponent(run.id)}`), shortId(run.id), { title: run.id, class: 'mono' })),
    h('td', {}, stateText(run)),
    h('td', {}, run.sandbox === null ? 'none' : `${run.sandbox.provider} · ${run.sandbox.id}`),
    h('td', { class: 'mono' }, run.lease.owner ?? '—'),
    h('td', {}, pending(f.lastReadyAt, 'none yet')),
    h('td', {}, run.bindings === null ? 'not bound' : f.saveUnknown === true ? 'unknown' : pending(f.savedAt, 'not saved yet')),
    h('td', { title: new Date(run.createdAt).toISOString() }, formatTime(run.createdAt)),
    h('td', {}, ...(problems.length === 0 ? ['—'] : problems)),
  );
}

/** An error as one line: the service's code and message. */
export function describe(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
