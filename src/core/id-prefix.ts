import { ConflictError, InputError, NotFoundError } from '../errors.js';

/**
 * Shortest id prefix accepted where a checkpoint, run or sandbox id is taken: 8 characters
 * (32 bits of a UUID) make an accidental match rare among thousands of ids, as restic's
 * short ids do; git's 7 is for hashes people type from logs, ours come from copy and paste.
 */
export const MIN_ID_PREFIX_LENGTH = 8;

/** The word that names the newest thing of its kind wherever an id is taken. */
export const LATEST_ID = 'latest';

/**
 * Candidates asked for when resolving a prefix: more than one is ambiguous, and the few found
 * are listed in the `CONFLICT` so the caller can pick. Never more than this are read.
 */
export const ID_PREFIX_CANDIDATES = 5;

/** What {@link resolveIdOrPrefix} needs for one kind of id, within one scope (one tenant). */
export interface IdLookup<T> {
  /** `checkpoint`, `run`, `sandbox`: names the kind in messages and error data. */
  readonly kind: string;
  /** The thing with exactly this id in scope, or `undefined`. */
  readonly exact: (id: string) => Promise<T | undefined>;
  /** Up to `limit` things in scope whose id starts with `prefix` (any order). */
  readonly byPrefix: (prefix: string, limit: number) => Promise<readonly T[]>;
  /** The newest thing in scope, for {@link LATEST_ID}; `undefined` when there is none. */
  readonly latest: (() => Promise<T | undefined>) | undefined;
  /** The id of a thing (for the candidates of an ambiguity). */
  readonly idOf: (thing: T) => string;
}

/**
 * Resolves what a caller typed as an id: an exact id first (whatever its length), then
 * `latest` (where the kind has one), then a unique prefix of at least
 * {@link MIN_ID_PREFIX_LENGTH} characters. A shorter prefix is `INVALID_INPUT`; a prefix
 * matching several ids is `CONFLICT` with `data.candidates` (at most
 * {@link ID_PREFIX_CANDIDATES}, all in scope, so an ambiguity never reveals another tenant's
 * ids); nothing is `NOT_FOUND`. Both error datas carry `{kind, id}`.
 */
export async function resolveIdOrPrefix<T>(input: unknown, lookup: IdLookup<T>): Promise<T> {
  const { kind } = lookup;
  if (typeof input !== 'string' || input === '') {
    throw new InputError('INVALID_INPUT', `${kind} id must be a non-empty string`, { data: { kind, id: input } });
  }
  const exact = await lookup.exact(input);
  if (exact !== undefined) return exact;
  if (input === LATEST_ID && lookup.latest !== undefined) {
    const latest = await lookup.latest();
    if (latest === undefined) throw new NotFoundError(`there is no ${kind} yet, so none is latest`, { data: { kind, id: input } });
    return latest;
  }
  if (input.length < MIN_ID_PREFIX_LENGTH) {
    throw new InputError(
      'INVALID_INPUT',
      `${kind} ${JSON.stringify(input)} not found, and an id prefix needs at least ${MIN_ID_PREFIX_LENGTH} characters`,
      { data: { kind, id: input, minPrefixLength: MIN_ID_PREFIX_LENGTH } },
    );
  }
  const found = await lookup.byPrefix(input, ID_PREFIX_CANDIDATES);
  const [only] = found;
  if (only !== undefined && found.length === 1) return only;
  if (only === undefined) throw new NotFoundError(`no ${kind} ${input}`, { data: { kind, id: input } });
  const candidates = found.map(lookup.idOf).sort();
  throw new ConflictError(
    'CONFLICT',
    `${kind} id prefix ${input} is ambiguous: it matches ${candidates.join(', ')}${found.length >= ID_PREFIX_CANDIDATES ? ' and maybe more' : ''}; give more characters`,
    { data: { kind, id: input, candidates } },
  );
}

/**
 * Up to `limit` of `things` whose id starts with `prefix`: the in-memory form of a repository's
 * prefix query, for ids that live outside the metadata store (sandboxes of a provider).
 */
export function matchPrefix<T>(things: readonly T[], prefix: string, idOf: (thing: T) => string, limit: number): T[] {
  return things.filter((t) => idOf(t).startsWith(prefix)).slice(0, limit);
}
