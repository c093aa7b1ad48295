/**
 * `tenants/`: who acts in a tenant: principals, bearer tokens, users, and the one work-folder
 * access policy every route and library caller consults.
 */
/**
 * API tokens: random, high-entropy strings shown once (their format: `rules/token-format.ts`);
 * only their SHA-256 is stored, so a leaked metadata database does not leak usable tokens. The CLI and the HTTP API both create
 * and check tokens here. A token acts as a service (today's tokens, optionally admin), as a
 * user of its tenant, or as a run (see `folder-access.ts` for what each may reach).
 */
import { createHash, randomBytes } from 'node:crypto';
import { CREATED_KEY, type Page, type PageRequest, readPage } from '../core/page-cursor.js';
import { NotFoundError } from '../errors.js';
import type { MetadataRepositories, MetadataStore, TokenGrant, TokenRecord } from '../metadata/metadata-store.js';
import { FOLDER_SCOPES } from '../model/folder-scopes.js';
import type { RunBindings } from '../model/run-bindings.js';
import type { TenantScope } from '../model/tenants.js';
import { BASE62_ALPHABET, TOKEN_PREFIX, TOKEN_RANDOM_CHARS, tokenChecksum } from '../rules/token-format.js';
import type { Principal } from './folder-access.js';

export { LEGACY_TOKEN_PREFIX, TOKEN_PREFIX } from '../rules/token-format.js';
export type { Principal } from './folder-access.js';

/** Largest multiple of 62 a random byte can be: bytes at or above it are drawn again, so every base62 digit is equally likely. */
const BASE62_BYTE_LIMIT = 62 * 4;
/** Random bytes drawn per round while filling the random part (about 3% are drawn again). */
const TOKEN_DRAW_BYTES = 64;

/**
 * A new token in the format of `rules/token-format.ts`: `holdfast_` + 43 random base62
 * characters (over 256 bits: unguessable, so a fast unsalted hash is enough to store it) +
 * the 6-character base62 CRC32 of the random part, 58 characters in all. Tokens minted
 * before it (`hf_` + 43 base64url) keep working: only hashes are compared.
 */
export function generateToken(): string {
  let random = '';
  while (random.length < TOKEN_RANDOM_CHARS) {
    for (const byte of randomBytes(TOKEN_DRAW_BYTES)) {
      if (byte >= BASE62_BYTE_LIMIT || random.length === TOKEN_RANDOM_CHARS) continue;
      random += BASE62_ALPHABET[byte % 62];
    }
  }
  return TOKEN_PREFIX + random + tokenChecksum(random);
}

/** The stored form of a token: lowercase hex SHA-256 of its UTF-8 bytes. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A token just created: the only moment its secret exists outside the caller's hands. */
export interface CreatedToken {
  readonly id: string;
  readonly tenant: string;
  readonly name: string;
  readonly admin: boolean;
  /** The user (by name) a user token acts for; `null` for service and run tokens. */
  readonly user: string | null;
  /** The run a run token acts for; `null` for service and user tokens. */
  readonly runId: string | null;
  /** The bearer token itself; only its hash is stored. */
  readonly token: string;
}

/**
 * Mints a token for run `runId` of `tenant` (the run-scoped transfer capability): the secret
 * is returned here only and stored as its hash. The runs layer calls this; it checks that the
 * run is bound and active first; `meta` may be a transaction.
 */
export async function issueRunToken(meta: Pick<MetadataRepositories, 'tokens'>, tenant: TenantScope, runId: string): Promise<CreatedToken> {
  const token = generateToken();
  const record = await meta.tokens.create({ tenantId: tenant.id, name: `run ${runId}`, hash: hashToken(token), admin: false, runId });
  return { id: record.id, tenant: tenant.name, name: record.name, admin: false, user: null, runId, token };
}

/** Tokens of every tenant (an operator's or an admin token's view). */
export class Tokens {
  constructor(
    private readonly meta: MetadataStore,
    /** Finds or creates a tenant by name. */
    private readonly tenant: (name: string) => Promise<TenantScope>,
  ) {}

  /** Creates a service token for tenant `tenant` (creating the tenant if it is missing); the result holds the token once. */
  async create(input: { tenant: string; name: string; admin: boolean }): Promise<CreatedToken> {
    const tenant = await this.tenant(input.tenant);
    const token = generateToken();
    const record = await this.meta.tokens.create({ tenantId: tenant.id, name: input.name, hash: hashToken(token), admin: input.admin });
    return { id: record.id, tenant: tenant.name, name: record.name, admin: record.admin, user: null, runId: null, token };
  }

  /**
   * Creates a token acting as the live user `user` of tenant `tenant` (never admin); the
   * result holds the token once. No such live user: `NOT_FOUND` (the tenant is not created).
   */
  async createForUser(input: { tenant: string; user: string; name?: string }): Promise<CreatedToken> {
    const tenant = await this.meta.tenants.findByName(input.tenant);
    const user = tenant === undefined ? undefined : await this.meta.users.findActive(tenant.id, input.user);
    if (tenant === undefined || user === undefined) {
      throw new NotFoundError(`no live user ${input.user} in tenant ${input.tenant}: add one with holdfast user add`, {
        data: { tenant: input.tenant, user: input.user },
      });
    }
    const token = generateToken();
    const name = input.name ?? `user ${user.name}`;
    const record = await this.meta.tokens.create({ tenantId: tenant.id, name, hash: hashToken(token), admin: false, userId: user.id });
    return { id: record.id, tenant: tenant.name, name: record.name, admin: false, user: user.name, runId: null, token };
  }

  /** Every token, live and revoked, newest first (never a secret: only hashes are stored, and not returned). */
  list(): Promise<TokenRecord[]> {
    return this.meta.tokens.list();
  }

  /** {@link list} a page at a time, by a keyset cursor (`[createdAt, id]`). */
  page(request: PageRequest = {}): Promise<Page<TokenRecord>> {
    return readPage(
      request,
      CREATED_KEY,
      (after, limit) => this.meta.tokens.list(after === undefined ? { limit } : { limit, after }),
      (t) => [t.createdAt, t.id],
    );
  }

  /** Revokes a token; false when there is no live token with this id. */
  revoke(id: string): Promise<boolean> {
    return this.meta.tokens.revoke(id);
  }

  /**
   * The principal of the live token whose hash is `tokenHash`, or `undefined`: a service
   * principal for service tokens, a user principal while its user is not revoked (a revoked
   * user's tokens resolve to nothing at once), a run principal with its run's bindings (also
   * after the run ended: the access policy refuses it then, so it sees 404 everywhere).
   */
  async principal(tokenHash: string): Promise<Principal | undefined> {
    const grant = await this.meta.tokens.findByHash(tokenHash);
    return grant === undefined ? undefined : principalOf(grant);
  }
}

function principalOf(grant: TokenGrant): Principal {
  const base = { tokenId: grant.id, tenantId: grant.tenantId, tenantName: grant.tenantName };
  if (grant.user !== null) return { kind: 'user', ...base, userId: grant.user.id, userName: grant.user.name, role: grant.user.role };
  if (grant.runId !== null) return { kind: 'run', ...base, runId: grant.runId, bindings: storedBindings(grant.run?.bindings ?? null) };
  return { kind: 'service', ...base, admin: grant.admin };
}

/** The bindings of a stored run, keeping only known scopes with string owners. */
function storedBindings(stored: Readonly<Record<string, unknown>> | null): RunBindings {
  const bindings: Record<string, string> = {};
  for (const scope of FOLDER_SCOPES) {
    const owner = stored?.[scope];
    if (typeof owner === 'string' && owner !== '') bindings[scope] = owner;
  }
  return bindings;
}
