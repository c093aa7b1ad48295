/**
 * `model/`: the vocabulary shared by tenants, runs, folders and git, with no I/O: tenant scopes
 * and reserved tenants, folder scopes, run and repository bindings, the sandbox home layout,
 * reserved and derived workspace names.
 */
/**
 * Tenants as every layer names them: the scope a tenant-scoped service works in, the default
 * tenant, and the names Holdfast keeps for its own internal tenants (no token can name them).
 */

import { InputError } from '../errors.js';

/** A tenant, as services scoped to one see it. */
export interface TenantScope {
  readonly id: string;
  readonly name: string;
}

/** Tenant used when none is named (single-user CLI and embedded use). */
export const DEFAULT_TENANT = 'default';

/**
 * The tenant whose workspaces hold the work-folder sync checkpoints of every tenant. No
 * token can name it: {@link checkTenantName} refuses every name starting with
 * {@link RESERVED_TENANT_PREFIX}, and every way to reach a tenant's services or mint its
 * tokens (`forTenant`, `holdfast token create --tenant`) goes through it, so a collection's
 * files never become readable through the checkpoint or workspace APIs.
 */
export const SYNC_TENANT = '.holdfast-sync';

/** Tenant names starting with this are Holdfast's own. */
export const RESERVED_TENANT_PREFIX = '.holdfast';

/** Refuses a tenant name Holdfast keeps for itself (`INVALID_INPUT`); returns it otherwise. */
export function checkTenantName(name: string): string {
  if (typeof name !== 'string' || name === '' || name.startsWith(RESERVED_TENANT_PREFIX)) {
    throw new InputError('INVALID_INPUT', `tenant name ${JSON.stringify(name)} is reserved or empty: choose another name`, {
      data: { field: 'tenant' },
    });
  }
  return name;
}

/**
 * The tenant whose workspaces hold every tenant's repository checkpoints (reserved like
 * `SYNC_TENANT`: no token can name it, so no checkpoint route reaches a repository's objects).
 */
export const REPO_TENANT = '.holdfast-repos';
