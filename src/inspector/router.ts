/**
 * The inspector's hash routes: `#/runs`, `#/runs/ID`, `#/checkpoints/ID`, `#/folders?…`. Ids
 * in a route (a run, a checkpoint, a folder owner in the query) become path segments of API
 * URLs, so one that a URL would resolve away (`.`, `..`, also percent-encoded) or that cannot
 * be decoded is refused here: the page shows "not found" and fetches nothing.
 */

/** The query parameters whose values the views put into API paths as segments. */
export const ID_PARAMS = ['run', 'task', 'project', 'agent', 'user'] as const;

/** Where the hash leads. */
export type Route =
  | { readonly view: 'runs' }
  | { readonly view: 'run'; readonly runId: string }
  | { readonly view: 'checkpoint'; readonly checkpointId: string }
  | { readonly view: 'folders' }
  | { readonly view: 'not-found'; readonly what: string };

/** A parsed hash: the route and its query. */
export interface ParsedRoute {
  readonly route: Route;
  readonly params: URLSearchParams;
}

/**
 * True when `value` may stand as one segment of an API path: not empty and not a dot
 * segment (`.` or `..`, which URL resolution removes or climbs with, RFC 3986 §5.2.4).
 */
export function isPathSegment(value: string): boolean {
  return value !== '' && value !== '.' && value !== '..';
}

/**
 * The route of `hash` (`location.hash`) for a token of `kind`: a service token reaches runs
 * and checkpoints, any other token only the work folders. A route whose path id, or whose id
 * parameter ({@link ID_PARAMS}), is not a path segment (or whose path does not decode) is
 * `not-found`. Anything else unknown is the token's start view (runs, or the work folders).
 */
export function parseRoute(hash: string, kind: 'service' | 'user' | 'run'): ParsedRoute {
  const [pathPart = '', query = ''] = hash.replace(/^#\/?/, '').split('?', 2);
  const params = new URLSearchParams(query);
  const raw = pathPart.split('/').filter((p) => p !== '');
  let parts: string[];
  try {
    parts = raw.map(decodeURIComponent);
  } catch {
    return { route: { view: 'not-found', what: 'a route that does not decode' }, params };
  }
  for (const name of ID_PARAMS) {
    const value = params.get(name);
    if (value !== null && value !== '' && !isPathSegment(value)) return { route: { view: 'not-found', what: `${name} ${value}` }, params };
  }
  const services = kind === 'service';
  const [first, id] = parts;
  if (services && (first === 'runs' || first === 'checkpoints') && id !== undefined) {
    if (!isPathSegment(id)) return { route: { view: 'not-found', what: `${first === 'runs' ? 'run' : 'checkpoint'} ${id}` }, params };
    return { route: first === 'runs' ? { view: 'run', runId: id } : { view: 'checkpoint', checkpointId: id }, params };
  }
  if (first === 'folders' || !services) return { route: { view: 'folders' }, params };
  return { route: { view: 'runs' }, params };
}
