import { describe, expect, it } from 'vitest';
import type { FolderScope } from '../model/folder-scopes.js';
import { parseRunBindings } from '../model/run-bindings.js';
import { canAccessFolder, type FolderAccessLookups, type FolderAction, type FolderTarget, type Principal } from './folder-access.js';

const TENANT = 'ten-acme';
const OTHER_TENANT = 'ten-globex';
const SCOPES: readonly FolderScope[] = ['task', 'agent', 'user', 'project'];
const ACTIONS: readonly FolderAction[] = ['read', 'write', 'purge-collection'];

/** The store as the lookups see it: ada, vic and rex (revoked) in acme; run-live is running, run-ended ended. */
const ACTIVE_USERS = new Set([`${TENANT}/ada`, `${TENANT}/vic`, `${OTHER_TENANT}/ada`]);
const ACTIVE_RUNS = new Set([`${TENANT}/run-live`, `${TENANT}/run-rex`, `${OTHER_TENANT}/run-live`]);
const lookups: FolderAccessLookups = {
  isUserActive: async (tenantId, userId) => ACTIVE_USERS.has(`${tenantId}/${userId}`),
  isRunActive: async (tenantId, runId) => ACTIVE_RUNS.has(`${tenantId}/${runId}`),
  liveUserId: async (tenantId, name) => (ACTIVE_USERS.has(`${tenantId}/${name}`) ? name : undefined),
};

const base = { tenantId: TENANT, tenantName: 'acme' };
const BOUND = { task: 'task-1', agent: 'agent-1', user: 'ada', project: 'proj-1' } as const;

/** Every principal kind of the matrix, by a name the table uses. */
const PRINCIPALS = {
  member: { kind: 'user', tokenId: 't-ada', ...base, userId: 'ada', userName: 'ada', role: 'member' },
  viewer: { kind: 'user', tokenId: 't-vic', ...base, userId: 'vic', userName: 'vic', role: 'viewer' },
  revokedUser: { kind: 'user', tokenId: 't-rex', ...base, userId: 'rex', userName: 'rex', role: 'member' },
  service: { kind: 'service', tokenId: 't-svc', ...base, admin: false },
  admin: { kind: 'service', tokenId: 't-adm', ...base, admin: true },
  boundRun: { kind: 'run', tokenId: 't-run', ...base, runId: 'run-live', bindings: BOUND },
  unboundRun: { kind: 'run', tokenId: 't-run0', ...base, runId: 'run-live', bindings: {} },
  endedRun: { kind: 'run', tokenId: 't-run2', ...base, runId: 'run-ended', bindings: BOUND },
  runOfRevokedUser: { kind: 'run', tokenId: 't-run3', ...base, runId: 'run-rex', bindings: { ...BOUND, user: 'rex' } },
  otherTenantService: { kind: 'service', tokenId: 't-o1', tenantId: OTHER_TENANT, tenantName: 'globex', admin: true },
  otherTenantUser: {
    kind: 'user',
    tokenId: 't-o2',
    tenantId: OTHER_TENANT,
    tenantName: 'globex',
    userId: 'ada',
    userName: 'ada',
    role: 'member',
  },
  otherTenantRun: { kind: 'run', tokenId: 't-o3', tenantId: OTHER_TENANT, tenantName: 'globex', runId: 'run-live', bindings: BOUND },
} satisfies Record<string, Principal>;
type Who = keyof typeof PRINCIPALS;

/** The owner of each scope's collections under test: the bound one, and another. */
const OWNERS: Record<FolderScope, { bound: string; other: string }> = {
  task: { bound: 'task-1', other: 'task-2' },
  agent: { bound: 'agent-1', other: 'agent-2' },
  user: { bound: 'ada', other: 'vic' },
  project: { bound: 'proj-1', other: 'proj-2' },
};

/**
 * The expected answer, written out as the rules say (DESIGN section 10, issue 12), not by
 * calling the code under test: `which` is the bound owner or another one of the scope.
 */
function expected(who: Who, scope: FolderScope, which: 'bound' | 'other', action: FolderAction): boolean {
  const shared = scope !== 'user';
  switch (who) {
    case 'service':
    case 'admin':
      return shared; // read, write and purge-collection on shared scopes; never a user collection
    case 'member':
      if (action === 'purge-collection') return false;
      return shared || OWNERS.user[which] === 'ada';
    case 'viewer':
      if (action === 'purge-collection') return false;
      if (shared) return action === 'read';
      return OWNERS.user[which] === 'vic';
    case 'boundRun':
      return action !== 'purge-collection' && which === 'bound';
    case 'revokedUser':
    case 'unboundRun':
    case 'endedRun':
    case 'otherTenantService':
    case 'otherTenantUser':
    case 'otherTenantRun':
      return false;
    case 'runOfRevokedUser':
      // Its shared bindings stay; the revoked user's collection does not (owner rex is bound, not ada).
      return action !== 'purge-collection' && which === 'bound' && shared;
  }
}

const CASES = (Object.keys(PRINCIPALS) as Who[]).flatMap((who) =>
  SCOPES.flatMap((scope) => (['bound', 'other'] as const).flatMap((which) => ACTIONS.map((action) => ({ who, scope, which, action })))),
);

describe('canAccessFolder: every principal kind × scope × owner × action', () => {
  it.each(CASES)('$who $action $scope ($which owner)', async ({ who, scope, which, action }) => {
    const principal: Principal = PRINCIPALS[who];
    const ownerId = who === 'runOfRevokedUser' && scope === 'user' && which === 'bound' ? 'rex' : OWNERS[scope][which];
    const collection: FolderTarget = { tenantId: TENANT, scope, ownerId };
    expect(await canAccessFolder(principal, collection, action, lookups)).toBe(expected(who, scope, which, action));
  });

  it("another tenant's collection is refused to every principal, even one whose ids all match", async () => {
    for (const principal of Object.values(PRINCIPALS) as Principal[]) {
      for (const scope of SCOPES) {
        for (const action of ACTIONS) {
          const collection = { tenantId: principal.tenantId === TENANT ? OTHER_TENANT : TENANT, scope, ownerId: OWNERS[scope].bound };
          expect(await canAccessFolder(principal, collection, action, lookups)).toBe(false);
        }
      }
    }
  });

  it('a principal resolved before its user was revoked or its run ended is refused at the next decision', async () => {
    const users = new Set(['ada']);
    const runs = new Set(['run-live']);
    const live: FolderAccessLookups = {
      isUserActive: async (_t, u) => users.has(u),
      isRunActive: async (_t, r) => runs.has(r),
      liveUserId: async (_t, name) => (users.has(name) ? name : undefined),
    };
    const ada = PRINCIPALS.member;
    const run = PRINCIPALS.boundRun;
    const task = { tenantId: TENANT, scope: 'task', ownerId: 'task-1' } as const;
    const adaFiles = { tenantId: TENANT, scope: 'user', ownerId: 'ada' } as const;
    expect(await canAccessFolder(ada, task, 'read', live)).toBe(true);
    expect(await canAccessFolder(run, adaFiles, 'write', live)).toBe(true);
    users.delete('ada');
    expect(await canAccessFolder(ada, task, 'read', live)).toBe(false);
    expect(await canAccessFolder(ada, adaFiles, 'read', live)).toBe(false);
    expect(await canAccessFolder(run, adaFiles, 'read', live)).toBe(false); // the run loses the revoked user's files
    expect(await canAccessFolder(run, task, 'write', live)).toBe(true);
    runs.delete('run-live');
    expect(await canAccessFolder(run, task, 'read', live)).toBe(false);
  });

  it('an empty or look-alike owner id never matches a missing binding', async () => {
    const run = PRINCIPALS.unboundRun;
    for (const ownerId of ['', 'undefined', 'null']) {
      expect(await canAccessFolder(run, { tenantId: TENANT, scope: 'task', ownerId }, 'read', lookups)).toBe(false);
    }
  });
});

describe('parseRunBindings', () => {
  it('keeps known scopes with owner ids and reads an empty object as no bindings', () => {
    expect(parseRunBindings({ task: 't-1', agent: 'a:1', user: 'ada@example.com', project: 'P_1.x' })).toEqual({
      task: 't-1',
      agent: 'a:1',
      user: 'ada@example.com',
      project: 'P_1.x',
    });
    expect(parseRunBindings({ task: undefined })).toBeUndefined();
    expect(parseRunBindings({})).toBeUndefined();
    expect(parseRunBindings(undefined)).toBeUndefined();
  });

  it.each([
    ['an array', ['task']],
    ['a string', 'task'],
    ['an unknown scope', { team: 'x' }],
    ['an empty owner', { task: '' }],
    ['a path', { task: '../x' }],
    ['a slash', { agent: 'a/b' }],
    ['a control character', { user: 'ada\n' }],
    ['a leading dot', { project: '.hidden' }],
    ['a number', { task: 7 }],
    ['an owner of 129 characters', { task: 'x'.repeat(129) }],
  ])('refuses %s with INVALID_INPUT', (_name, input) => {
    expect(() => parseRunBindings(input)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});
