import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { describeSnapshotCases } from './checkpoints.contract.js';
import { describeFolderSyncCases } from './folder-sync.contract.js';
import { describeFoldersCases } from './folders.contract.js';
import { describeGcCases } from './gc.contract.js';
import { describeIdPrefixCases } from './id-prefix.contract.js';
import {
  type ContractContext,
  createContractContext,
  type MetadataContractOptions,
  makeWorkspace,
  uniqueName,
} from './metadata-contract-support.contract.js';
import type { MetadataStore } from './metadata-store.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from './migrations.js';
import { describeObjectIndexCases } from './object-index.contract.js';
import { describePrincipalsCases } from './principals.contract.js';
import { describeRunsCases } from './runs.contract.js';
import { describeSandboxInstancesCases } from './sandbox-instances.contract.js';
import { describeUserOwnersMigration } from './user-owners.contract.js';

export type { MetadataContractOptions, MetadataTestDatabase } from './metadata-contract-support.contract.js';

/**
 * The shared suite every metadata dialect must pass. A driver's test file calls it with a
 * way to provision an empty database; the suite opens stores itself (through
 * `openMetadataStore`, the factory under test), several per database where a case needs
 * two processes' worth of connections. Assertions use error `code`s, never message text.
 */
export function describeMetadataContract(options: MetadataContractOptions): void {
  const ctx = createContractContext(options);
  describe(`metadata contract: ${options.name}`, () => {
    describeMigrationCases(ctx);
    describeWorkspaceCases(ctx);
    describeSnapshotCases(ctx);
    describeObjectIndexCases(ctx);
    describeGcCases(ctx);
    describeRunsCases(ctx);
    describePrincipalsCases(ctx);
    describeIdPrefixCases(ctx);
    describeFoldersCases(ctx);
    describeFolderSyncCases(ctx);
    describeUserOwnersMigration(ctx);
    describeSandboxInstancesCases(ctx);
  });
}

async function versionRows(store: MetadataStore): Promise<Array<{ version: number; n: number }>> {
  const { rows } = await sql<{ version: number; n: number }>`
    SELECT version, count(*) AS n FROM holdfast_schema_migrations GROUP BY version ORDER BY version`.execute(store.db);
  return rows;
}

const EXPECTED_VERSIONS = MIGRATIONS.map((migration) => ({ version: migration.version, n: 1 }));

function describeMigrationCases(ctx: ContractContext): void {
  describe('migrations', () => {
    it('a fresh database is migrated to the latest version, each version recorded once', async () => {
      const store = await (await ctx.freshDatabase()).open();
      expect(await store.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
      expect(store.dialect).toBe(ctx.options.name);
      expect(await versionRows(store)).toEqual(EXPECTED_VERSIONS);
    });

    it('reopening is idempotent and keeps the data', async () => {
      const database = await ctx.freshDatabase();
      const first = await database.open();
      const tenant = await first.tenants.create({ name: 'kept' });
      await first.close();
      const second = await database.open();
      expect(await second.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
      expect(await versionRows(second)).toEqual(EXPECTED_VERSIONS);
      expect(await second.tenants.get(tenant.id)).toEqual(tenant);
    });

    it('two stores opening the same fresh database at once both succeed', async () => {
      const database = await ctx.freshDatabase();
      const stores = await Promise.all([database.open(), database.open(), database.open()]);
      for (const store of stores) expect(await store.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
      expect(await versionRows(stores[0] as MetadataStore)).toEqual(EXPECTED_VERSIONS);
    });

    it('migration 5 drops the tenant-scoped receipts of version 4 (they could hold token secrets) and adds the new tables', async () => {
      const database = await ctx.freshDatabase();
      const store = await database.open();
      // Put the database back at version 4, with a receipt holding a plain-text token.
      const v4 = MIGRATIONS.find((m) => m.version === 4);
      await sql.raw('DROP TABLE idempotency_receipts').execute(store.db);
      await sql.raw('DROP TABLE upload_intents').execute(store.db);
      for (const statement of v4?.[store.dialect] ?? []) await sql.raw(statement).execute(store.db);
      await store.db.deleteFrom('holdfast_schema_migrations').where('version', '=', 5).execute();
      const tenant = await store.tenants.create({ name: uniqueName('receipts') });
      const secret = 'hf_plain-text-secret-of-version-4';
      await sql`INSERT INTO idempotency_keys (tenant_id, key, request_hash, status_code, response, created_at, finished_at)
        VALUES (${tenant.id}, ${'k'}, ${'a'.repeat(64)}, ${201}, ${JSON.stringify({ token: secret })}, ${1}, ${2})`.execute(store.db);
      await store.close();

      const upgraded = await database.open();
      expect(await upgraded.schemaVersion()).toBe(LATEST_SCHEMA_VERSION);
      await expect(sql.raw('SELECT * FROM idempotency_keys').execute(upgraded.db)).rejects.toBeDefined();
      expect(await upgraded.db.selectFrom('idempotency_receipts').selectAll().execute()).toEqual([]);
      expect(await upgraded.db.selectFrom('upload_intents').selectAll().execute()).toEqual([]);
    });

    it('a database newer than this build is refused with STORE_UNAVAILABLE naming both versions', async () => {
      const database = await ctx.freshDatabase();
      const store = await database.open();
      const future = LATEST_SCHEMA_VERSION + 1;
      await store.db
        .insertInto('holdfast_schema_migrations')
        .values({ version: future, name: 'from_the_future', applied_at: ctx.now() })
        .execute();
      await store.close();
      await expect(database.open()).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        data: { databaseVersion: future, codeVersion: LATEST_SCHEMA_VERSION },
      });
    });
  });
}

function describeWorkspaceCases(ctx: ContractContext): void {
  describe('tenants and workspaces', () => {
    const fixture = ctx.sharedFixture((database) => database.open());

    it('numbers come back as JS numbers', async () => {
      const store = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      const workspace = await store.workspaces.get(workspaceId);
      for (const value of [workspace.headVersion, workspace.createdAt, workspace.updatedAt]) expect(typeof value).toBe('number');
      const counted = await store.db
        .selectFrom('workspaces')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      expect(typeof counted.n).toBe('number');
      const { rows } = await sql<{
        big: unknown;
        total: unknown;
      }>`SELECT max(created_at) AS big, sum(head_version) AS total FROM workspaces`.execute(store.db);
      expect(typeof rows[0]?.big).toBe('number');
      expect(typeof rows[0]?.total).toBe('number');
    });

    it('a duplicate tenant name is ALREADY_EXISTS', async () => {
      const store = await fixture();
      const name = uniqueName('tenant');
      await store.tenants.create({ name });
      await expect(store.tenants.create({ name })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
      expect((await store.tenants.findByName(name))?.name).toBe(name);
    });

    it('a workspace name is unique per tenant, not across tenants', async () => {
      const store = await fixture();
      const a = await store.tenants.create({ name: uniqueName('a') });
      const b = await store.tenants.create({ name: uniqueName('b') });
      const first = await store.workspaces.create({ tenantId: a.id, name: 'main' });
      await expect(store.workspaces.create({ tenantId: a.id, name: 'main' })).rejects.toMatchObject({
        code: 'ALREADY_EXISTS',
        data: { table: 'workspaces' },
      });
      await expect(store.workspaces.create({ id: first.id, tenantId: b.id, name: 'other' })).rejects.toMatchObject({
        code: 'ALREADY_EXISTS',
      });
      const second = await store.workspaces.create({ tenantId: b.id, name: 'main' });
      expect(second.tenantId).toBe(b.id);
      expect((await store.workspaces.getByName(a.id, 'main')).id).toBe(first.id);
      expect((await store.workspaces.listByTenant(a.id)).map((w) => w.id)).toEqual([first.id]);
    });

    it('a new workspace has no head at version 0', async () => {
      const store = await fixture();
      const { workspaceId } = await makeWorkspace(store);
      expect(await store.workspaces.get(workspaceId)).toMatchObject({ headCheckpointId: null, headVersion: 0 });
    });

    it('unknown ids are NOT_FOUND, bad input is INVALID_INPUT', async () => {
      const store = await fixture();
      await expect(store.workspaces.get('no-such-workspace')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.workspaces.getByName('no-such-tenant', 'main')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.tenants.get('no-such-tenant')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect(await store.workspaces.find('no-such-workspace')).toBeUndefined();
      await expect(store.workspaces.create({ tenantId: 'no-such-tenant', name: 'x' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(store.tenants.create({ name: '' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    });
  });
}
