/**
 * `inspector/`: the inspector page, a browser client built on its own (`tsconfig.json` here,
 * `scripts/bundle-inspector.mjs`); the service serves it from `server/inspector-assets.ts`.
 */
/**
 * The inspector's entry: sign-in with a bearer token, then a hash router over the views
 * (runs, a run, a checkpoint, work folders). Everything the page shows comes from the API with
 * that token, so it shows exactly what the token may see.
 */
import { ApiError, json, onSignedOut, storedToken, storeToken } from './api.js';
import { h, message, replace } from './dom.js';
import type { WhoAmI } from './model.js';
import { parseRoute } from './router.js';
import { titled, type View, type ViewContext } from './view.js';
import { checkpointView } from './views/checkpoint.js';
import { runView } from './views/run.js';
import { runsView } from './views/runs-list.js';
import { signInView } from './views/sign-in.js';
import { workFoldersView } from './views/work-folders.js';

const app = document.getElementById('app') as HTMLElement;
let current: View | undefined;
let who: WhoAmI | undefined;

/** Draws the route in `location.hash` (signed in) or the sign-in form. */
function show(): void {
  current?.dispose();
  current = undefined;
  if (who === undefined) {
    replace(app, signInView(signIn));
    return;
  }
  const { route, params } = parseRoute(location.hash, who.kind);
  const main = h('main', { id: 'main', tabindex: -1 });
  replace(app, h('a', { href: '#main', class: 'skip' }, 'Skip to content'), header(who), main);
  const context: ViewContext = { who, main, params };
  if (route.view === 'run') current = runView(context, route.runId);
  else if (route.view === 'checkpoint') current = checkpointView(context, route.checkpointId);
  else if (route.view === 'folders') current = workFoldersView(context);
  else if (route.view === 'runs') current = runsView(context);
  else current = notFoundView(context, route.what);
}

/** A route the page refuses (an id URL resolution would rewrite): says so, fetches nothing. */
function notFoundView(context: ViewContext, what: string): View {
  titled('Not found');
  replace(
    context.main,
    h('h1', {}, 'Not found'),
    message(`There is no such page: ${what} is not an id.`, 'error'),
    h('p', {}, h('a', { href: who?.kind === 'service' ? '#/runs' : '#/folders' }, 'Back to the start')),
  );
  return { dispose() {} };
}

function header(signedIn: WhoAmI): HTMLElement {
  const identity =
    signedIn.kind === 'user'
      ? `user ${signedIn.user ?? ''} (${signedIn.role ?? ''})`
      : signedIn.kind === 'run'
        ? `run token ${signedIn.runId ?? ''}`
        : signedIn.admin === true
          ? 'admin service token'
          : 'service token';
  const signOut = h('button', { type: 'button', class: 'link-button' }, 'Sign out');
  signOut.addEventListener('click', () => {
    storeToken(null);
    who = undefined;
    location.hash = '';
    show();
  });
  const nav = h(
    'nav',
    { 'aria-label': 'Views' },
    signedIn.kind === 'service' ? h('a', { href: '#/runs' }, 'Runs') : null,
    h('a', { href: '#/folders' }, 'Work folders'),
  );
  return h(
    'header',
    { class: 'top' },
    h('span', { class: 'brand' }, 'Holdfast inspector'),
    nav,
    h('span', { class: 'who' }, `${identity} · tenant ${signedIn.tenant}`),
    signOut,
  );
}

/** Checks `token` with the service; on success keeps it and draws the route. */
async function signIn(token: string): Promise<void> {
  storeToken(token);
  try {
    who = await json<WhoAmI>('/api/whoami');
  } catch (error) {
    storeToken(null);
    throw error;
  }
  show();
}

onSignedOut(() => {
  // A refused token at sign-in is the form's to report; this is a session that stopped working.
  if (who === undefined) return;
  storeToken(null);
  who = undefined;
  show();
  app.prepend(message('The service refused the token (signed out): paste a valid one.', 'error'));
});
window.addEventListener('hashchange', show);

async function start(): Promise<void> {
  const token = storedToken();
  if (token === null) return show();
  try {
    await signIn(token);
  } catch (error) {
    show();
    if (!(error instanceof ApiError && error.status === 401)) app.prepend(message(`Could not sign in: ${String(error)}`, 'error'));
  }
}

void start();
