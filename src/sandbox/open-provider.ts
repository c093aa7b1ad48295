import os from 'node:os';
import path from 'node:path';
import { matchPrefix, resolveIdOrPrefix } from '../core/id-prefix.js';
import { HoldfastError, InputError, NotFoundError } from '../errors.js';
import { BwrapSandboxProvider } from './providers/bwrap.js';
import { DockerSandboxProvider } from './providers/docker.js';
import { LocalSandboxProvider } from './providers/local.js';
import type { SandboxHandle, SandboxInfo, SandboxProvider } from './sandbox-provider.js';

/** Names of the providers Holdfast ships. */
export const SANDBOX_PROVIDER_NAMES = ['bwrap', 'local', 'docker'] as const;

/** One of {@link SANDBOX_PROVIDER_NAMES}. */
export type SandboxProviderName = (typeof SANDBOX_PROVIDER_NAMES)[number];

/** Options of {@link openSandboxProvider}. */
export interface OpenSandboxProviderOptions {
  /** Where the provider keeps its sandboxes; default {@link defaultSandboxRoot}. Docker keeps them in the daemon and ignores it. */
  readonly root?: string;
}

/**
 * Where a provider keeps its sandboxes unless told otherwise: `$HOLDFAST_SANDBOX_DIR/<name>`,
 * else `$XDG_DATA_HOME/holdfast/sandboxes/<name>`, else `~/.local/share/holdfast/sandboxes/<name>`.
 * One subdirectory per provider, so providers never read each other's sandboxes.
 */
export function defaultSandboxRoot(name: SandboxProviderName, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = nonEmpty(env.HOLDFAST_SANDBOX_DIR);
  if (explicit !== undefined) return path.resolve(explicit, name);
  const dataHome = nonEmpty(env.XDG_DATA_HOME) ?? path.join(os.homedir(), '.local', 'share');
  return path.join(dataHome, 'holdfast', 'sandboxes', name);
}

/**
 * Opens a shipped provider by name. This is the one place the CLI and the engine turn a name
 * into a provider; library users with their own provider pass the instance instead. `docker`
 * talks to the daemon of `DOCKER_HOST` (or /var/run/docker.sock) and takes its image from each
 * spec (a deployment's `image`).
 */
export function openSandboxProvider(name: string, options: OpenSandboxProviderOptions = {}): SandboxProvider {
  if (!isProviderName(name)) {
    throw new InputError(
      'INVALID_INPUT',
      `unknown sandbox provider ${JSON.stringify(name)}: use one of ${SANDBOX_PROVIDER_NAMES.join(', ')}`,
      { data: { provider: name, choices: SANDBOX_PROVIDER_NAMES } },
    );
  }
  if (name === 'docker') return new DockerSandboxProvider();
  const root = options.root ?? defaultSandboxRoot(name);
  return name === 'bwrap' ? new BwrapSandboxProvider({ root }) : new LocalSandboxProvider({ root });
}

function isProviderName(name: string): name is SandboxProviderName {
  return (SANDBOX_PROVIDER_NAMES as readonly string[]).includes(name);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The sandbox `id` of the named provider, or of whichever shipped provider name has it, as
 * `providers` resolves names (default: the shipped providers; a library user's injected
 * lookup otherwise). Not found by exact id, `id` may be `latest` (the newest sandbox) or a
 * unique prefix of at least 8 characters, matched over the providers' `list()`: `CONFLICT`
 * with the candidates when ambiguous, `INVALID_INPUT` when shorter. `NOT_FOUND` when no
 * provider knows it (destroyed, or never created).
 */
export async function findSandbox(
  id: string,
  providerName?: string,
  providers: (name: string) => SandboxProvider = openSandboxProvider,
): Promise<SandboxHandle> {
  const names = providerName === undefined ? SANDBOX_PROVIDER_NAMES : [providerName];
  const exact = async (wanted: string): Promise<SandboxHandle | undefined> => {
    for (const name of names) {
      const handle = await providers(name)
        .get(wanted)
        .catch((error: unknown) => skipUnavailable(error, providerName));
      if (handle !== undefined) return handle;
    }
    return undefined;
  };
  const listed = async (): Promise<SandboxInfo[]> =>
    (
      await Promise.all(
        names.map((name) =>
          providers(name)
            .list()
            .catch((error: unknown) => skipUnavailable(error, providerName)),
        ),
      )
    ).flatMap((infos) => infos ?? []);
  const found = await resolveIdOrPrefix<SandboxHandle | SandboxInfo>(id, {
    kind: 'sandbox',
    idOf: (s) => s.id,
    exact,
    byPrefix: async (prefix, limit) => matchPrefix(await listed(), prefix, (s) => s.id, limit),
    latest: async () => (await listed()).sort((a, b) => b.createdAt - a.createdAt || a.id.localeCompare(b.id))[0],
  });
  if ('exec' in found) return found;
  const handle = await providers(found.provider).get(found.id);
  if (handle === undefined)
    throw new NotFoundError(`sandbox ${found.id} not found: list sandboxes with holdfast sandbox ls`, { data: { id } });
  return handle;
}

/**
 * The sandboxes of the named provider, or of every shipped provider. Asked for all of them, a
 * provider whose machinery is absent here (no Docker daemon) has none; asked by name, its
 * `STORE_UNAVAILABLE` is the answer.
 */
export async function listSandboxes(providerName?: string): Promise<SandboxInfo[]> {
  const infos: SandboxInfo[] = [];
  for (const name of providerName === undefined ? SANDBOX_PROVIDER_NAMES : [providerName]) {
    infos.push(
      ...((await openSandboxProvider(name)
        .list()
        .catch((error: unknown) => skipUnavailable(error, providerName))) ?? []),
    );
  }
  return infos;
}

/** Rethrows `error` unless it is `STORE_UNAVAILABLE` during a search over every provider. */
function skipUnavailable(error: unknown, providerName: string | undefined): undefined {
  if (providerName === undefined && error instanceof HoldfastError && error.code === 'STORE_UNAVAILABLE') return undefined;
  throw error;
}
