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
import type { View, ViewContext } from './view.js';
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
  const [pathPart = '', query = ''] = location.hash.replace(/^#\/?/, '').split('?', 2);
  const parts = pathPart
    .split('/')
    .filter((p) => p !== '')
    .map(decodeURIComponent);
  const main = h('main', { id: 'main', tabindex: -1 });
  replace(app, h('a', { href: '#main', class: 'skip' }, 'Skip to content'), header(who), main);
  const context: ViewContext = { who, main, params: new URLSearchParams(query) };
  const services = who.kind === 'service';
  if (parts[0] === 'runs' && parts[1] !== undefined && services) current = runView(context, parts[1]);
  else if (parts[0] === 'checkpoints' && parts[1] !== undefined && services) current = checkpointView(context, parts[1]);
  else if (parts[0] === 'folders' || !services) current = workFoldersView(context);
  else current = runsView(context);
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
