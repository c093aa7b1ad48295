/**
 * API tokens: random, high-entropy strings shown once; only their SHA-256 is stored, so a
 * leaked metadata database does not leak usable tokens. The CLI and the HTTP API both create
 * and check tokens here.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { MetadataStore, TokenRecord } from '../metadata/metadata-store.js';
import type { TenantScope } from '../runs/deployments.js';
import type { Principal } from './folder-access.js';

/** Prefix that makes Holdfast tokens recognisable to secret scanners and to people. */
export const TOKEN_PREFIX = 'hf_';
/** 256 bits of entropy: unguessable, so a fast unsalted hash is enough to store it. */
export const TOKEN_RANDOM_BYTES = 32;

/** A new token: `hf_` + 32 random bytes in base64url (46 characters). */
export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(TOKEN_RANDOM_BYTES).toString('base64url');
}

/** The stored form of a token: lowercase hex SHA-256 of its UTF-8 bytes. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export type { Principal } from './folder-access.js';

/** A token just created: the only moment its secret exists outside the caller's hands. */
export interface CreatedToken {
  readonly id: string;
  readonly tenant: string;
  readonly name: string;
  readonly admin: boolean;
  /** The bearer token itself; only its hash is stored. */
  readonly token: string;
}

/** Tokens of every tenant (an operator's or an admin token's view). */
export class Tokens {
  constructor(
    private readonly meta: MetadataStore,
    /** Finds or creates a tenant by name. */
    private readonly tenant: (name: string) => Promise<TenantScope>,
  ) {}

  /** Creates a token for tenant `tenant` (creating the tenant if it is missing); the result holds the token once. */
  async create(input: { tenant: string; name: string; admin: boolean }): Promise<CreatedToken> {
    const tenant = await this.tenant(input.tenant);
    const token = generateToken();
    const record = await this.meta.tokens.create({ tenantId: tenant.id, name: input.name, hash: hashToken(token), admin: input.admin });
    return { id: record.id, tenant: tenant.name, name: record.name, admin: record.admin, token };
  }

  /** Every token, live and revoked, newest first (never a secret: only hashes are stored, and not returned). */
  list(): Promise<TokenRecord[]> {
    return this.meta.tokens.list();
  }

  /** Revokes a token; false when there is no live token with this id. */
  revoke(id: string): Promise<boolean> {
    return this.meta.tokens.revoke(id);
  }

  /** The principal of the live token whose hash is `tokenHash`, or `undefined`. */
  async principal(tokenHash: string): Promise<Principal | undefined> {
    const token = await this.meta.tokens.findByHash(tokenHash);
    return token === undefined
      ? undefined
      : { kind: 'service', tokenId: token.id, tenantId: token.tenantId, tenantName: token.tenantName, admin: token.admin };
  }
}
