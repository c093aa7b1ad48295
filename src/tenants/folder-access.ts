/**
 * Who may see what in work folders (DESIGN section 10): the principals a bearer token
 * resolves to, and the one policy every work-folder route and library caller consults.
 *
 * The policy only ever answers `true` or `false`; a route turns `false` into 404 `NOT_FOUND`
 * (never 403), so a denied caller cannot tell a collection it may not see from one that does
 * not exist.
 */

import type { MetadataStore } from '../metadata/metadata-store.js';
import type { FolderScope } from '../model/folder-scopes.js';
import type { RunBindings } from '../model/run-bindings.js';

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
  /**
   * The user's immutable row id, the owner id of its user collection (a reused name is
   * another user with another id, so it reaches nothing of this one).
   */
  readonly userId: string;
  /** The user's name in its tenant: what people type and see; never an owner id. */
  readonly userName: string;
  readonly role: UserRole;
}

/** A run token: the run-scoped transfer capability, only while its run is active. */
export interface RunPrincipal extends PrincipalBase {
  readonly kind: 'run';
  readonly runId: string;
  readonly bindings: RunBindings;
}

/** Who is calling: resolved from a bearer token (`Tokens.principal`). */
export type Principal = ServicePrincipal | UserPrincipal | RunPrincipal;

/** The collection being asked about; `FolderRef` of `folders/folders.ts` is one. */
export interface FolderTarget {
  readonly tenantId: string;
  readonly scope: FolderScope;
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
  /** Whether tenant `tenantId` has a user of row id `userId` that is not revoked. */
  isUserActive(tenantId: string, userId: string): Promise<boolean>;
  /**
   * The row id of tenant `tenantId`'s live user named `name`, or `undefined`: how a route that
   * takes a user's name (`…/work-folders/user/<name>`) finds the collection it means.
   */
  liveUserId(tenantId: string, name: string): Promise<string | undefined>;
  /** Whether run `runId` of tenant `tenantId` exists and is active (not ended, not deleted). */
  isRunActive(tenantId: string, runId: string): Promise<boolean>;
}

/**
 * The lookups over the metadata store: a user is active while its row (by id) exists in the
 * tenant and is not revoked, which a revoked id never is again; a run is active while it exists in the tenant and has not
 * ended. One indexed query each, on every decision.
 */
export function folderAccessLookups(meta: MetadataStore): FolderAccessLookups {
  return {
    async isUserActive(tenantId, userId) {
      const user = await meta.users.find(tenantId, userId);
      return user !== undefined && user.revokedAt === null;
    },
    async liveUserId(tenantId, name) {
      return (await meta.users.findActive(tenantId, name))?.id;
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
 * - A `user` collection (its owner id is the user's row id, never a name): `read` and `write`
 *   only by that user (while not revoked) and by an active run bound to that user's id (while
 *   the user is not revoked); never by another user (a later user of the same name included),
 *   a service token or an admin token.
 * - A run token: `read` and `write` only on the collections it is bound to (so it writes the
 *   agent collection of its own agent only), only while the run is active.
 * - `purge-collection`: service tokens only, and not on a user collection: a token that may
 *   not see a collection may not destroy it or learn from the answer whether it held files.
 */
export async function canAccessFolder(
  principal: Principal,
  collection: FolderTarget,
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

async function userMay(principal: UserPrincipal, collection: FolderTarget, action: FolderAction, lookups: FolderAccessLookups) {
  if (action === 'purge-collection') return false;
  if (collection.scope === 'user' && collection.ownerId !== principal.userId) return false;
  if (collection.scope !== 'user' && action === 'write' && principal.role !== 'member') return false;
  return lookups.isUserActive(principal.tenantId, principal.userId);
}

async function runMay(principal: RunPrincipal, collection: FolderTarget, action: FolderAction, lookups: FolderAccessLookups) {
  if (action === 'purge-collection') return false;
  if (principal.bindings[collection.scope] !== collection.ownerId) return false;
  if (!(await lookups.isRunActive(principal.tenantId, principal.runId))) return false;
  return collection.scope !== 'user' || lookups.isUserActive(principal.tenantId, collection.ownerId);
}
