/** The sign-in form: paste a bearer token (a user's or a service token). */
import { ApiError } from '../api.js';
import { h, message, replace } from '../dom.js';
import { titled } from '../view.js';

/** The form; `submit` checks the token with the service and rejects when it is refused. */
export function signInView(submit: (token: string) => Promise<void>): HTMLElement {
  titled('Sign in');
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'token-help',
  });
  const status = h('div', { class: 'form-status', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'sign-in', 'aria-labelledby': 'sign-in-title' },
    h('h1', { id: 'sign-in-title' }, 'Holdfast inspector'),
    h('label', { for: 'token' }, 'Bearer token'),
    input,
    h(
      'p',
      { id: 'token-help', class: 'help' },
      'A user token (holdfast token create --user NAME) or a service token. It is kept in this tab only (session storage) and sent with every request to this service.',
    ),
    h('button', { type: 'submit' }, 'Sign in'),
    status,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (token === '') return;
    replace(status, message('Checking the token…'));
    submit(token).catch((error: unknown) => {
      const text =
        error instanceof ApiError && error.status === 401
          ? 'The service does not accept this token (unknown or revoked).'
          : `Could not sign in: ${error instanceof Error ? error.message : String(error)}`;
      replace(status, message(text, 'error'));
      input.focus();
    });
  });
  queueMicrotask(() => input.focus());
  return h('main', { id: 'main', class: 'center' }, form);
}
