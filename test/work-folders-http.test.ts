import { createHash } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FolderEntry } from '../src/folders/folders.js';
import { BACKENDS } from './support/backends.js';
import { type FolderService, openFolderService, uploadHeaders } from './support/work-folders.js';

/** The file limit of this service: small, so the 413 cases send little. */
const MAX_FILE_BYTES = 256 * 1024;
/** Files of the directory deleted and restored as one unit. */
const TREE_FILES = 1000;
/** Uploads in flight at once while the tree is built. */
const UPLOAD_CONCURRENCY = 16;
/** Paths every route must refuse with INVALID_PATH (never normalised). */
const BAD_PATHS = ['../secret', '/absolute', 'a/../../x', 'a//b', 'a\\b', 'a\u0000b', '.holdfast/x'];

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

describe.each(BACKENDS)('work folders over HTTP ($name)', (backendCase) => {
  let svc: FolderService;
  let token: string;
  const OWNER = 'task-1';

  beforeAll(async () => {
    svc = await openFolderService(backendCase, { maxFileBytes: MAX_FILE_BYTES });
    token = svc.serviceToken;
  });
  afterAll(async () => {
    await svc?.close();
  });

  const put = (path: string, body: Buffer | string, key: string, extra: Record<string, string> = {}, owner = OWNER) =>
    svc.request('PUT', svc.route('task', owner, '/content', { path }), {
      token,
      headers: uploadHeaders(key, extra),
      body: Buffer.from(body),
    });
  const get = (path: string, headers: Record<string, string> = {}, owner = OWNER) =>
    svc.request('GET', svc.route('task', owner, '/content', { path }), { token, headers });
  const operate = (body: unknown, key: string, owner = OWNER) =>
    svc.request('POST', svc.route('task', owner, '/operations'), { token, headers: { 'idempotency-key': key }, body });
  const listAll = async (owner: string, trash = false): Promise<FolderEntry[]> => {
    const files: FolderEntry[] = [];
    let cursor: string | null = null;
    do {
      const query: Record<string, string> = { limit: '1000', ...(trash ? { trash: 'true' } : {}), ...(cursor === null ? {} : { cursor }) };
      const page = await svc.request('GET', svc.route('task', owner, '', query), { token });
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      files.push(...page.body.files);
      cursor = page.body.nextCursor;
    } while (cursor !== null);
    return files;
  };

  it('round trip: upload with metadata, list, download with the safe headers, one Range (206) and an unsatisfiable one (416)', async () => {
    const content = Buffer.from('<html><script>alert(1)</script></html>\n');
    const path = 'docs/we"ird; name\u00e9.html';
    const up = await put(path, content, 'rt-1', {
      'x-file-content-type': 'text/html',
      'x-file-executable': 'true',
      'x-file-sha256': sha256(content).toUpperCase(),
    });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    expect(up.body).toMatchObject({
      applied: true,
      entry: {
        path,
        kind: 'file',
        size: content.length,
        sha256: sha256(content),
        executable: true,
        contentType: 'text/html',
        deletedAt: null,
      },
    });

    const page = await svc.request('GET', svc.route('task', OWNER), { token });
    expect(page.status).toBe(200);
    expect(page.body.files.map((f: FolderEntry) => `${f.kind}:${f.path}`)).toEqual(['directory:docs', `file:${path}`]);
    expect(page.body.nextCursor).toBeNull();
    expect(typeof page.body.lastOperationAt).toBe('number');

    const down = await get(path);
    expect(down.status).toBe(200);
    expect(down.bytes.equals(content)).toBe(true);
    expect(Object.fromEntries(down.headers)).toMatchObject({
      'cache-control': 'private, no-store',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      'content-type': 'text/html',
      'content-length': String(content.length),
      'accept-ranges': 'bytes',
      'x-file-sha256': sha256(content),
      'x-file-executable': 'true',
      etag: `"${sha256(content)}"`,
    });
    expect(down.headers.get('content-disposition')).toBe(
      `attachment; filename="we_ird__name_.html"; filename*=UTF-8''we%22ird%3B%20name%C3%A9.html`,
    );

    const middle = await get(path, { range: 'bytes=6-13' });
    expect(middle.status).toBe(206);
    expect(middle.bytes.equals(content.subarray(6, 14))).toBe(true);
    expect(middle.headers.get('content-range')).toBe(`bytes 6-13/${content.length}`);
    expect(middle.headers.get('content-length')).toBe('8');
    expect(middle.headers.get('content-security-policy')).toBe("sandbox; default-src 'none'");
    const suffix = await get(path, { range: 'bytes=-8' });
    expect(suffix.status).toBe(206);
    expect(suffix.bytes.equals(content.subarray(-8))).toBe(true);
    const open = await get(path, { range: 'bytes=30-' });
    expect(open.status).toBe(206);
    expect(open.bytes.equals(content.subarray(30))).toBe(true);
    expect(open.headers.get('content-range')).toBe(`bytes 30-${content.length - 1}/${content.length}`);

    const past = await get(path, { range: `bytes=${content.length}-` });
    expect(past.status).toBe(416);
    expect(past.body.error.code).toBe('RANGE_NOT_SATISFIABLE');
    expect(past.headers.get('content-range')).toBe(`bytes */${content.length}`);
    // Several ranges are not served as multipart: the whole file comes back.
    const several = await get(path, { range: 'bytes=0-1,4-5' });
    expect(several.status).toBe(200);
    expect(several.bytes.equals(content)).toBe(true);
  });

  it('an empty file round-trips; a body that is not application/octet-stream is 415; a missing Idempotency-Key is 400', async () => {
    const empty = await put('empty', '', 'empty-1');
    expect(empty.status, JSON.stringify(empty.body)).toBe(200);
    expect(empty.body.entry).toMatchObject({ size: 0, sha256: sha256(''), executable: false, contentType: null });
    const down = await get('empty');
    expect(down.status).toBe(200);
    expect(down.bytes.length).toBe(0);
    expect(down.headers.get('content-type')).toBe('application/octet-stream');

    const json = await svc.request('PUT', svc.route('task', OWNER, '/content', { path: 'j' }), {
      token,
      headers: { 'idempotency-key': 'json-1' },
      body: { not: 'raw' },
    });
    expect(json.status).toBe(415);
    expect(json.body.error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const noKey = await svc.request('PUT', svc.route('task', OWNER, '/content', { path: 'k' }), {
      token,
      headers: { 'content-type': 'application/octet-stream' },
      body: Buffer.from('x'),
    });
    expect(noKey.status).toBe(400);
    expect(noKey.body.error.code).toBe('INVALID_INPUT');
    const noOpKey = await svc.request('POST', svc.route('task', OWNER, '/operations'), { token, body: { action: 'mkdir', path: 'm' } });
    expect(noOpKey.status).toBe(400);
    expect(noOpKey.body.error.code).toBe('INVALID_INPUT');
    expect((await get('j')).status).toBe(404);
    expect((await get('k')).status).toBe(404);
  });

  it('an older write replayed with its old Idempotency-Key after a newer one keeps the newer content; the key reused for other content is 409', async () => {
    expect((await put('shared.txt', 'old', 'w-old')).body.applied).toBe(true);
    expect((await put('shared.txt', 'new', 'w-new')).body.applied).toBe(true);
    const replay = await put('shared.txt', 'old', 'w-old');
    expect(replay.status).toBe(200);
    expect(replay.body.applied).toBe(false);
    expect((await get('shared.txt')).bytes.toString()).toBe('new');

    const reused = await put('shared.txt', 'something else', 'w-new');
    expect(reused.status).toBe(409);
    expect(reused.body.error.code).toBe('CONFLICT');
    expect((await get('shared.txt')).bytes.toString()).toBe('new');
    // An operation key reused for another action is a conflict too.
    const other = await operate({ action: 'delete', path: 'shared.txt' }, 'w-new');
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('CONFLICT');
    expect((await get('shared.txt')).bytes.toString()).toBe('new');
  });

  it('a wrong X-File-SHA256 is 409 and publishes nothing (nor replaces what was there)', async () => {
    const wrong = await put('checked.bin', 'payload', 'sha-1', { 'x-file-sha256': sha256('something else') });
    expect(wrong.status).toBe(409);
    expect(wrong.body.error.code).toBe('CONFLICT');
    expect((await get('checked.bin')).status).toBe(404);
    expect((await put('checked.bin', 'first', 'sha-2')).status).toBe(200);
    const again = await put('checked.bin', 'second', 'sha-3', { 'x-file-sha256': sha256('not second') });
    expect(again.status).toBe(409);
    expect((await get('checked.bin')).bytes.toString()).toBe('first');
  });

  it('an upload over the file limit is 413 LIMIT_EXCEEDED and not published, declared or chunked', async () => {
    const big = Buffer.alloc(MAX_FILE_BYTES + 1, 0x61);
    const declared = await put('big.bin', big, 'big-1');
    expect(declared.status).toBe(413);
    expect(declared.body.error.code).toBe('LIMIT_EXCEEDED');
    const chunked = await svc.request('PUT', svc.route('task', OWNER, '/content', { path: 'big.bin' }), {
      token,
      headers: uploadHeaders('big-2'),
      body: new ReadableStream({
        start(controller) {
          for (let sent = 0; sent < MAX_FILE_BYTES * 2; sent += 64 * 1024) controller.enqueue(new Uint8Array(64 * 1024).fill(0x62));
          controller.close();
        },
      }),
    });
    expect(chunked.status).toBe(413);
    expect(chunked.body.error.code).toBe('LIMIT_EXCEEDED');
    expect((await get('big.bin')).status).toBe(404);
    const exact = await put('big.bin', big.subarray(0, MAX_FILE_BYTES), 'big-3');
    expect(exact.status, JSON.stringify(exact.body)).toBe(200);
    expect(exact.body.entry.size).toBe(MAX_FILE_BYTES);
  });

  it('an upload cut off mid-body is not published, and an existing file keeps its content', async () => {
    const cut = (path: string, key: string) =>
      new Promise<void>((resolve) => {
        const url = new URL(svc.route('task', OWNER, '/content', { path }), svc.server.url);
        const request = http.request(url, {
          method: 'PUT',
          agent: false,
          headers: { authorization: `Bearer ${token}`, ...uploadHeaders(key), 'content-length': String(100_000) },
        });
        request.on('error', () => resolve());
        request.on('response', () => resolve());
        request.write(Buffer.alloc(40_000, 0x63), () => {
          setTimeout(() => {
            request.destroy();
            resolve();
          }, 100);
        });
      });
    await cut('cut.bin', 'cut-1');
    expect((await put('kept.bin', 'kept', 'cut-2')).status).toBe(200);
    await cut('kept.bin', 'cut-3');
    // Give the server the moment it needs to see the reset and abandon the write.
    await sleep(300);
    expect((await get('cut.bin')).status).toBe(404);
    expect((await get('kept.bin')).bytes.toString()).toBe('kept');
    // The interrupted operation's key published nothing, so a retry with it writes.
    const retry = await put('cut.bin', 'whole', 'cut-1');
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    expect(retry.body.applied).toBe(true);
    expect((await get('cut.bin')).bytes.toString()).toBe('whole');
  });

  it('bad paths are 400 INVALID_PATH on every route that takes one, and nothing is written', async () => {
    const owner = 'bad-paths';
    for (const [i, bad] of BAD_PATHS.entries()) {
      const answers = [
        await get(bad, {}, owner),
        await put(bad, 'x', `bad-put-${i}`, {}, owner),
        await operate({ action: 'mkdir', path: bad }, `bad-mkdir-${i}`, owner),
        await operate({ action: 'delete', path: bad }, `bad-delete-${i}`, owner),
      ];
      for (const answer of answers) {
        expect(answer.status, `${JSON.stringify(bad)}: ${JSON.stringify(answer.body)}`).toBe(400);
        expect(answer.body.error.code).toBe('INVALID_PATH');
      }
    }
    expect(await listAll(owner)).toEqual([]);
    expect(await listAll(owner, true)).toEqual([]);
  });

  it(`deletes a directory of ${TREE_FILES} files as one unit and restores exactly it; a path recreated meanwhile blocks the restore`, async () => {
    const owner = 'tree';
    const names = Array.from({ length: TREE_FILES }, (_, i) => `dir/sub${i % 10}/f${i}.txt`);
    for (let i = 0; i < names.length; i += UPLOAD_CONCURRENCY) {
      const batch = names.slice(i, i + UPLOAD_CONCURRENCY);
      const answers = await Promise.all(batch.map((name) => put(name, `content of ${name}`, `tree-${name}`, {}, owner)));
      for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    }
    const before = await listAll(owner);
    expect(before.length).toBe(TREE_FILES + 11); // the files, dir and its ten subdirectories

    const removed = await operate({ action: 'delete', path: 'dir' }, 'tree-delete', owner);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(removed.body).toMatchObject({ action: 'delete', applied: true, removed: TREE_FILES + 11 });
    expect(await listAll(owner)).toEqual([]);
    const trash = await listAll(owner, true);
    expect(trash.length).toBe(TREE_FILES + 11);
    const dirRow = trash.find((e) => e.path === 'dir');
    expect(dirRow?.kind).toBe('directory');

    // One path live again: the restore is refused and changes nothing.
    expect((await put('dir/sub3/f3.txt', 'recreated', 'tree-recreate', {}, owner)).status).toBe(200);
    const refused = await operate({ action: 'restore', fileId: dirRow?.id }, 'tree-restore-1', owner);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('CONFLICT');
    expect((await listAll(owner)).map((e) => e.path)).toEqual(['dir', 'dir/sub3', 'dir/sub3/f3.txt']);
    expect((await listAll(owner, true)).length).toBe(TREE_FILES + 11);

    // Out of the way again (into the trash as its own unit), the restore brings back the same rows.
    expect((await operate({ action: 'delete', path: 'dir' }, 'tree-delete-2', owner)).status).toBe(200);
    const restored = await operate({ action: 'restore', fileId: dirRow?.id }, 'tree-restore-2', owner);
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body).toMatchObject({ action: 'restore', applied: true, restored: TREE_FILES + 11 });
    const after = await listAll(owner);
    const shape = (rows: FolderEntry[]) => rows.map((e) => [e.id, e.path, e.kind, e.sha256]).sort();
    expect(shape(after)).toEqual(shape(before));
    expect((await get('dir/sub7/f997.txt', {}, owner)).bytes.toString()).toBe('content of dir/sub7/f997.txt');
    // The replayed restore is a no-op.
    const replay = await operate({ action: 'restore', fileId: dirRow?.id }, 'tree-restore-2', owner);
    expect(replay.body).toMatchObject({ applied: false });
  });

  it('mkdir, purge of a trashed row, and DELETE of the whole collection', async () => {
    const owner = 'ops';
    const made = await operate({ action: 'mkdir', path: 'a/b' }, 'ops-1', owner);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(made.body).toMatchObject({ action: 'mkdir', applied: true, entry: { path: 'a/b', kind: 'directory' } });
    expect((await put('a/b/c.txt', 'c', 'ops-2', {}, owner)).status).toBe(200);
    expect((await operate({ action: 'delete', path: 'a/b/c.txt' }, 'ops-3', owner)).body.removed).toBe(1);
    const [trashed] = await listAll(owner, true);
    const purged = await operate({ action: 'purge', fileId: trashed?.id }, 'ops-4', owner);
    expect(purged.body).toMatchObject({ action: 'purge', applied: true, purged: 1 });
    expect(await listAll(owner, true)).toEqual([]);
    const unknown = await operate({ action: 'frobnicate', path: 'a' }, 'ops-5', owner);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe('INVALID_INPUT');

    const gone = await svc.request('DELETE', svc.route('task', owner), { token });
    expect(gone.status, JSON.stringify(gone.body)).toBe(200);
    expect(gone.body.purged).toBe(2);
    expect(await listAll(owner)).toEqual([]);
    expect((await svc.request('DELETE', svc.route('task', owner), { token })).body.purged).toBe(0);
  });

  it('the OpenAPI document has every work-folder route with its parameters, headers, bodies and statuses', async () => {
    const doc = (await svc.request('GET', '/v1/openapi.json', { token })).body;
    const base = '/api/companies/{companyId}/work-folders/{scope}/{ownerId}';
    expect(Object.keys(doc.paths[base])).toEqual(['get', 'delete']);
    expect(Object.keys(doc.paths[`${base}/content`])).toEqual(['get', 'put']);
    expect(Object.keys(doc.paths[`${base}/operations`])).toEqual(['post']);
    const params = (op: { parameters: { name: string; in: string; required: boolean }[] }) =>
      op.parameters.map((p) => `${p.in}:${p.name}${p.required ? '!' : ''}`);
    expect(params(doc.paths[base].get)).toEqual([
      'path:companyId!',
      'path:scope!',
      'path:ownerId!',
      'query:trash',
      'query:cursor',
      'query:limit',
    ]);
    const upload = doc.paths[`${base}/content`].put;
    expect(params(upload)).toEqual([
      'path:companyId!',
      'path:scope!',
      'path:ownerId!',
      'query:path!',
      // Its Content-Type is the request body's media type, not a parameter (OpenAPI ignores one).
      'header:Idempotency-Key!',
      'header:X-File-Content-Type',
      'header:X-File-Executable',
      'header:X-File-SHA256',
      'header:X-File-Replace-Kind',
    ]);
    expect(Object.keys(upload.requestBody.content)).toEqual(['application/octet-stream']);
    expect(Object.keys(upload.responses)).toEqual(['200', '400', '401', '404', '409', '413', '415', '500', '503', '507']);
    expect(upload.responses['200'].content['application/json'].schema.properties.entry).toBeDefined();
    const download = doc.paths[`${base}/content`].get;
    expect(params(download)).toContain('header:Range');
    expect(Object.keys(download.responses)).toEqual(['200', '206', '400', '401', '404', '416', '500', '503']);
    expect(download.responses['200'].headers['Content-Security-Policy']).toBeDefined();
    const ops = doc.paths[`${base}/operations`].post;
    expect(params(ops)).toContain('header:Idempotency-Key!');
    expect(ops.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/FolderOperation' });
    expect(doc.components.schemas.FolderEntry.required).toEqual(
      expect.arrayContaining(['id', 'path', 'kind', 'size', 'sha256', 'executable', 'contentType', 'updatedAt', 'deletedAt']),
    );
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toContain('RANGE_NOT_SATISFIABLE');
  });
});
