/**
 * One run: its bindings, lease and sandbox; its turns and recorded steps (recovery, upgrade,
 * restore, setup, validate, commit…) on one timeline with their durations; its checkpoints
 * with reason, size, new bytes, duration and error.
 */
import { json, seg } from '../api.js';
import { h, link, message, replace, table } from '../dom.js';
import { formatBytes, formatDuration, formatTime, shortId } from '../format.js';
import type { CheckpointView, RunEventView, RunView, Scope, TurnView } from '../model.js';
import { route, titled, type View, type ViewContext } from '../view.js';
import { describe } from './runs-list.js';

/** Items of each list read for one run. */
const RUN_LIST_LIMIT = 200;

/** One line of the timeline: a turn, or a group of consecutive steps of one kind. */
interface Lane {
  readonly label: string;
  readonly start: number;
  readonly end: number | null;
  readonly status: string;
  readonly detail: string;
  readonly steps: readonly RunEventView[];
}

const SCOPE_LABELS: Readonly<Record<Scope, string>> = { task: 'Task', project: 'Project', agent: 'Agent', user: 'Responsible user' };

/** The run view. */
export function runView(context: ViewContext, runId: string): View {
  titled(`Run ${shortId(runId)}`);
  const { main } = context;
  let disposed = false;
  replace(main, h('h1', {}, `Run ${runId}`), message('Loading the run…'));
  const base = `/v1/runs/${seg(runId)}`;
  Promise.all([
    json<RunView>(base),
    json<{ turns: TurnView[] }>(`${base}/turns?limit=${RUN_LIST_LIMIT}`),
    json<{ events: RunEventView[] }>(`${base}/events?limit=${RUN_LIST_LIMIT}`),
    json<{ checkpoints: CheckpointView[] }>(`${base}/checkpoints?limit=${RUN_LIST_LIMIT}`),
  ]).then(
    ([run, { turns }, { events }, { checkpoints }]) => {
      if (disposed) return;
      replace(
        main,
        h('p', { class: 'crumbs' }, link('#/runs', 'Runs'), ' / ', h('span', { class: 'mono' }, runId)),
        h('h1', {}, `Run ${shortId(runId)}`),
        summary(run),
        h('h2', { id: 'timeline-title' }, 'Timeline'),
        timeline(turns, events),
        h('h2', {}, 'Checkpoints'),
        checkpointTable(run, checkpoints),
      );
    },
    (error: unknown) => {
      if (!disposed) replace(main, h('h1', {}, `Run ${runId}`), message(`Could not load the run: ${describe(error)}`, 'error'));
    },
  );
  return {
    dispose() {
      disposed = true;
    },
  };
}

function summary(run: RunView): HTMLElement {
  const pairs: [string, Node | string][] = [
    ['State', run.endedAt === null ? 'active' : `ended ${formatTime(run.endedAt)}`],
    [
      'Lease',
      `${run.lease.state.replaceAll('_', ' ')} · epoch ${run.lease.epoch}${run.lease.owner === null ? '' : ` · held by ${run.lease.owner}`}`,
    ],
    ['Sandbox', run.sandbox === null ? 'none' : `${run.sandbox.provider} · ${run.sandbox.id}`],
    ['Deployment', h('span', { class: 'mono', title: run.deploymentId }, shortId(run.deploymentId))],
    ['Channel', run.channel ?? '—'],
    ['Turns', String(run.turnCount)],
    ['Created', formatTime(run.createdAt)],
  ];
  const bindings = h('ul', { class: 'plain' });
  for (const scope of ['task', 'project', 'agent', 'user'] as const) {
    const owner = run.bindings?.[scope];
    bindings.appendChild(
      h(
        'li',
        {},
        `${SCOPE_LABELS[scope]}: `,
        owner === undefined ? 'not bound' : link(route('folders', { run: run.id, tab: scope }), owner, { class: 'mono' }),
      ),
    );
  }
  pairs.push(['Bindings', bindings]);
  if (run.repositories !== undefined && run.repositories.length > 0) {
    const repos = h('ul', { class: 'plain' });
    for (const r of run.repositories) {
      const saved = r.lastCheckpointAt === null ? 'never checkpointed' : `checkpointed ${formatTime(r.lastCheckpointAt)}`;
      const state = r.state === 'none' ? 'waiting for first checkpoint' : r.state;
      repos.appendChild(
        h(
          'li',
          {},
          h('span', { class: 'mono' }, r.name),
          ` (${r.url}${r.branch === null ? '' : `, ${r.branch}`}) · ${state} · ${saved}`,
          r.error === null ? '' : h('span', { class: 'msg-error', role: 'alert' }, ` · ${r.error.code}: ${r.error.message}`),
        ),
      );
    }
    pairs.push(['Repositories', repos]);
  }
  const dl = h('dl', { class: 'facts' });
  for (const [k, v] of pairs) dl.append(h('dt', {}, k), h('dd', {}, v));
  return h('section', { 'aria-label': 'Run summary' }, dl, h('p', {}, link(route('folders', { run: run.id }), 'Work folders of this run')));
}

/** Turns and steps merged by start time; consecutive steps of one kind form one lane. */
function lanes(turns: readonly TurnView[], events: readonly RunEventView[]): Lane[] {
  const out: Lane[] = turns.map((t) => ({
    label: `Turn ${t.seq}`,
    start: t.startedAt,
    end: t.finishedAt,
    status: t.status,
    detail:
      t.error !== null
        ? `${t.error.code ?? 'error'}: ${t.error.message ?? ''}`
        : t.result?.exitCode !== undefined && t.result?.exitCode !== null
          ? `exit ${t.result.exitCode}`
          : '',
    steps: [],
  }));
  const sorted = [...events].sort((a, b) => a.at - a.durationMs - (b.at - b.durationMs) || a.id - b.id);
  let group: RunEventView[] = [];
  const flush = (): void => {
    const first = group[0];
    if (first === undefined) return;
    const start = Math.min(...group.map((e) => e.at - e.durationMs));
    const end = Math.max(...group.map((e) => e.at));
    const failed = group.find((e) => e.status !== 'ok');
    out.push({
      label: kindLabel(first.kind),
      start,
      end,
      status: failed === undefined ? 'ok' : failed.status,
      detail: `${group.length} steps`,
      steps: group,
    });
    group = [];
  };
  for (const e of sorted) {
    if (group.length > 0 && group[0]?.kind !== e.kind) flush();
    group.push(e);
  }
  flush();
  return out.sort((a, b) => a.start - b.start);
}

function kindLabel(kind: string): string {
  return kind.charAt(0).toUpperCase() + kind.slice(1).replaceAll('_', ' ');
}

function timeline(turns: readonly TurnView[], events: readonly RunEventView[]): HTMLElement {
  const all = lanes(turns, events);
  if (all.length === 0) return message('Nothing recorded yet.');
  const longest = Math.max(1, ...all.map((l) => (l.end ?? Date.now()) - l.start), ...events.map((e) => e.durationMs));
  const list = h('ol', { class: 'timeline', 'aria-labelledby': 'timeline-title' });
  for (const lane of all) {
    const duration = (lane.end ?? Date.now()) - lane.start;
    const item = h(
      'li',
      { class: `lane lane-${lane.steps.length === 0 ? 'turn' : 'steps'} status-${lane.status}` },
      h(
        'div',
        { class: 'lane-head' },
        h('span', { class: 'lane-time' }, formatTime(lane.start)),
        h('strong', {}, lane.label),
        h('span', { class: 'badge' }, lane.status),
        h('span', { class: 'lane-duration' }, lane.end === null ? `running ${formatDuration(duration)}` : formatDuration(duration)),
        lane.detail === '' ? null : h('span', { class: 'detail' }, lane.detail),
      ),
      bar(duration, longest),
    );
    if (lane.steps.length > 0) {
      const steps = h('ol', { class: 'steps' });
      for (const step of lane.steps) {
        const error = step.status !== 'ok' && step.data !== null ? JSON.stringify(step.data).slice(0, 300) : '';
        steps.appendChild(
          h(
            'li',
            { class: `status-${step.status}` },
            h('span', { class: 'step-name' }, step.step.replaceAll('_', ' ')),
            h('span', { class: 'lane-duration' }, formatDuration(step.durationMs)),
            step.status === 'ok' ? null : h('span', { class: 'badge' }, step.status),
            error === '' ? null : h('span', { class: 'detail' }, error),
            bar(step.durationMs, longest),
          ),
        );
      }
      item.appendChild(steps);
    }
    list.appendChild(item);
  }
  return list;
}

/** A bar as wide as `ms` against `longest` (drawn through the CSSOM: the page's CSP allows no inline style attribute). */
function bar(ms: number, longest: number): HTMLElement {
  const fill = h('span', { class: 'bar-fill' });
  fill.style.width = `${Math.max(0.5, Math.min(100, (ms / longest) * 100)).toFixed(1)}%`;
  return h('span', { class: 'bar', 'aria-hidden': 'true' }, fill);
}

function checkpointTable(run: RunView, checkpoints: readonly CheckpointView[]): HTMLElement {
  if (checkpoints.length === 0) return message('No checkpoint yet.');
  const rows = checkpoints.map((c) =>
    h(
      'tr',
      { class: c.status === 'failed' ? 'row-failed' : '' },
      h(
        'th',
        { scope: 'row' },
        c.status === 'ready'
          ? link(route(`checkpoints/${encodeURIComponent(c.id)}`, { run: run.id }), shortId(c.id), { title: c.id, class: 'mono' })
          : h('span', { class: 'mono', title: c.id }, shortId(c.id)),
      ),
      h('td', {}, c.reason),
      h('td', {}, h('span', { class: `badge status-${c.status}` }, c.status)),
      h('td', {}, formatTime(c.createdAt)),
      h('td', {}, formatBytes(c.stats?.bytes)),
      h('td', {}, formatBytes(c.stats?.storedBytesWritten)),
      h('td', {}, formatDuration(c.stats?.durationMs ?? (c.finishedAt === null ? null : c.finishedAt - c.createdAt))),
      h(
        'td',
        {},
        c.error === null
          ? '—'
          : h('span', { class: 'flag' }, `${c.error.code ?? 'error'}`, h('span', { class: 'detail' }, ` ${c.error.message ?? ''}`)),
      ),
    ),
  );
  return table('Checkpoints, newest first', ['Checkpoint', 'Reason', 'Status', 'Created', 'Size', 'New bytes', 'Duration', 'Error'], rows);
}
