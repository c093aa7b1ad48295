/**
 * Who may see what in work folders (DESIGN section 10): the principals a bearer token
 * resolves to, and the one policy every work-folder route and library caller consults.
 *
 * The policy only ever answers `true` or `false`; a route turns `false` into 404 `NOT_FOUND`
 * (never 403), so a denied caller cannot tell a collection it may not see from one that does
 * not exist.
 */

import { InputError } from '../errors.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import { parseRepoBindings, type RepoBinding, type RepoBindingInput } from '../repos/repo-bindings.js';

/** The principal kinds, in the order they were introduced. */
export const PRINCIPAL_KINDS = ['service', 'user', 'run'] as const;
/** One of {@link PRINCIPAL_KINDS}. */
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

/** What every principal carries: the token it came from and the tenant it acts in. */
interface PrincipalBase {
  /** Id of the token row, for audit logs, revocation and idempotency receipts. */
  readonly tokenId: string;
  readonly tenantId: string;
  readonly tenantName: string;
}

/** A service token: a platform's servers (every token before users and runs existed). */
export interface ServicePrincipal extends PrincipalBase {
  readonly kind: 'service';
  /** Admin tokens may manage tenants and tokens; they gain nothing in work folders (never a user collection). */
  readonly admin: boolean;
}

/** The roles of a user: members read and write shared collections, viewers only read them. */
export const USER_ROLES = ['member', 'viewer'] as const;
/** One of {@link USER_ROLES}. */
export type UserRole = (typeof USER_ROLES)[number];

/** A person's token; only ever resolved while the user is not revoked. */
export interface UserPrincipal extends PrincipalBase {
  readonly kind: 'user';
  /** The user's name in its tenant, which is also the owner id of its user collection. */
  readonly userId: string;
  readonly role: UserRole;
}

/**
 * The owners a run is bound to (owner ids of the collections it may reach), each optional:
 * an absent owner means the run reaches no collection of that scope.
 */
export interface RunBindings {
  readonly task?: string;
  readonly agent?: string;
  readonly user?: string;
  readonly project?: string;
  /** Repositories checked out under `$HOME/repos/<name>` (see `parseRepoBindings`); they grant no collection. */
  readonly repos?: readonly RepoBinding[];
}

/** The scopes a run may be bound in (every collection scope). */
export const BINDING_SCOPES = ['task', 'agent', 'user', 'project'] as const satisfies readonly CollectionScope[];

/** Longest owner id accepted in a binding. */
export const MAX_OWNER_ID_CHARS = 128;
/**
 * An owner id: printable ASCII without spaces, slashes or backslashes (it becomes a URL
 * segment and a sandbox folder name), starting with a letter or digit.
 */
const OWNER_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@-]*$/;

/** Whether `value` is an acceptable owner id (see {@link parseRunBindings}). */
export function isOwnerId(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_OWNER_ID_CHARS && OWNER_ID_RE.test(value);
}

/**
 * Validates what a caller offers as a run's bindings: an object whose keys are among
 * {@link BINDING_SCOPES} (or `repos`, validated by `parseRepoBindings`) and whose values are owner ids of at most {@link MAX_OWNER_ID_CHARS}
 * characters (letters, digits, `. _ : @ -`, starting with a letter or digit). Anything else is
 * `INVALID_INPUT` naming the field. An object without owners reads as no bindings (`undefined`).
 */
export function parseRunBindings(input: unknown): RunBindings | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new InputError('INVALID_INPUT', 'bindings must be an object of owner ids by scope (task, agent, user, project)', {
      data: { field: 'bindings' },
    });
  }
  const bindings: Record<string, string> = {};
  let repos: RepoBinding[] | undefined;
  for (const [scope, owner] of Object.entries(input)) {
    if (scope === 'repos') {
      repos = parseRepoBindings(owner);
      continue;
    }
    if (!(BINDING_SCOPES as readonly string[]).includes(scope)) {
      throw new InputError('INVALID_INPUT', `bindings.${scope.slice(0, 64)}: the scopes are task, agent, user and project`, {
        data: { field: 'bindings' },
      });
    }
    if (owner === undefined) continue;
    if (!isOwnerId(owner)) {
      throw new InputError(
        'INVALID_INPUT',
        `bindings.${scope} must be an owner id of at most ${MAX_OWNER_ID_CHARS} letters, digits and . _ : @ - (starting with a letter or digit)`,
        { data: { field: `bindings.${scope}` } },
      );
    }
    bindings[scope] = owner;
  }
  if (repos !== undefined) return { ...bindings, repos };
  return Object.keys(bindings).length === 0 ? undefined : bindings;
}

/** What a caller may offer as bindings ({@link parseRunBindings} validates it); an `undefined` owner is no binding. */
export type RunBindingsInput = { readonly [S in CollectionScope]?: string | undefined } & {
  readonly repos?: readonly RepoBindingInput[] | undefined;
};

/** A run token: the run-scoped transfer capability, only while its run is active. */
export interface RunPrincipal extends PrincipalBase {
  readonly kind: 'run';
  readonly runId: string;
  readonly bindings: RunBindings;
}

/** Who is calling: resolved from a bearer token (`Tokens.principal`). */
export type Principal = ServicePrincipal | UserPrincipal | RunPrincipal;

/** The collection scopes (the same list as `FOLDER_SCOPES` in `folders/folders.ts`). */
export type CollectionScope = 'task' | 'agent' | 'user' | 'project';

/** The collection being asked about; `CollectionRef` of `folders/folders.ts` is one. */
export interface CollectionTarget {
  readonly tenantId: string;
  readonly scope: CollectionScope;
  readonly ownerId: string;
}

/**
 * What a caller wants to do with a collection: `read` (list, download), `write` (upload,
 * mkdir, delete to trash, restore, purge one trashed file) or `purge-collection` (delete
 * the owner's whole collection for good).
 */
export type FolderAction = 'read' | 'write' | 'purge-collection';

/**
 * What the policy looks up at the moment of the decision, so a revocation or a run's end
 * takes effect on the next request even if the principal was resolved earlier.
 */
export interface FolderAccessLookups {
  /** Whether tenant `tenantId` has a user named `userId` that is not revoked. */
  isUserActive(tenantId: string, userId: string): Promise<boolean>;
  /** Whether run `runId` of tenant `tenantId` exists and is active (not ended, not deleted). */
  isRunActive(tenantId: string, runId: string): Promise<boolean>;
}

/**
 * The lookups over the metadata store: a user is active while a live (not revoked) row of
 * that name exists in the tenant; a run is active while it exists in the tenant and has not
 * ended. One indexed query each, on every decision.
 */
export function folderAccessLookups(meta: MetadataStore): FolderAccessLookups {
  return {
    async isUserActive(tenantId, userId) {
      return (await meta.users.findActive(tenantId, userId)) !== undefined;
    },
    async isRunActive(tenantId, runId) {
      const run = await meta.runs.find(tenantId, runId);
      return run !== undefined && run.endedAt === null;
    },
  };
}

/**
 * Whether `principal` may do `action` on `collection`. The rules, every other case `false`:
 * - Another tenant's collection: never, whoever asks (admin tokens included).
 * - `task`, `agent`, `project` collections: `read` by the tenant's active users (member and
 *   viewer) and service tokens; `write` by active members and service tokens.
 * - A `user` collection: `read` and `write` only by that user (while not revoked) and by an
 *   active run bound to that user (while the user is not revoked); never by another user, a
 *   service token or an admin token.
 * - A run token: `read` and `write` only on the collections it is bound to (so it writes the
 *   agent collection of its own agent only), only while the run is active.
 * - `purge-collection`: service tokens only, and not on a user collection: a token that may
 *   not see a collection may not destroy it or learn from the answer whether it held files.
 */
export async function canAccessFolder(
  principal: Principal,
  collection: CollectionTarget,
  action: FolderAction,
  lookups: FolderAccessLookups,
): Promise<boolean> {
  if (principal.tenantId !== collection.tenantId) return false;
  switch (principal.kind) {
    case 'service':
      return collection.scope !== 'user';
    case 'user':
      return userMay(principal, collection, action, lookups);
    case 'run':
      return runMay(principal, collection, action, lookups);
  }
}

async function userMay(principal: UserPrincipal, collection: CollectionTarget, action: FolderAction, lookups: FolderAccessLookups) {
  if (action === 'purge-collection') return false;
  if (collection.scope === 'user' && collection.ownerId !== principal.userId) return false;
  if (collection.scope !== 'user' && action === 'write' && principal.role !== 'member') return false;
  return lookups.isUserActive(principal.tenantId, principal.userId);
}

async function runMay(principal: RunPrincipal, collection: CollectionTarget, action: FolderAction, lookups: FolderAccessLookups) {
  if (action === 'purge-collection') return false;
  if (principal.bindings[collection.scope] !== collection.ownerId) return false;
  if (!(await lookups.isRunActive(principal.tenantId, principal.runId))) return false;
  return collection.scope !== 'user' || lookups.isUserActive(principal.tenantId, collection.ownerId);
}
