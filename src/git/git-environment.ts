import type { GitConfig, GitCredential } from '../config.js';
import { shellQuote } from '../core/shell-quote.js';
import { DEFAULT_GIT_PORTS, hostAllowed, type RepoAddress } from '../model/repo-bindings.js';

/** Username sent with a token that names none (what GitHub, Gitea and GitLab accept for a token). */
const DEFAULT_TOKEN_USERNAME = 'x-access-token';
/** Below this many bytes a second for {@link LOW_SPEED_TIME_S} seconds, curl gives up (a stalled server). */
const LOW_SPEED_BYTES_PER_S = 1024;
const LOW_SPEED_TIME_S = 60;
/** The longest ssh waits for the server's first answer. */
const SSH_CONNECT_TIMEOUT_S = 30;

/** What {@link gitEnvironment} builds an environment for. */
export interface GitEnvironmentInput {
  readonly address: RepoAddress;
  /** The address checked for the host, which git must connect to. */
  readonly ip: string;
  /** A throwaway, empty directory that is git's `HOME` (and `XDG_CONFIG_HOME`). */
  readonly home: string;
  readonly git: GitConfig;
  readonly tenant: string;
  /** The system's certificate authorities plus the operator's `git.caFile`, as one PEM file (when the operator names one). */
  readonly caBundle?: string;
}

/**
 * The whole environment of a host git command for one binding, built from nothing but `PATH`:
 * no system or global git config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
 * `HOME` and `XDG_CONFIG_HOME` the throwaway directory), so no ambient credential helper,
 * `insteadOf` rewrite, proxy, `extraheader` or hook of the service applies; no proxy or SSH
 * agent variables; prompts off. Settings go through `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, so
 * a credential never appears in argv: only this binding's protocol is allowed (`protocol.allow
 * =never` and `GIT_ALLOW_PROTOCOL`), `credential.helper` is reset, redirects are not
 * followed, curl resolves the host only to `ip`, submodules are not recursed, hooks and
 * fsmonitor are off; then the operator's credential for the host and tenant, if any
 * ({@link credentialFor}): an `Authorization: Basic` header scoped to `https://host[:port]/`,
 * or the ssh key.
 */
export function gitEnvironment(input: GitEnvironmentInput): NodeJS.ProcessEnv {
  const { address, ip, home, git } = input;
  const port = address.port ?? DEFAULT_GIT_PORTS[address.protocol];
  const config: Array<[string, string]> = [
    ['protocol.allow', 'never'],
    [`protocol.${address.protocol}.allow`, 'always'],
    ['credential.helper', ''],
    ['core.hooksPath', '/dev/null'],
    ['core.fsmonitor', 'false'],
    ['core.askPass', ''],
    ['http.followRedirects', 'false'],
    ['http.proxy', ''],
    ['http.lowSpeedLimit', String(LOW_SPEED_BYTES_PER_S)],
    ['http.lowSpeedTime', String(LOW_SPEED_TIME_S)],
    ['submodule.recurse', 'false'],
    ['fetch.recurseSubmodules', 'false'],
    ['init.templateDir', ''],
  ];
  const credential = credentialFor(git.credentials, address.host, input.tenant);
  if (address.protocol === 'https' || address.protocol === 'http') {
    const host = address.host.includes(':') ? `[${address.host}]` : address.host;
    if (!address.host.includes(':') && !/^[0-9.]+$/.test(address.host)) {
      config.push(['http.curloptResolve', `${address.host}:${port}:${ip.includes(':') ? `[${ip}]` : ip}`]);
    }
    if (input.caBundle !== undefined) config.push(['http.sslCAInfo', input.caBundle]);
    const authorization = basicAuthorization(credential, address.protocol);
    if (authorization !== undefined) {
      const scope = `https://${host}${address.port === undefined ? '' : `:${address.port}`}/`;
      config.push([`http.${scope}.extraHeader`, `Authorization: ${authorization}`]);
    }
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    XDG_CONFIG_HOME: home,
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ALLOW_PROTOCOL: address.protocol,
    GIT_PROTOCOL_FROM_USER: '0',
    GIT_CONFIG_COUNT: String(config.length),
  };
  for (const [i, [key, value]] of config.entries()) {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  }
  if (address.protocol === 'ssh') {
    env.GIT_SSH_VARIANT = 'ssh';
    env.GIT_SSH_COMMAND = sshCommand(address.host, ip, git.sshKnownHostsFile, credential?.sshKeyFile);
  }
  return env;
}

/**
 * The operator's credential for `host` and `tenant`: the first entry scoped to this tenant
 * whose host pattern matches, else the first unscoped one; undefined when none matches.
 */
/**
 * The `Authorization` value a host-side call to a remote sends with `credential`: HTTP basic with
 * its token (and username, default `x-access-token`), over https only, so a token never travels
 * over plain http; undefined otherwise.
 */
export function basicAuthorization(credential: GitCredential | undefined, protocol: RepoAddress['protocol']): string | undefined {
  if (protocol !== 'https' || credential?.token === undefined) return undefined;
  return `Basic ${Buffer.from(`${credential.username ?? DEFAULT_TOKEN_USERNAME}:${credential.token}`).toString('base64')}`;
}

export function credentialFor(credentials: readonly GitCredential[], host: string, tenant: string): GitCredential | undefined {
  const matching = credentials.filter((c) => hostAllowed(host, [c.host]) && (c.tenant === undefined || c.tenant === tenant));
  return matching.find((c) => c.tenant !== undefined) ?? matching[0];
}

/**
 * ssh with no config file, agent, proxy or forwarding of the service's, in batch mode,
 * connecting to `ip` while checking the host key under `host`'s name against the operator's
 * known-hosts file only (none: no host is trusted), with the operator's key for that host.
 */
function sshCommand(host: string, ip: string, knownHosts: string | undefined, key: string | undefined): string {
  return [
    'ssh',
    '-F /dev/null',
    '-o BatchMode=yes',
    '-o StrictHostKeyChecking=yes',
    `-o ${shellQuote(`UserKnownHostsFile=${knownHosts ?? '/dev/null'}`)}`,
    '-o GlobalKnownHostsFile=/dev/null',
    `-o ${shellQuote(`HostName=${ip}`)}`,
    `-o ${shellQuote(`HostKeyAlias=${host}`)}`,
    '-o IdentitiesOnly=yes',
    '-o IdentityAgent=none',
    '-o ProxyCommand=none',
    '-o ProxyJump=none',
    '-o ClearAllForwardings=yes',
    `-o ConnectTimeout=${SSH_CONNECT_TIMEOUT_S}`,
    key === undefined ? '-o IdentityFile=none' : `-i ${shellQuote(key)}`,
  ].join(' ');
}
