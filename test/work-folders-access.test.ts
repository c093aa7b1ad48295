import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderRef } from '../src/folders/folders.js';
import { FOLDER_SCOPES, type FolderScope } from '../src/model/folder-scopes.js';
import type { FolderAction } from '../src/tenants/folder-access.js';
import { BACKENDS } from './support/backends.js';
import { type FolderAnswer, type FolderService, OTHER_TENANT, openFolderService, uploadHeaders } from './support/work-folders.js';

/** The owners of the four collections under test; the bound runs are bound to exactly these. */
const OWNERS: Readonly<Record<FolderScope, string>> = { task: 'task-7', agent: 'agent-7', user: 'alice', project: 'project-7' };
/** The file seeded in every collection, and the marker in its bytes that must never leak. */
const SECRET_PATH = 'private-notes.txt';
const marker = (scope: FolderScope) => `MARKER-${scope}-0f9e8d`;

/** Who asks, and what the policy grants them. */
interface Caller {
  readonly name: string;
  token: string;
  /** Whether `action` on `scope` is allowed; `'unauthorized'` when the token itself is dead. */
  readonly allowed: (scope: FolderScope, action: FolderAction) => boolean | 'unauthorized';
}

async function* chunksOf(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text);
}

const shared = (scope: FolderScope) => scope !== 'user';

describe.each(BACKENDS)('work folders: the authorization matrix over HTTP ($name)', (backendCase) => {
  let svc: FolderService;
  let endedRun: { runId: string; token: string };
  const callers: Caller[] = [
    // The user owning the user collection, a member.
    { name: 'alice', token: '', allowed: (_scope, action) => action !== 'purge-collection' },
    // Another member: the shared collections only.
    { name: 'bob', token: '', allowed: (scope, action) => action !== 'purge-collection' && shared(scope) },
    // A viewer: reads the shared collections only.
    { name: 'victor', token: '', allowed: (scope, action) => action === 'read' && shared(scope) },
    // A service token: the shared collections, and purging them; never a user collection.
    { name: 'service', token: '', allowed: (scope) => shared(scope) },
    // A running run bound to all four owners: reads and writes them, purges nothing.
    { name: 'run', token: '', allowed: (_scope, action) => action !== 'purge-collection' },
    // The token of a run bound the same way, after the run ended.
    { name: 'ended-run', token: '', allowed: () => false },
    // A revoked user: its tokens died with it.
    { name: 'revoked', token: '', allowed: () => 'unauthorized' },
    // Another tenant's service token.
    { name: 'other-tenant', token: '', allowed: () => false },
  ];
  const caller = (name: string): Caller => {
    const found = callers.find((c) => c.name === name);
    if (found === undefined) throw new Error(`no caller ${name}`);
    return found;
  };
  /** The row id of alice, the owner id of her user collection (the routes take her name). */
  let aliceId = '';
  const refOf = (scope: FolderScope): FolderRef => ({ tenantId: svc.tenantId, scope, ownerId: scope === 'user' ? aliceId : OWNERS[scope] });

  beforeAll(async () => {
    svc = await openFolderService(backendCase);
    caller('alice').token = await svc.addUser('alice', 'member');
    aliceId = await svc.userId('alice');
    caller('bob').token = await svc.addUser('bob', 'member');
    caller('victor').token = await svc.addUser('victor', 'viewer');
    caller('service').token = svc.serviceToken;
    caller('run').token = (await svc.addRun(OWNERS)).token;
    endedRun = await svc.addRun(OWNERS);
    caller('ended-run').token = endedRun.token;
    caller('revoked').token = await svc.addUser('carol', 'member');
    caller('other-tenant').token = svc.otherTenantToken;
    for (const scope of FOLDER_SCOPES) {
      await svc.hf.folders.write(refOf(scope), SECRET_PATH, chunksOf(marker(scope)), { operationId: `seed-${scope}` });
    }
  });
  afterAll(async () => {
    await svc?.close();
  });

  /** A denial says nothing: 404 NOT_FOUND (or 401 for a dead token) and not a byte of the collection. */
  const expectDenied = (answer: FolderAnswer, how: 'not-found' | 'unauthorized', what: string) => {
    expect(answer.status, what).toBe(how === 'not-found' ? 404 : 401);
    expect(answer.body.error.code, what).toBe(how === 'not-found' ? 'NOT_FOUND' : 'UNAUTHORIZED');
    const text = answer.bytes.toString('utf8');
    for (const scope of FOLDER_SCOPES) expect(text, what).not.toContain(marker(scope));
    expect(text, what).not.toContain(SECRET_PATH);
    expect(answer.headers.get('content-disposition'), what).toBeNull();
  };
  const check = (c: Caller, scope: FolderScope, action: FolderAction, answer: FolderAnswer, what: string): boolean => {
    const allowed = c.allowed(scope, action);
    if (allowed === true) {
      expect(answer.status, `${what}: ${answer.bytes.toString('utf8').slice(0, 300)}`).toBe(200);
      return true;
    }
    expectDenied(answer, allowed === 'unauthorized' ? 'unauthorized' : 'not-found', what);
    return false;
  };

  it('before the matrix: the ended run and the revoked user could reach the task collection; then the run ends and the user is revoked', async () => {
    for (const name of ['ended-run', 'revoked']) {
      const answer = await svc.request('GET', svc.route('task', OWNERS.task), { token: caller(name).token });
      expect(answer.status, name).toBe(200);
    }
    await svc.backend.meta.runs.end(endedRun.runId);
    expect(await svc.backend.meta.users.revoke(svc.tenantId, 'carol')).toBeDefined();
  });

  it('every route x every caller x every scope: status as the policy says, and no byte of a denied collection', async () => {
    for (const c of callers) {
      for (const scope of FOLDER_SCOPES) {
        const owner = OWNERS[scope];
        const at = `${c.name} on ${scope}/${owner}`;
        const token = c.token;

        const list = await svc.request('GET', svc.route(scope, owner), { token });
        if (check(c, scope, 'read', list, `${at}: list`)) {
          expect(list.body.files.map((f: { path: string }) => f.path)).toContain(SECRET_PATH);
        }
        const trash = await svc.request('GET', svc.route(scope, owner, '', { trash: 'true' }), { token });
        check(c, scope, 'read', trash, `${at}: list trash`);

        const download = await svc.request('GET', svc.route(scope, owner, '/content', { path: SECRET_PATH }), { token });
        if (check(c, scope, 'read', download, `${at}: download`)) expect(download.bytes.toString()).toBe(marker(scope));
        const ranged = await svc.request('GET', svc.route(scope, owner, '/content', { path: SECRET_PATH }), {
          token,
          headers: { range: 'bytes=0-3' },
        });
        if (c.allowed(scope, 'read') === true) expect(ranged.status, `${at}: range`).toBe(206);
        else check(c, scope, 'read', ranged, `${at}: range`);
        // A path that does not exist, or is invalid, is answered exactly like the denial too.
        const missing = await svc.request('GET', svc.route(scope, owner, '/content', { path: '../nope' }), { token });
        if (c.allowed(scope, 'read') === true) expect(missing.body.error.code, `${at}: bad path`).toBe('INVALID_PATH');
        else check(c, scope, 'read', missing, `${at}: bad path`);

        const upload = await svc.request('PUT', svc.route(scope, owner, '/content', { path: `by-${c.name}.txt` }), {
          token,
          headers: uploadHeaders(`up-${c.name}-${scope}`),
          body: Buffer.from(`written by ${c.name}`),
        });
        check(c, scope, 'write', upload, `${at}: upload`);

        const mkdir = await svc.request('POST', svc.route(scope, owner, '/operations'), {
          token,
          headers: { 'idempotency-key': `mkdir-${c.name}-${scope}` },
          body: { action: 'mkdir', path: `dir-${c.name}` },
        });
        check(c, scope, 'write', mkdir, `${at}: mkdir`);
        const remove = await svc.request('POST', svc.route(scope, owner, '/operations'), {
          token,
          headers: { 'idempotency-key': `rm-${c.name}-${scope}` },
          body: { action: 'delete', path: `dir-${c.name}` },
        });
        check(c, scope, 'write', remove, `${at}: delete`);
        const restoreUnknown = await svc.request('POST', svc.route(scope, owner, '/operations'), {
          token,
          headers: { 'idempotency-key': `restore-${c.name}-${scope}` },
          body: { action: 'restore', fileId: 'no-such-row' },
        });
        if (c.allowed(scope, 'write') === true) expect(restoreUnknown.status, `${at}: restore unknown`).toBe(404);
        else check(c, scope, 'write', restoreUnknown, `${at}: restore unknown`);
      }
    }
  });

  it('nothing a denied caller sent was written: each collection holds the seed and what allowed callers wrote', async () => {
    for (const scope of FOLDER_SCOPES) {
      const writers = callers.filter((c) => c.allowed(scope, 'write') === true).map((c) => c.name);
      const live = (await svc.hf.folders.list(refOf(scope), { limit: 1000 })).files.map((f) => f.path).sort();
      expect(live, scope).toEqual([SECRET_PATH, ...writers.map((w) => `by-${w}.txt`)].sort());
      const trashed = (await svc.hf.folders.list(refOf(scope), { trash: true, limit: 1000 })).files.map((f) => f.path).sort();
      expect(trashed, scope).toEqual(writers.map((w) => `dir-${w}`).sort());
    }
  });

  it("the tenant in the path must be the caller's own: another name is the same 404; another tenant reaches only its own, empty, collection", async () => {
    const alice = caller('alice').token;
    expectDenied(
      await svc.request('GET', svc.route('task', OWNERS.task, '', {}, OTHER_TENANT), { token: alice }),
      'not-found',
      'alice as globex',
    );
    expectDenied(
      await svc.request('GET', svc.route('task', OWNERS.task, '', {}, 'no-such-tenant'), { token: alice }),
      'not-found',
      'unknown',
    );
    const own = await svc.request('GET', svc.route('task', OWNERS.task, '', {}, OTHER_TENANT), { token: svc.otherTenantToken });
    expect(own.status).toBe(200);
    expect(own.body.files).toEqual([]);
    const unknownScope = await svc.request('GET', `/api/companies/acme/work-folders/secrets/${OWNERS.task}`, { token: alice });
    expectDenied(unknownScope, 'not-found', 'unknown scope');
  });

  it('DELETE of a whole collection: only the service token, never on the user collection; a denied DELETE leaves everything', async () => {
    for (const c of callers.filter((x) => x.name !== 'service')) {
      for (const scope of FOLDER_SCOPES) {
        check(
          c,
          scope,
          'purge-collection',
          await svc.request('DELETE', svc.route(scope, OWNERS[scope]), { token: c.token }),
          `${c.name} DELETE ${scope}`,
        );
      }
    }
    for (const scope of FOLDER_SCOPES) {
      expect(
        (await svc.hf.folders.list(refOf(scope))).files.map((f) => f.path),
        scope,
      ).toContain(SECRET_PATH);
    }
    const service = caller('service');
    for (const scope of FOLDER_SCOPES) {
      const answer = await svc.request('DELETE', svc.route(scope, OWNERS[scope]), { token: service.token });
      if (check(service, scope, 'purge-collection', answer, `service DELETE ${scope}`)) expect(answer.body.purged).toBeGreaterThan(0);
    }
    for (const scope of FOLDER_SCOPES) {
      const left = (await svc.hf.folders.list(refOf(scope))).files.map((f) => f.path);
      if (shared(scope)) expect(left, scope).toEqual([]);
      else expect(left, scope).toContain(SECRET_PATH);
    }
  });

  it("a reused name is another user: the new alex starts empty and reaches none of the old alex's files, nor does the old alex's run reach the new one's", async () => {
    const oldToken = await svc.addUser('alex', 'member');
    const oldId = await svc.userId('alex');
    const oldFiles: FolderRef = { tenantId: svc.tenantId, scope: 'user', ownerId: oldId };
    await svc.hf.folders.write(oldFiles, 'diary.txt', chunksOf('OLD-ALEX-SECRET'), { operationId: 'old-alex-diary' });
    await svc.hf.folders.write(oldFiles, 'gone.txt', chunksOf('OLD-ALEX-TRASHED'), { operationId: 'old-alex-gone' });
    await svc.hf.folders.remove(oldFiles, 'gone.txt', { operationId: 'old-alex-remove' });
    const oldRun = await svc.addRun({ user: 'alex', task: OWNERS.task });
    const before = await svc.request('GET', svc.route('user', 'alex'), { token: oldRun.token });
    expect(before.body.files.map((f: { path: string }) => f.path)).toEqual(['diary.txt']);

    expect(await svc.backend.meta.users.revoke(svc.tenantId, 'alex')).toBeDefined();
    const newToken = await svc.addUser('alex', 'viewer');
    const newId = await svc.userId('alex');
    expect(newId).not.toBe(oldId);
    const newFiles: FolderRef = { tenantId: svc.tenantId, scope: 'user', ownerId: newId };
    const leaks = (answer: FolderAnswer) => /OLD-ALEX|NEW-ALEX/.test(answer.bytes.toString('utf8'));

    // The new alex: an empty folder, live and trash, and no route to the old one's bytes.
    for (const query of [{}, { trash: 'true' }]) {
      const own = await svc.request('GET', svc.route('user', 'alex', '', query), { token: newToken });
      expect([own.status, own.body.files], JSON.stringify(query)).toEqual([200, []]);
    }
    for (const route of [
      svc.route('user', 'alex', '/content', { path: 'diary.txt' }),
      svc.route('user', oldId),
      svc.route('user', oldId, '/content', { path: 'diary.txt' }),
      svc.route('user', oldId, '', { trash: 'true' }),
    ]) {
      const answer = await svc.request('GET', route, { token: newToken });
      expect([answer.status, answer.body.error?.code], route).toEqual([404, 'NOT_FOUND']);
      expect(leaks(answer), route).toBe(false);
    }
    const whoami = await svc.request('GET', '/api/whoami', { token: newToken });
    expect(whoami.body).toMatchObject({ kind: 'user', user: 'alex', userId: newId, role: 'viewer' });
    expect((await svc.request('GET', svc.route('user', 'alex'), { token: oldToken })).status).toBe(401);

    // The new alex writes; the old alex's run, bound to the revoked id, reaches neither folder by any name.
    const upload = await svc.request('PUT', svc.route('user', 'alex', '/content', { path: 'mine.txt' }), {
      token: newToken,
      headers: uploadHeaders('new-alex-mine'),
      body: Buffer.from('NEW-ALEX-SECRET'),
    });
    expect(upload.status).toBe(200);
    expect((await svc.hf.folders.list(newFiles)).files.map((f) => f.path)).toEqual(['mine.txt']);
    for (const route of [
      svc.route('user', 'alex'),
      svc.route('user', 'alex', '/content', { path: 'mine.txt' }),
      svc.route('user', oldId),
      svc.route('user', oldId, '/content', { path: 'diary.txt' }),
      svc.route('user', newId),
    ]) {
      const answer = await svc.request('GET', route, { token: oldRun.token });
      expect([answer.status, answer.body.error?.code], route).toEqual([404, 'NOT_FOUND']);
      expect(leaks(answer), route).toBe(false);
    }
    const write = await svc.request('PUT', svc.route('user', 'alex', '/content', { path: 'planted.txt' }), {
      token: oldRun.token,
      headers: uploadHeaders('old-run-plant'),
      body: Buffer.from('planted'),
    });
    expect([write.status, write.body.error?.code]).toEqual([404, 'NOT_FOUND']);
    expect((await svc.hf.folders.list(newFiles)).files.map((f) => f.path)).toEqual(['mine.txt']);
    // Its shared binding still works: only the user binding died with the user.
    expect((await svc.request('GET', svc.route('task', OWNERS.task), { token: oldRun.token })).status).toBe(200);
    // The old files stay stored under the revoked id, for the record.
    expect((await svc.hf.folders.list(oldFiles)).files.map((f) => f.path)).toEqual(['diary.txt']);
  });
});
