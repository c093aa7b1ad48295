/**
 * Work folders for a run (`?run=`: its bindings) or for owners given by hand (`?task=`,
 * `?project=`, `?agent=`, `?user=`): tabs Task / Project / Agent / Responsible user, each a
 * {@link folderPanel}. A user token starts on its own user collection; a run token on its
 * run's bindings. An unbound scope says so; what the token may not see, the API refuses.
 */
import { json, seg } from '../api.js';
import { h, link, message, replace } from '../dom.js';
import type { Bindings, RunView, Scope } from '../model.js';
import { route, titled, type View, type ViewContext } from '../view.js';
import { folderPanel } from './folder-panel.js';
import { describe } from './runs-list.js';

export const SCOPES: readonly Scope[] = ['task', 'project', 'agent', 'user'];
export const SCOPE_LABELS: Readonly<Record<Scope, string>> = { task: 'Task', project: 'Project', agent: 'Agent', user: 'Responsible user' };

/** The work folders view. */
export function workFoldersView(context: ViewContext): View {
  titled('Work folders');
  const { main, params, who } = context;
  const runId = params.get('run') ?? (who.kind === 'run' ? (who.runId ?? null) : null);
  // A person's token starts on their own user folder; everyone else on the task folder.
  const fallbackTab: Scope = who.kind === 'user' && params.get('run') === null ? 'user' : 'task';
  const tab = (SCOPES as readonly string[]).includes(params.get('tab') ?? '') ? (params.get('tab') as Scope) : fallbackTab;
  let panel: View | undefined;
  let disposed = false;

  const given: Bindings = {};
  for (const scope of SCOPES) {
    const owner = params.get(scope);
    if (owner !== null && owner !== '') given[scope] = owner;
  }
  if (runId === null && who.kind === 'user' && given.user === undefined) given.user = who.user ?? '';

  const start = (bindings: Bindings, run: RunView | null): void => {
    if (disposed) return;
    const current = (query: Record<string, string | null>): string =>
      route('folders', run !== null ? { run: run.id, tab, ...query } : { ...bindings, tab, ...query });
    const tablist = h('div', { role: 'tablist', 'aria-label': 'Folder scopes', class: 'tabs' });
    const tabs = SCOPES.map((scope) => {
      const selected = scope === tab;
      const button = h(
        'button',
        {
          type: 'button',
          role: 'tab',
          id: `tab-${scope}`,
          'aria-selected': String(selected),
          'aria-controls': 'scope-panel',
          tabindex: selected ? 0 : -1,
        },
        SCOPE_LABELS[scope],
      );
      button.addEventListener('click', () => {
        location.hash = run !== null ? route('folders', { run: run.id, tab: scope }) : route('folders', { ...bindings, tab: scope });
      });
      return button;
    });
    tablist.append(...tabs);
    tablist.addEventListener('keydown', (event) => arrowTabs(event, tabs));
    const panelHost = h('div', { role: 'tabpanel', id: 'scope-panel', 'aria-labelledby': `tab-${tab}`, tabindex: 0 });
    replace(
      main,
      h('h1', {}, 'Work folders'),
      run === null
        ? ownersForm(bindings, tab)
        : h('p', {}, 'Folders bound to run ', link(route(`runs/${encodeURIComponent(run.id)}`), run.id, { class: 'mono' }), '.'),
      h(
        'p',
        { class: 'note' },
        'These are the saved copies, not the live sandbox: saved copies can lag behind the agent’s edits until the next save.',
      ),
      tablist,
      panelHost,
    );
    const owner = bindings[tab];
    if (owner === undefined) {
      const label = SCOPE_LABELS[tab].toLowerCase();
      replace(
        panelHost,
        message(
          run === null
            ? `No ${label} owner given. This folder is empty and unbound.`
            : `No ${label} is bound to this run. This folder is empty and unbound.`,
        ),
      );
      return;
    }
    panel = folderPanel({
      host: panelHost,
      tenant: who.tenant,
      scope: tab,
      owner,
      who,
      view: params.get('view') === 'trash' ? 'trash' : 'files',
      link: current,
    });
  };

  if (runId !== null && who.kind === 'service') {
    replace(main, h('h1', {}, 'Work folders'), message('Loading the run’s bindings…'));
    json<RunView>(`/v1/runs/${seg(runId)}`).then(
      (run) => start({ ...(run.bindings ?? {}) }, run),
      (error: unknown) => {
        if (!disposed) replace(main, h('h1', {}, 'Work folders'), message(`Could not load run ${runId}: ${describe(error)}`, 'error'));
      },
    );
  } else if (who.kind === 'run') {
    start({ ...(who.bindings ?? {}) }, null);
  } else {
    start(given, null);
  }
  return {
    dispose() {
      disposed = true;
      panel?.dispose();
    },
  };
}

/** Left and right arrows, Home and End move between tabs (WAI-ARIA tabs pattern). */
function arrowTabs(event: KeyboardEvent, tabs: readonly HTMLButtonElement[]): void {
  const at = tabs.indexOf(document.activeElement as HTMLButtonElement);
  if (at < 0) return;
  const to =
    event.key === 'ArrowRight'
      ? (at + 1) % tabs.length
      : event.key === 'ArrowLeft'
        ? (at - 1 + tabs.length) % tabs.length
        : event.key === 'Home'
          ? 0
          : event.key === 'End'
            ? tabs.length - 1
            : -1;
  if (to < 0) return;
  event.preventDefault();
  tabs[to]?.focus();
  tabs[to]?.click();
}

/** Owner ids by hand (no run): one field per scope. */
function ownersForm(bindings: Bindings, tab: Scope): HTMLElement {
  const inputs = SCOPES.map((scope) =>
    h('input', { id: `owner-${scope}`, name: scope, value: bindings[scope] ?? '', autocomplete: 'off', spellcheck: 'false' }),
  );
  const form = h(
    'form',
    { class: 'owners', 'aria-label': 'Folder owners' },
    ...SCOPES.map((scope, i) =>
      h('div', { class: 'field' }, h('label', { for: `owner-${scope}` }, `${SCOPE_LABELS[scope]} owner`), inputs[i] ?? null),
    ),
    h('button', { type: 'submit' }, 'Open'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query: Record<string, string> = { tab };
    SCOPES.forEach((scope, i) => {
      const value = inputs[i]?.value.trim() ?? '';
      if (value !== '') query[scope] = value;
    });
    location.hash = route('folders', query);
  });
  return form;
}
