/**
 * The page's only way to the service: same-origin `fetch` with the bearer token the user
 * pasted (kept in `sessionStorage`, so it goes when the tab closes). A 401 signs out; every
 * other error answer becomes an {@link ApiError} with the service's `code`.
 */
import { isPathSegment } from './router.js';

const TOKEN_KEY = 'holdfast.inspector.token';

/** An error answer of the service (`{error: {code, message}}`), or a failed request (`status` 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly data: unknown = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Listeners told when the service refused the token (401): the page goes back to sign-in. */
const signedOut = new Set<() => void>();

/** The stored token, if any. */
export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps `token` for this tab (or forgets it, with `null`). */
export function storeToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** Calls `listener` whenever a request answers 401. */
export function onSignedOut(listener: () => void): void {
  signedOut.add(listener);
}

/** A request with the token; resolves with the response when it is a success (2xx), else rejects with {@link ApiError}. */
export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = storedToken();
  if (token !== null) headers.set('authorization', `Bearer ${token}`);
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers, credentials: 'omit', cache: 'no-store', redirect: 'error' });
  } catch (cause) {
    throw new ApiError(0, 'NETWORK', `the service did not answer (${String(cause)})`);
  }
  if (response.ok) return response;
  let code = `HTTP_${response.status}`;
  let text = response.statusText;
  let data: unknown = null;
  try {
    const body = (await response.json()) as { error?: { code?: unknown; message?: unknown; data?: unknown } };
    if (typeof body.error?.code === 'string') code = body.error.code;
    if (typeof body.error?.message === 'string') text = body.error.message;
    data = body.error?.data ?? null;
  } catch {
    // not JSON: keep the status line
  }
  if (response.status === 401) for (const listener of signedOut) listener();
  throw new ApiError(response.status, code, text, data);
}

/** GET (or `init`) and parse the JSON answer. */
export async function json<T>(path: string, init: RequestInit = {}): Promise<T> {
  return (await (await request(path, init)).json()) as T;
}

/** POST a JSON body with an `Idempotency-Key` (a fresh one unless given), parsing the answer. */
export function post<T>(path: string, body: unknown, idempotencyKey: string = crypto.randomUUID()): Promise<T> {
  return json<T>(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify(body),
  });
}

/**
 * Encodes one path segment of a URL. A dot segment (`.`, `..`) or an empty one is refused (it
 * throws): URL resolution would drop it or climb with it, even percent-encoded, and the request
 * would reach another route. The router refuses such ids before a view asks.
 */
export function seg(value: string): string {
  if (!isPathSegment(value)) throw new Error(`refusing ${JSON.stringify(value)} as a path segment of an API URL`);
  return encodeURIComponent(value);
}
