import type { Migration } from './migration.js';
import { ID64 } from './sql-checks.js';

/**
 * Runs (DESIGN section 9) and auth. Deployments are immutable and content-addressed per
 * tenant; a channel names the active one. A run owns one workspace and at most one sandbox;
 * its lease columns fence every write: claiming bumps `lease_epoch` in one UPDATE, and every
 * head move re-checks it under the row lock. Tokens are stored as SHA-256 hashes only.
 */
const LEASE_STATE = `lease_state IN ('free', 'held', 'release_recovery_required')`;
const TURN_STATUS = `status IN ('running', 'completed', 'failed')`;
const EVENT_STATUS = `status IN ('ok', 'failed')`;

function runsTables(t: { text: string; int: string; serial: string; strict: string }): string[] {
  return [
    `CREATE TABLE deployments (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  id ${t.text} NOT NULL CONSTRAINT deployments_id_check CHECK (${ID64('id')}),
  spec ${t.text} NOT NULL,
  created_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, id)
)${t.strict}`,
    `CREATE TABLE channels (
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  name ${t.text} NOT NULL,
  deployment_id ${t.text} NOT NULL,
  version ${t.int} NOT NULL CONSTRAINT channels_version_check CHECK (version >= 1),
  updated_at ${t.int} NOT NULL,
  PRIMARY KEY (tenant_id, name),
  FOREIGN KEY (tenant_id, deployment_id) REFERENCES deployments (tenant_id, id)
)${t.strict}`,
    `CREATE TABLE runs (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  workspace_id ${t.text} NOT NULL CONSTRAINT runs_workspace_key UNIQUE REFERENCES workspaces (id),
  channel ${t.text},
  deployment_id ${t.text} NOT NULL,
  sandbox_provider ${t.text},
  sandbox_id ${t.text},
  lease_state ${t.text} NOT NULL DEFAULT 'free' CONSTRAINT runs_lease_state_check CHECK (${LEASE_STATE}),
  lease_epoch ${t.int} NOT NULL DEFAULT 0 CONSTRAINT runs_lease_epoch_check CHECK (lease_epoch >= 0),
  lease_owner ${t.text},
  lease_expires_at ${t.int},
  lease_taken_from ${t.text},
  lease_error ${t.text},
  turn_count ${t.int} NOT NULL DEFAULT 0,
  created_at ${t.int} NOT NULL,
  updated_at ${t.int} NOT NULL,
  FOREIGN KEY (tenant_id, deployment_id) REFERENCES deployments (tenant_id, id),
  CONSTRAINT runs_held_owner_check CHECK ((lease_state = 'held') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
)${t.strict}`,
    'CREATE INDEX runs_tenant_created_idx ON runs (tenant_id, created_at)',
    `CREATE TABLE turns (
  id ${t.text} PRIMARY KEY NOT NULL,
  run_id ${t.text} NOT NULL REFERENCES runs (id),
  seq ${t.int} NOT NULL,
  epoch ${t.int} NOT NULL,
  owner ${t.text} NOT NULL,
  status ${t.text} NOT NULL CONSTRAINT turns_status_check CHECK (${TURN_STATUS}),
  checkpoint_id ${t.text},
  error ${t.text},
  result ${t.text},
  started_at ${t.int} NOT NULL,
  finished_at ${t.int},
  CONSTRAINT turns_run_seq_key UNIQUE (run_id, seq),
  CONSTRAINT turns_finished_check CHECK ((status = 'running') = (finished_at IS NULL)),
  CONSTRAINT turns_completed_checkpoint_check CHECK (status <> 'completed' OR checkpoint_id IS NOT NULL)
)${t.strict}`,
    `CREATE TABLE run_events (
  id ${t.serial},
  run_id ${t.text} NOT NULL REFERENCES runs (id),
  at ${t.int} NOT NULL,
  kind ${t.text} NOT NULL,
  step ${t.text} NOT NULL,
  status ${t.text} NOT NULL CONSTRAINT run_events_status_check CHECK (${EVENT_STATUS}),
  duration_ms ${t.int},
  data ${t.text}
)${t.strict}`,
    'CREATE INDEX run_events_run_idx ON run_events (run_id, id)',
    `CREATE TABLE tokens (
  id ${t.text} PRIMARY KEY NOT NULL,
  tenant_id ${t.text} NOT NULL REFERENCES tenants (id),
  hash ${t.text} NOT NULL CONSTRAINT tokens_hash_key UNIQUE CONSTRAINT tokens_hash_check CHECK (${ID64('hash')}),
  name ${t.text} NOT NULL,
  admin ${t.int} NOT NULL CONSTRAINT tokens_admin_check CHECK (admin IN (0, 1)),
  created_at ${t.int} NOT NULL,
  revoked_at ${t.int}
)${t.strict}`,
  ];
}

const runsSqlite = runsTables({ text: 'TEXT', int: 'INTEGER', serial: 'INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL', strict: ' STRICT' });
const runsPostgres = runsTables({ text: 'text', int: 'bigint', serial: 'bigserial PRIMARY KEY', strict: '' });

/** Version 3: `runs_deployments_leases_tokens`. */
export const migration: Migration = { version: 3, name: 'runs_deployments_leases_tokens', sqlite: runsSqlite, postgres: runsPostgres };
