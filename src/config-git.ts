/**
 * The operator's git settings: which hosts and transports repository bindings may use, the
 * per-host credentials the host adds, and the bounds of a host clone (`HOLDFAST_GIT_*`, or
 * `openHoldfast({ config: { git } })`), each checked by {@link GitConfigSchema}.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { configInvalid, firstIssue } from './config-errors.js';
import { fieldPath, InputError } from './errors.js';

/** Transports a repository binding may use (git's own names, as in `GIT_ALLOW_PROTOCOL`). */
export const GIT_PROTOCOLS = ['https', 'ssh', 'http', 'git'] as const;
/** One of {@link GIT_PROTOCOLS}. */
export type GitProtocol = (typeof GIT_PROTOCOLS)[number];

/**
 * A credential the operator configured for one host (or host pattern), optionally for one
 * tenant only (by tenant name). `token` goes to https hosts as HTTP basic auth
 * (`username`, default `x-access-token`, and the token); `sshKeyFile` is the private key ssh
 * uses for that host. Never read from a binding, never an ambient helper.
 */
export interface GitCredential {
  readonly host: string;
  readonly tenant?: string;
  readonly username?: string;
  readonly token?: string;
  readonly sshKeyFile?: string;
}

/**
 * The operator's rules for host clones of repository bindings (DESIGN section 14): the host
 * clones only from `allowedHosts` (exact names or `*.example.com` for any subdomain; IP
 * literals as written), over `protocols`, with only the `credentials` listed here, never to a
 * loopback, private, link-local, unspecified or multicast address unless
 * `allowPrivateAddresses` (an operator with an internal git server; tests). Fetched packs are
 * capped at `maxPackBytes`, and the checked-out tree at `maxCheckoutBytes` (with the scan
 * limits on entries and file size) before anything is checked out.
 */
export interface GitConfig {
  readonly allowedHosts: readonly string[];
  readonly protocols: readonly GitProtocol[];
  readonly credentials: readonly GitCredential[];
  readonly allowPrivateAddresses: boolean;
  /** `known_hosts` file ssh checks host keys against (without one, no ssh host is trusted). */
  readonly sshKnownHostsFile?: string;
  /** A PEM file of certificate authorities trusted for https remotes besides the system's (an internal git server's CA). */
  readonly caFile?: string;
  readonly maxPackBytes: number;
  readonly maxCheckoutBytes: number;
}

/** Largest pack a host clone may fetch (`HOLDFAST_GIT_MAX_PACK_BYTES`). */
export const DEFAULT_GIT_MAX_PACK_BYTES = 1024 * 1024 * 1024;
/** Most bytes of files a host clone may check out (`HOLDFAST_GIT_MAX_CHECKOUT_BYTES`). */
export const DEFAULT_GIT_MAX_CHECKOUT_BYTES = 4 * 1024 * 1024 * 1024;

/**
 * No host allowed: a repository binding is refused until the operator names the hosts it
 * trusts (there is no safe guess: any default host would let tenants make the service
 * connect, with whatever that host grants the service's address).
 */
export const DEFAULT_GIT_CONFIG: GitConfig = Object.freeze({
  allowedHosts: Object.freeze([]),
  protocols: Object.freeze(['https', 'ssh'] as const),
  credentials: Object.freeze([]),
  allowPrivateAddresses: false,
  maxPackBytes: DEFAULT_GIT_MAX_PACK_BYTES,
  maxCheckoutBytes: DEFAULT_GIT_MAX_CHECKOUT_BYTES,
});

/** Host patterns as an example in errors. */
export const GIT_HOSTS_EXAMPLE = 'github.com,*.example.com';
const GIT_HOST_PATTERN_RE = /^(?:\*\.)?[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9](?:[a-z0-9-]{0,62}))*$|^\[?[0-9a-f:.]+\]?$/;
const GIT_CREDENTIALS_EXAMPLE = '/etc/holdfast/git-credentials.json holding [{"host":"github.com","token":"…"}]';

/** A host name, `*.domain` pattern or IP address, lowercased. */
export const GitHostPattern = z
  .string()
  .transform((host) => host.toLowerCase())
  .pipe(z.string().regex(GIT_HOST_PATTERN_RE, { error: 'not a host name, *.domain pattern or IP address' }));

/** One entry of the git credentials file or `git.credentials` ({@link GitCredential}). */
export const GitCredentialSchema = z
  .object({
    host: GitHostPattern,
    tenant: z.string().optional(),
    username: z
      .string()
      .refine((u) => !u.includes(':'), { error: 'a username holds no colon' })
      .optional(),
    token: z.string().optional(),
    sshKeyFile: z.string().optional(),
  })
  .refine((c) => c.token !== undefined || c.sshKeyFile !== undefined, { error: 'each entry needs a host and a token or sshKeyFile' });

/** A list of {@link GIT_PROTOCOLS}. */
export const GitProtocolList = z.array(z.enum(GIT_PROTOCOLS, { error: `unknown protocol (known: ${GIT_PROTOCOLS.join(', ')})` }));

/** {@link GitConfig}, every field but none required: what is left out takes {@link DEFAULT_GIT_CONFIG}'s value. */
export const GitConfigSchema = z.object({
  allowedHosts: z.array(GitHostPattern).default([]),
  protocols: GitProtocolList.default([...DEFAULT_GIT_CONFIG.protocols]).transform((protocols) => [...new Set(protocols)]),
  credentials: z.array(GitCredentialSchema).default([]),
  allowPrivateAddresses: z.boolean().default(false),
  sshKnownHostsFile: z.string().min(1).optional(),
  caFile: z.string().min(1).optional(),
  maxPackBytes: z.number().int().positive().default(DEFAULT_GIT_MAX_PACK_BYTES),
  maxCheckoutBytes: z.number().int().positive().default(DEFAULT_GIT_MAX_CHECKOUT_BYTES),
});

/**
 * A complete, frozen {@link GitConfig} from `input` over {@link DEFAULT_GIT_CONFIG}, by
 * {@link GitConfigSchema}: host patterns lowercased and checked, protocols among
 * {@link GIT_PROTOCOLS}, credentials with a host and a token or key file. `INVALID_INPUT`
 * otherwise, `data.variable` naming `names`' variable (library callers: the option) and
 * `data.field` the exact place (`git.allowedHosts[1]`; for a variable, the variable).
 */
export function parseGitConfig(
  input: Partial<GitConfig>,
  names: { hosts: string; protocols: string; credentials: string } = {
    hosts: 'git.allowedHosts',
    protocols: 'git.protocols',
    credentials: 'git.credentials',
  },
): GitConfig {
  const parsed = GitConfigSchema.safeParse(input, { reportInput: true });
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    const [key] = issue.path;
    const variable =
      key === 'allowedHosts'
        ? names.hosts
        : key === 'protocols'
          ? names.protocols
          : key === 'credentials'
            ? names.credentials
            : `git.${String(key)}`;
    const fromEnv = variable.startsWith('HOLDFAST_');
    const field = fromEnv ? variable : fieldPath(['git', ...issue.path]);
    // A credential is never echoed: the message names where it is, not what it holds.
    const shown = key === 'allowedHosts' || key === 'protocols' ? `=${String(issue.input)}` : '';
    const example = key === 'allowedHosts' ? GIT_HOSTS_EXAMPLE : key === 'protocols' ? 'https,ssh' : GIT_CREDENTIALS_EXAMPLE;
    throw new InputError('INVALID_INPUT', `${field}${shown}: ${issue.message}. Example: ${variable}=${example}`, {
      data: { variable, field },
    });
  }
  // zod's optional fields read `T | undefined`; the schema never sets one to undefined.
  const git = parsed.data as GitConfig;
  return Object.freeze({
    ...git,
    allowedHosts: Object.freeze(git.allowedHosts),
    protocols: Object.freeze(git.protocols),
    credentials: Object.freeze(git.credentials.map((c) => Object.freeze(c))),
  });
}

/** The JSON list of {@link GitCredential} in `file` (`HOLDFAST_GIT_CREDENTIALS_FILE`), checked later by {@link parseGitConfig}. */
export function readGitCredentials(file: string): GitCredential[] {
  let value: unknown;
  try {
    value = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    throw configInvalid(
      'HOLDFAST_GIT_CREDENTIALS_FILE',
      file,
      `cannot read it as JSON (${(error as Error).name})`,
      GIT_CREDENTIALS_EXAMPLE,
    );
  }
  if (!Array.isArray(value)) throw configInvalid('HOLDFAST_GIT_CREDENTIALS_FILE', file, 'expected a JSON list', GIT_CREDENTIALS_EXAMPLE);
  return value as GitCredential[];
}
