import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { GIT_PROTOCOLS, type GitConfig, type GitProtocol } from '../config.js';
import { HoldfastError, InputError } from '../errors.js';

/** A repository a run is bound to, as stored on the run: its checkout is `$HOME/repos/<name>`. */
export interface RepoBinding {
  /** The checkout's directory name under `$HOME/repos/`, unique within the run. */
  readonly name: string;
  /** Where the host clones it from (never with credentials: only those the operator configured for its host are used). */
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
/**
 * The URL forms the host clones from: `scheme://` with one of {@link GIT_PROTOCOLS}. Local
 * paths, `file:` and `<transport>::<address>` (which runs `git-remote-<transport>` on the host)
 * match neither this nor {@link SCP_RE}.
 */
const URL_RE = /^(https|http|ssh|git):\/\/[^/]/;
/** An ssh user name in a URL: a letter, digit or `_` first, so it never reads as an option of ssh. */
const USER_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/;
/**
 * scp-like `user@host:path` or `host:path` (what git reads as ssh): a host name (or a
 * bracketed IPv6 address) and a path of URL-safe characters only, so nothing git would read
 * as another transport, an option or a local path passes.
 */
const SCP_RE =
  /^(?:([A-Za-z0-9_][A-Za-z0-9._-]{0,63})@)?([A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):([A-Za-z0-9._~/][A-Za-z0-9._~/+@-]*)$/;
/** A DNS host name as the URL parser leaves it (lowercase, punycode). */
const HOSTNAME_RE = /^[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*\.?$/;
/** Characters of a URL path the host passes to git (percent-escapes included; no quotes, spaces or backslashes). */
const URL_PATH_RE = /^\/[A-Za-z0-9._~/+@%!$&'()*,;=:-]*$/;
/** A ref or branch name: no spaces, control characters or git's forbidden characters (`~ ^ : ? * [ \`). */
const REF_RE = /^[A-Za-z0-9._/@+=-]+$/;

/** Where a validated binding URL points, as the host's policy checks it and git is pinned to it. */
export interface RepoAddress {
  readonly protocol: GitProtocol;
  /** Lowercase host name, or an IP address (IPv6 without brackets). */
  readonly host: string;
  /** The port the URL names; undefined: the protocol's default. */
  readonly port: number | undefined;
  /** The URL's path (and query) as git gets it; for scp-like URLs the part after the colon. */
  readonly path: string;
  /** The ssh user name the URL gives, if any. */
  readonly user: string | undefined;
  /** Whether the URL is scp-like (`user@host:path`). */
  readonly scpLike: boolean;
}

/** The default port of each protocol (what git and curl use when the URL names none). */
export const DEFAULT_GIT_PORTS: Readonly<Record<GitProtocol, number>> = Object.freeze({ https: 443, http: 80, ssh: 22, git: 9418 });

/**
 * Where `url` points: its protocol, host, port, path and user. Only the forms
 * {@link parseRepoBindings} accepts: `https://`, `http://`, `ssh://`, `git://` and scp-like
 * `user@host:path`; anything else (a local path, `file:`, a `<transport>::` address) is
 * `INVALID_INPUT` naming `field`.
 */
export function repoAddress(url: string, field = 'url'): RepoAddress {
  if (!URL_RE.test(url)) {
    const scp = url.includes('://') ? null : SCP_RE.exec(url);
    if (scp === null) throw notCloneable(field, url);
    const host = (scp[2] as string).replace(/^\[|\]$/g, '').toLowerCase();
    if (!(isIP(host) !== 0 || HOSTNAME_RE.test(host))) throw notCloneable(field, url);
    return { protocol: 'ssh', host, port: undefined, path: scp[3] as string, user: scp[1], scpLike: true };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw notCloneable(field, url);
  }
  const protocol = parsed.protocol.slice(0, -1) as GitProtocol;
  const host = parsed.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (!GIT_PROTOCOLS.includes(protocol) || host === '' || !(isIP(host) !== 0 || HOSTNAME_RE.test(host))) throw notCloneable(field, url);
  const rest = `${parsed.pathname}${parsed.search}`;
  if (parsed.hash !== '' || !URL_PATH_RE.test(rest) || rest === '/') throw notCloneable(field, url);
  const user = parsed.username === '' ? undefined : decodeURIComponent(parsed.username);
  if (user !== undefined && !USER_RE.test(user)) throw notCloneable(field, url);
  return { protocol, host, port: parsed.port === '' ? undefined : Number(parsed.port), path: rest, user, scpLike: false };
}

/**
 * Whether `host` matches one of the operator's `patterns`: an exact name or IP address, or
 * `*.domain` for any name below `domain` (not `domain` itself).
 */
export function hostAllowed(host: string, patterns: readonly string[]): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return patterns.some((p) => {
    const pattern = p.toLowerCase().replace(/^\[|\]$/g, '');
    return pattern.startsWith('*.') ? h.endsWith(pattern.slice(1)) && h.length > pattern.length - 1 : h === pattern;
  });
}

/**
 * Checks each binding against the operator's `git` settings: its protocol must be among
 * `git.protocols` (`INVALID_INPUT`) and its host among `git.allowedHosts` (`FORBIDDEN`: the
 * request is well formed, the operator does not allow it). Each error's `data` names the
 * field (`bindings.repos[i].url`, counting from `firstIndex`) and the host.
 */
export function checkReposAllowed(repos: readonly Pick<RepoBinding, 'url'>[], git: GitConfig, firstIndex = 0): void {
  for (const [i, repo] of repos.entries()) {
    const field = `bindings.repos[${firstIndex + i}].url`;
    const address = repoAddress(repo.url, field);
    if (!git.protocols.includes(address.protocol)) {
      throw new InputError(
        'INVALID_INPUT',
        `${field}: protocol ${address.protocol} is not allowed here (allowed: ${git.protocols.join(', ') || 'none'}; the operator sets HOLDFAST_GIT_PROTOCOLS)`,
        { data: { field, protocol: address.protocol } },
      );
    }
    if (!hostAllowed(address.host, git.allowedHosts)) {
      throw new HoldfastError(
        'FORBIDDEN',
        `${field}: host ${address.host} is not one this service clones from (the operator lists them in HOLDFAST_GIT_ALLOWED_HOSTS)`,
        { data: { field, host: address.host } },
      );
    }
  }
}

/**
 * Validates `bindings.repos`: a list of at most {@link MAX_REPO_BINDINGS} objects with a `url`
 * (`https://`, `http://`, `ssh://`, `git://` or scp-like `user@host:path`, see
 * {@link repoAddress}; never a local path, `file:` or a `<transport>::` address; at most
 * {@link MAX_REPO_URL_CHARS} characters; no control characters, no leading `-`) and optional
 * `name`, `ref` and `branch`. Which protocols and hosts the host really clones from is the
 * operator's ({@link checkReposAllowed}). A URL carrying
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
  if (URL_RE.test(value)) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(value);
    } catch {
      parsed = undefined;
    }
    const web = parsed?.protocol === 'https:' || parsed?.protocol === 'http:';
    if (parsed !== undefined && (parsed.password !== '' || (web && parsed.username !== ''))) {
      throw new InputError(
        'SECRET_EXCLUDED',
        `${field} carries credentials: give the URL without them; the operator configures credentials per host`,
        { data: { field } },
      );
    }
  }
  repoAddress(value, field);
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

function notCloneable(field: string, url: string): InputError {
  const local = /^(?:file:|\/|\.|~)/i.test(url) || url.includes('::');
  return invalid(
    field,
    `${field} is not a repository URL the host clones: use https://, ssh://, git://, http:// or user@host:path${local ? ' (local paths, file: and <transport>:: addresses are refused)' : ''}`,
  );
}

function invalid(field: string, message: string): InputError {
  return new InputError('INVALID_INPUT', message, { data: { field } });
}
