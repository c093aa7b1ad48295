import type { Migration } from './migration.js';

/**
 * User collections and run bindings keyed by the user's immutable row id (issue 24), not by
 * the name people type: a name is reused once its user is revoked, an id never is. Nothing
 * changes shape; stored values move from name to id, so existing data keeps working:
 *
 * - a `user` collection's `owner_id` becomes the id of the tenant's live user of that name,
 *   else of the newest row of that name (a collection no user was ever named for stays as it
 *   is: no id equals it, so it is unreachable, as it already was to every token);
 * - a run's `bindings.user` becomes the id of the user of that name who was live when the run
 *   was created (so a run made for a since-revoked user stays bound to that revoked user and
 *   reaches nothing), else of the live one, else of the newest;
 * - a sandbox's sync state, made for its run's bindings, follows its run the same way (done
 *   first, while the run still holds the name).
 */
function ownersById(d: { userOf: (bindings: string) => string; setUser: (bindings: string, id: string) => string }): string[] {
  const ranked = (createdAt: string) => `ORDER BY CASE
      WHEN u.created_at <= ${createdAt} AND (u.revoked_at IS NULL OR u.revoked_at > ${createdAt}) THEN 0
      WHEN u.revoked_at IS NULL THEN 1
      ELSE 2 END, u.created_at DESC, u.id DESC`;
  const runUser = (bindings: string, tenant: string, createdAt: string) =>
    `(SELECT u.id FROM users u WHERE u.tenant_id = ${tenant} AND u.name = ${d.userOf(bindings)} ${ranked(createdAt)} LIMIT 1)`;
  const syncUser = `(SELECT u.id FROM users u JOIN runs r ON r.id = folder_sync_states.run_id
      WHERE u.tenant_id = folder_sync_states.tenant_id AND u.name = ${d.userOf('folder_sync_states.bindings')} ${ranked('r.created_at')} LIMIT 1)`;
  const collectionUser = `(SELECT u.id FROM users u
      WHERE u.tenant_id = folder_collections.tenant_id AND u.name = folder_collections.owner_id
      ORDER BY CASE WHEN u.revoked_at IS NULL THEN 0 ELSE 1 END, u.created_at DESC, u.id DESC LIMIT 1)`;
  return [
    `UPDATE folder_sync_states SET bindings = ${d.setUser('folder_sync_states.bindings', syncUser)}
  WHERE ${d.userOf('folder_sync_states.bindings')} IS NOT NULL AND ${syncUser} IS NOT NULL`,
    `UPDATE runs SET bindings = ${d.setUser('runs.bindings', runUser('runs.bindings', 'runs.tenant_id', 'runs.created_at'))}
  WHERE bindings IS NOT NULL AND ${d.userOf('runs.bindings')} IS NOT NULL
    AND ${runUser('runs.bindings', 'runs.tenant_id', 'runs.created_at')} IS NOT NULL`,
    `UPDATE folder_collections SET owner_id = ${collectionUser}
  WHERE scope = 'user' AND ${collectionUser} IS NOT NULL`,
  ];
}

const ownersSqlite = ownersById({
  userOf: (bindings) => `json_extract(${bindings}, '$.user')`,
  setUser: (bindings, id) => `json_set(${bindings}, '$.user', ${id})`,
});
const ownersPostgres = ownersById({
  userOf: (bindings) => `(${bindings}::jsonb ->> 'user')`,
  setUser: (bindings, id) => `jsonb_set(${bindings}::jsonb, '{user}', to_jsonb(${id}::text))::text`,
});

/** Version 11: `user_owners_by_id`. */
export const migration: Migration = { version: 11, name: 'user_owners_by_id', sqlite: ownersSqlite, postgres: ownersPostgres };
