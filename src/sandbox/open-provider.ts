import os from 'node:os';
import path from 'node:path';
import { InputError, NotFoundError } from '../errors.js';
import { BwrapSandboxProvider } from './providers/bwrap.js';
import { LocalSandboxProvider } from './providers/local.js';
import type { SandboxHandle, SandboxProvider } from './sandbox-provider.js';

/** Names of the providers Holdfast ships. */
export const SANDBOX_PROVIDER_NAMES = ['bwrap', 'local'] as const;

/** One of {@link SANDBOX_PROVIDER_NAMES}. */
export type SandboxProviderName = (typeof SANDBOX_PROVIDER_NAMES)[number];

/** Options of {@link openSandboxProvider}. */
export interface OpenSandboxProviderOptions {
  /** Where the provider keeps its sandboxes; default {@link defaultSandboxRoot}. */
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
 * into a provider; library users with their own provider pass the instance instead.
 */
export function openSandboxProvider(name: string, options: OpenSandboxProviderOptions = {}): SandboxProvider {
  if (!isProviderName(name)) {
    throw new InputError(
      'INVALID_INPUT',
      `unknown sandbox provider ${JSON.stringify(name)}: use one of ${SANDBOX_PROVIDER_NAMES.join(', ')}`,
      { data: { provider: name, choices: SANDBOX_PROVIDER_NAMES } },
    );
  }
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
 * lookup otherwise). `NOT_FOUND` when no provider knows it (destroyed, or never created).
 */
export async function findSandbox(
  id: string,
  providerName?: string,
  providers: (name: string) => SandboxProvider = openSandboxProvider,
): Promise<SandboxHandle> {
  for (const name of providerName === undefined ? SANDBOX_PROVIDER_NAMES : [providerName]) {
    const handle = await providers(name).get(id);
    if (handle !== undefined) return handle;
  }
  throw new NotFoundError(`sandbox ${id} not found: list sandboxes with holdfast sandbox ls`, { data: { id } });
}
