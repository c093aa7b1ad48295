import { createHash } from 'node:crypto';
import { InputError } from '../errors.js';

/** A repository a run is bound to, as stored on the run: its checkout is `$HOME/repos/<name>`. */
export interface RepoBinding {
  /** The checkout's directory name under `$HOME/repos/`, unique within the run. */
  readonly name: string;
  /** Where the host clones it from (never with credentials: the host's git config and credential helper supply them). */
  readonly url: string;
  /** What to check out (a branch, tag or commit); absent: the remote's default branch. */
  readonly ref?: string;
  /** The local branch to create (from `ref`, or from the remote branch of that name) and check out. */
  readonly branch?: string;
}

/** What a caller may offer for one repository ({@link parseRepoBindings} validates it). */
export interface RepoBindingInput {
  readonly name?: string | undefined;
  readonly url: string;
  readonly ref?: string | undefined;
  readonly branch?: string | undefined;
}

/** Most repositories one run may bind (each is a clone and a checkpoint per save). */
export const MAX_REPO_BINDINGS = 16;
/** Longest repository URL accepted. */
export const MAX_REPO_URL_CHARS = 2048;
/** Longest checkout name. */
export const MAX_REPO_NAME_CHARS = 64;
/** Longest `ref` or `branch` (git's own refname limit is the filesystem's name length). */
export const MAX_REF_CHARS = 255;
/** Hex digits of the stable suffix that makes a derived name unique. */
const SUFFIX_HEX_CHARS = 8;

/** A checkout name: a letter or digit first, then letters, digits and `. _ -`. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** URL schemes the host clones from; `ext::` and other transports that run commands are refused. */
const SCHEMES = ['https:', 'http:', 'ssh:', 'git:', 'file:'];
/** scp-like `user@host:path` or `host:path` (what git reads as ssh). */
const SCP_RE = /^(?:([A-Za-z0-9._-]+)@)?([A-Za-z0-9.-]+):(?!\/\/)(.+)$/;
/** A ref or branch name: no spaces, control characters or git's forbidden characters (`~ ^ : ? * [ \`). */
const REF_RE = /^[A-Za-z0-9._/@+=-]+$/;

/**
 * Validates `bindings.repos`: a list of at most {@link MAX_REPO_BINDINGS} objects with a `url`
 * (https, http, ssh, git, file or scp-like; at most {@link MAX_REPO_URL_CHARS} characters; no
 * control characters, no leading `-`) and optional `name`, `ref` and `branch`. A URL carrying
 * credentials (a password anywhere, or any user name in an http(s) URL: tokens travel as one)
 * is `SECRET_EXCLUDED`; everything else wrong is `INVALID_INPUT` naming the field. Names come
 * from the URL's last segment (without `.git`) unless given; a derived name already taken gets
 * a stable suffix (a hash of the URL and its position), so the same bindings always give the
 * same names; two given names that collide are refused. An empty list reads as none.
 */
export function parseRepoBindings(input: unknown): RepoBinding[] | undefined {
  if (input === undefined || input === null) return undefined;
  if (!Array.isArray(input) || input.length > MAX_REPO_BINDINGS) {
    throw invalid('bindings.repos', `bindings.repos must be a list of at most ${MAX_REPO_BINDINGS} repositories`);
  }
  const parsed = input.map((item, i) => parseOne(item, `bindings.repos[${i}]`));
  const taken = new Set<string>();
  for (const [i, p] of parsed.entries()) {
    if (p.name === undefined) continue;
    if (taken.has(p.name))
      throw invalid(`bindings.repos[${i}].name`, `bindings.repos[${i}].name ${p.name} is used twice: names must be unique`);
    taken.add(p.name);
  }
  const out: RepoBinding[] = [];
  for (const [i, p] of parsed.entries()) {
    let name = p.name;
    if (name === undefined) {
      const base = nameFromUrl(p.url);
      name = taken.has(base) ? suffixed(base, p.url, i) : base;
      taken.add(name);
    }
    out.push({ name, url: p.url, ...(p.ref === undefined ? {} : { ref: p.ref }), ...(p.branch === undefined ? {} : { branch: p.branch }) });
  }
  return out.length === 0 ? undefined : out;
}

/** The checkout name a URL gives: its last path segment without `.git`, other characters as `-`. */
export function nameFromUrl(url: string): string {
  const trimmed = url.replace(/[/\\]+$/, '');
  const last = trimmed.slice(Math.max(trimmed.lastIndexOf('/'), trimmed.lastIndexOf(':')) + 1).replace(/\.git$/, '');
  const clean = last
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, MAX_REPO_NAME_CHARS - SUFFIX_HEX_CHARS - 1);
  return clean === '' ? 'repo' : clean;
}

function suffixed(base: string, url: string, index: number): string {
  return `${base}-${createHash('sha256').update(`${url}\0${index}`).digest('hex').slice(0, SUFFIX_HEX_CHARS)}`;
}

function parseOne(item: unknown, field: string): { name?: string; url: string; ref?: string; branch?: string } {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    throw invalid(field, `${field} must be an object {name?, url, ref?, branch?}`);
  const record = item as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!['name', 'url', 'ref', 'branch'].includes(key))
      throw invalid(field, `${field}.${key.slice(0, 32)}: the fields are name, url, ref and branch`);
  }
  const url = checkUrl(record.url, `${field}.url`);
  const name = optional(record.name, `${field}.name`, MAX_REPO_NAME_CHARS, NAME_RE);
  const ref = optional(record.ref, `${field}.ref`, MAX_REF_CHARS, REF_RE);
  const branch = optional(record.branch, `${field}.branch`, MAX_REF_CHARS, REF_RE);
  if (branch !== undefined && !isBranchName(branch))
    throw invalid(`${field}.branch`, `${field}.branch ${branch} is not a valid branch name`);
  if (ref !== undefined && (ref.startsWith('-') || ref.includes('..')))
    throw invalid(`${field}.ref`, `${field}.ref ${ref} is not a valid ref`);
  return {
    url,
    ...(name === undefined ? {} : { name }),
    ...(ref === undefined ? {} : { ref }),
    ...(branch === undefined ? {} : { branch }),
  };
}

function checkUrl(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '' || value.length > MAX_REPO_URL_CHARS || value.startsWith('-') || hasControl(value)) {
    throw invalid(field, `${field} must be a repository URL of at most ${MAX_REPO_URL_CHARS} characters`);
  }
  const scp = SCP_RE.exec(value);
  if (scp !== null && !value.includes('://')) return value;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw invalid(field, `${field} is not a URL git can clone (https, http, ssh, git, file or user@host:path)`);
  }
  if (!SCHEMES.includes(parsed.protocol)) {
    throw invalid(field, `${field}: scheme ${parsed.protocol} is not accepted (use https, http, ssh, git or file)`);
  }
  const web = parsed.protocol === 'https:' || parsed.protocol === 'http:';
  if (parsed.password !== '' || (web && parsed.username !== '')) {
    throw new InputError(
      'SECRET_EXCLUDED',
      `${field} carries credentials: give the URL without them; the host's git credential helper or config supplies them`,
      { data: { field } },
    );
  }
  return value;
}

function optional(value: unknown, field: string, max: number, re: RegExp): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > max || !re.test(value)) {
    throw invalid(field, `${field} must be at most ${max} characters of ${re.source}`);
  }
  return value;
}

/** The rules of `git check-ref-format --branch` that the character class leaves open. */
function isBranchName(name: string): boolean {
  return !(
    name.startsWith('-') ||
    name.startsWith('/') ||
    name.endsWith('/') ||
    name.endsWith('.') ||
    name.endsWith('.lock') ||
    name.includes('..') ||
    name.includes('//') ||
    name.includes('@{') ||
    name === '@' ||
    name.split('/').some((s) => s.startsWith('.'))
  );
}

function hasControl(value: string): boolean {
  for (let i = 0; i < value.length; i += 1) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c === 0x7f || c === 0x20) return true;
  }
  return false;
}

function invalid(field: string, message: string): InputError {
  return new InputError('INVALID_INPUT', message, { data: { field } });
}
