import type { Migration } from './migration.js';

/**
 * Records of agent frameworks' sandboxes (issue 27), kept as rows rather than as files:
 *
 * - `sandbox_instances`: which provider sandbox (and snapshot) a framework resumes for a key of
 *   one tenant, with a `version` bumped by every write, so writers compare-and-set;
 * - `sandbox_snapshot_labels`: what a framework said about a checkpoint it asked for (its label,
 *   thread and run ids) and the workspace it belongs to, keyed by checkpoint id, so a restore
 *   needs the checkpoint id alone. Checkpoints are not referenced by a foreign key: retention may
 *   delete a checkpoint, its label row then names nothing and a restore of it is `NOT_FOUND`;
 * - `fenced_locks`: named locks of one tenant with a fencing `token` that only grows (a release
 *   keeps the row and its token), so a holder whose lock expired is refused by token.
 */
function sandboxInstanceTables(t: { text: string; int: string; strict: string }): string[] {
  return [
    `CREATE TABLE sandbox_instances (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  key ${t.text} NOT NULL,
  provider ${t.text} NOT NULL,
  provider_sandbox_id ${t.text} NOT NULL,
  latest_snapshot_id ${t.text},
  thread_id ${t.text} NOT NULL,
  latest_run_id ${t.text},
  updated_at ${t.int} NOT NULL,
  version ${t.int} NOT NULL CONSTRAINT sandbox_instances_version_check CHECK (version >= 1),
  written_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, key)
)${t.strict}`,
    `CREATE TABLE sandbox_snapshot_labels (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  checkpoint_id ${t.text} NOT NULL,
  workspace_id ${t.text} NOT NULL,
  label ${t.text},
  thread_id ${t.text},
  run_id ${t.text},
  sandbox_key ${t.text},
  created_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, checkpoint_id)
)${t.strict}`,
    `CREATE TABLE fenced_locks (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  name ${t.text} NOT NULL,
  holder ${t.text},
  token ${t.int} NOT NULL CONSTRAINT fenced_locks_token_check CHECK (token >= 1),
  expires_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, name)
)${t.strict}`,
  ];
}

const sqlite = sandboxInstanceTables({ text: 'TEXT', int: 'INTEGER', strict: ' STRICT' });
const postgres = sandboxInstanceTables({ text: 'text', int: 'bigint', strict: '' });

/** Version 13: `sandbox_instances_and_locks`. */
export const migration: Migration = { version: 13, name: 'sandbox_instances_and_locks', sqlite, postgres };
