import type { Migration } from './migration.js';

/**
 * Principals beyond service tokens (issue 12): `users` of a tenant (member or viewer,
 * revocable; a name is unique among the tenant's live users, so a revoked name may be added
 * again as a new row that old tokens do not reach), tokens bound to a user or to a run (never
 * both, never admin), and a run's collection bindings (JSON, `NULL` when unbound) and the
 * moment it ended (`NULL` while active). Nullable columns: no existing row is rewritten.
 */
function principalsTables(t: { text: string; int: string; strict: string }): string[] {
  return [
    `CREATE TABLE users (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  name ${t.text} NOT NULL,
  role ${t.text} NOT NULL CONSTRAINT users_role_check CHECK (role IN ('member', 'viewer')),
  created_at ${t.int} NOT NULL,
  revoked_at ${t.int}
)${t.strict}`,
    'CREATE UNIQUE INDEX users_tenant_live_name_key ON users (tenant_id, name) WHERE revoked_at IS NULL',
    'CREATE INDEX users_tenant_name_idx ON users (tenant_id, name)',
    `ALTER TABLE tokens ADD COLUMN user_id ${t.text} REFERENCES users (id)`,
    `ALTER TABLE tokens ADD COLUMN run_id ${t.text} REFERENCES runs (id)
  CONSTRAINT tokens_owner_check CHECK ((user_id IS NULL OR run_id IS NULL) AND (admin = 0 OR (user_id IS NULL AND run_id IS NULL)))`,
    'CREATE INDEX tokens_user_idx ON tokens (user_id)',
    'CREATE INDEX tokens_run_idx ON tokens (run_id)',
    `ALTER TABLE runs ADD COLUMN bindings ${t.text}`,
    `ALTER TABLE runs ADD COLUMN ended_at ${t.int}`,
  ];
}

const principalsSqlite = principalsTables({ text: 'TEXT', int: 'INTEGER', strict: ' STRICT' });
const principalsPostgres = principalsTables({ text: 'text', int: 'bigint', strict: '' });

/** Version 8: `users_run_bindings_scoped_tokens`. */
export const migration: Migration = {
  version: 8,
  name: 'users_run_bindings_scoped_tokens',
  sqlite: principalsSqlite,
  postgres: principalsPostgres,
};
