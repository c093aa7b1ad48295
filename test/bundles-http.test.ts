import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compress as zstdCompress } from 'zstd-napi';
import { BUNDLE_WORKSPACE } from '../src/index.js';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { pemBlock } from './support/secret-samples.js';
import { openTestService, type TestService } from './support/service.js';

/** One raw ustar entry, written by hand so that archives no tar tool would make (`../x`, `/etc/x`) can be sent. */
interface RawEntry {
  readonly path: string;
  readonly type?: '0' | '2' | '3' | '5' | 'x' | 'L';
  readonly body?: string;
  readonly linkpath?: string;
  readonly mode?: number;
}

function header(entry: RawEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  const put = (value: string, offset: number, length: number) => h.write(value, offset, length, 'utf8');
  const octal = (n: number, length: number) => `${n.toString(8).padStart(length - 1, '0')}\0`;
  put(entry.path, 0, 100);
  put(octal(entry.mode ?? (entry.type === '5' ? 0o755 : 0o644), 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(946684800, 12), 136, 12);
  put('        ', 148, 8);
  put(entry.type ?? '0', 156, 1);
  put(entry.linkpath ?? '', 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const byte of h) sum += byte;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

/** A tar archive of `entries`, ended by two zero blocks. */
function tarOf(entries: readonly RawEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    parts.push(header(e, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

describe('bundle uploads over HTTP (local-disk + sqlite, bwrap)', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await openTestService(BACKENDS[0] as BackendCase);
  });
  afterAll(async () => {
    await service.close();
  });

  const upload = async (body: Buffer, headers: Record<string, string> = {}) => {
    const response = await service.app.request('/v1/bundles', {
      method: 'POST',
      headers: { authorization: `Bearer ${service.token}`, 'content-type': 'application/x-tar', ...headers },
      body,
    });
    return {
      status: response.status,
      body: (await response.json()) as {
        rootTree: string;
        files: number;
        bytes: number;
        error?: { code: string; data: Record<string, unknown> };
      },
    };
  };
  const bundleLog = async () => service.hf.snapshots.log(BUNDLE_WORKSPACE);

  const good = [
    { path: 'bin/', type: '5' as const },
    { path: 'bin/agent.sh', body: '#!/bin/sh\necho hi\n', mode: 0o755 },
    { path: './skills/a.md', body: '# a\n' },
    { path: 'latest', type: '2' as const, linkpath: 'skills/a.md' },
  ];

  it('an upload answers the bundle record; the same content again is the same record; a deployment takes it and shows its size', async () => {
    const first = await upload(tarOf(good));
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ rootTree: expect.stringMatching(/^[0-9a-f]{64}$/), files: 2, bytes: 22 });
    const again = await upload(tarOf([...good].reverse().map((e) => ({ ...e }))));
    expect(again.body).toEqual(first.body);
    const created = await service.api('POST', '/v1/deployments', { ...service.deploymentBase, bundle: first.body });
    expect(created.status).toBe(201);
    const byTree = await service.api('POST', '/v1/deployments', { ...service.deploymentBase, bundle: first.body.rootTree });
    expect(byTree).toMatchObject({ status: 200, body: { id: created.body.id } });
    const shown = await service.api('GET', `/v1/deployments/${created.body.id}`);
    expect(shown.body.spec.bundle).toEqual(first.body);
    const unknown = await service.api('POST', '/v1/deployments', { ...service.deploymentBase, bundle: 'e'.repeat(64) });
    expect(unknown).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });

  it('refuses escaping, absolute, device and malformed archives, too many entries and too many bytes, with codes, and captures nothing', async () => {
    const before = await bundleLog();
    const attacks: Array<[string, Buffer, string, Record<string, unknown>]> = [
      ['dot-dot', tarOf([{ path: '../x', body: 'x' }]), 'INVALID_INPUT', { path: '../x', reason: 'invalid-path' }],
      ['nested dot-dot', tarOf([{ path: 'a/../../x', body: 'x' }]), 'INVALID_INPUT', { reason: 'invalid-path' }],
      ['absolute', tarOf([{ path: '/etc/cron.d/x', body: 'x' }]), 'INVALID_INPUT', { path: '/etc/cron.d/x', reason: 'invalid-path' }],
      ['symlink out', tarOf([{ path: 'l', type: '2', linkpath: '../../etc' }]), 'INVALID_INPUT', { path: 'l', reason: 'symlink-escape' }],
      ['absolute symlink', tarOf([{ path: 'l', type: '2', linkpath: '/etc/passwd' }]), 'INVALID_INPUT', { reason: 'symlink-escape' }],
      [
        'write through a symlink',
        tarOf([
          { path: 'l', type: '2', linkpath: '.' },
          { path: 'l/x', body: 'x' },
        ]),
        'INVALID_INPUT',
        { path: 'l/x', reason: 'symlink-escape' },
      ],
      ['device', tarOf([{ path: 'dev', type: '3' }]), 'INVALID_INPUT', { path: 'dev', reason: 'special-file' }],
      [
        'duplicate',
        tarOf([
          { path: 'a', body: '1' },
          { path: 'a', body: '2' },
        ]),
        'INVALID_INPUT',
        { path: 'a' },
      ],
      ['not a tar', Buffer.from('hello, not a tar archive at all'.repeat(40)), 'INVALID_INPUT', {}],
      ['private key', tarOf([{ path: 'id_deploy', body: pemBlock('RSA PRIVATE KEY') }]), 'SECRET_EXCLUDED', { path: 'id_deploy' }],
      [
        'too many entries',
        tarOf(Array.from({ length: 10_001 }, (_, i) => ({ path: `f${i}`, body: '' }))),
        'LIMIT_EXCEEDED',
        { reason: 'entry-limit' },
      ],
    ];
    for (const [name, body, code, data] of attacks) {
      const answer = await upload(body);
      expect({ name, code: answer.body.error?.code, data: answer.body.error?.data }).toMatchObject({ name, code, data });
      expect(answer.status).toBeGreaterThanOrEqual(400);
    }
    const declared = await upload(tarOf(good), { 'content-length': String(300 * 1024 * 1024) });
    expect(declared).toMatchObject({ status: 413, body: { error: { code: 'LIMIT_EXCEEDED' } } });
    const wrongType = await upload(tarOf(good), { 'content-type': 'application/octet-stream' });
    expect(wrongType).toMatchObject({ status: 415, body: { error: { code: 'UNSUPPORTED_MEDIA_TYPE' } } });
    // The private key was refused inside the capture (a failed checkpoint); no other refusal reached it.
    const added = (await bundleLog()).filter((c) => !before.some((b) => b.id === c.id));
    expect(added.map((c) => [c.status, c.error?.code])).toEqual([['failed', 'SECRET_EXCLUDED']]);
  });

  it('bounds the bytes an archive expands to (library limits)', async () => {
    const big = tarOf([
      { path: 'a', body: 'x'.repeat(4096) },
      { path: 'b', body: 'y'.repeat(4096) },
    ]);
    const chunks = async function* () {
      yield big;
    };
    const limits = { maxEntries: 10, maxBytes: 6000, maxPathBytes: 100 };
    expect(await codeOf(service.hf.bundles.captureTar(chunks(), { limits }))).toBe('LIMIT_EXCEEDED');
    const longPath = tarOf([{ path: `${'d'.repeat(60)}/${'e'.repeat(60)}`.slice(0, 99), body: 'x' }]);
    expect(
      await codeOf(
        service.hf.bundles.captureTar(
          (async function* () {
            yield longPath;
          })(),
          { limits: { ...limits, maxPathBytes: 50 } },
        ),
      ),
    ).toBe('LIMIT_EXCEEDED');
  });

  const once = (...chunks: Buffer[]) =>
    (async function* () {
      yield* chunks;
    })();
  const refusal = async (promise: Promise<unknown>) => {
    const error = (await promise.then(
      () => undefined,
      (e: unknown) => e,
    )) as { code?: string; data?: Record<string, unknown> } | undefined;
    return { code: error?.code, data: error?.data };
  };

  it('gzip and zstd archives are the same bundle as the plain one; data after the end-of-archive is refused in each', async () => {
    const plain = tarOf(good);
    const first = await upload(plain);
    expect(first.status).toBe(201);
    expect((await upload(zlib.gzipSync(plain))).body).toEqual(first.body);
    expect((await upload(zstdCompress(plain, { compressionLevel: 3 }))).body).toEqual(first.body);
    const trailing = Buffer.concat([plain, Buffer.from('appended after the archive')]);
    for (const body of [trailing, zlib.gzipSync(trailing), zstdCompress(trailing, { compressionLevel: 3 })]) {
      const answer = await upload(body);
      expect(answer).toMatchObject({
        status: 400,
        body: { error: { code: 'INVALID_INPUT', data: { reason: 'trailing-data', offset: plain.length } } },
      });
    }
  });

  it('bombs and nested members: a file of zeros inflating past the ratio, a second gzip member after the archive, garbage after the gzip stream', async () => {
    // A file of 256 MiB of zeros, its first 32 MiB sent: some KiB compressed, far past 100 times that plus the slack.
    const zeros = Buffer.concat([header({ path: 'zeros' }, 256 * 1024 * 1024), Buffer.alloc(32 * 1024 * 1024)]);
    for (const body of [zlib.gzipSync(zeros, { level: 9 }), zstdCompress(zeros, { compressionLevel: 19 })]) {
      const answer = await upload(body);
      expect(answer).toMatchObject({ status: 413, body: { error: { code: 'LIMIT_EXCEEDED', data: { reason: 'inflate-ratio' } } } });
    }
    const plain = tarOf(good);
    const twoMembers = Buffer.concat([zlib.gzipSync(plain), zlib.gzipSync(Buffer.from('a second member after the archive'))]);
    expect(await upload(twoMembers)).toMatchObject({
      status: 400,
      body: { error: { code: 'INVALID_INPUT', data: { reason: 'trailing-data', offset: plain.length } } },
    });
    const garbage = await upload(Buffer.concat([zlib.gzipSync(plain), Buffer.from('not gzip at all, after the stream')]));
    expect(garbage.status).toBe(400);
    expect(garbage.body.error?.code).toBe('INVALID_INPUT');
  });

  it('long names through pax and GNU headers extract; a truncated archive and an oversized metadata entry are refused', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(120)}`;
    const paxBody = (key: string, value: string) => {
      const line = ` ${key}=${value}\n`;
      let n = line.length + 3;
      while (`${n}${line}`.length !== n) n += 1;
      return `${n}${line}`;
    };
    const pax = tarOf([
      { path: 'PaxHeader', type: 'x', body: paxBody('path', long) },
      { path: 'short', body: 'via pax' },
      { path: '././@LongLink', type: 'L', body: `${long}2\0` },
      { path: 'short2', body: 'via gnu' },
    ]);
    const record = await service.hf.bundles.captureTar(once(pax));
    expect(record).toMatchObject({ files: 2, bytes: 14 });
    const cut = tarOf([{ path: 'a', body: 'x'.repeat(2000) }]).subarray(0, 1200);
    expect(await refusal(service.hf.bundles.captureTar(once(cut)))).toMatchObject({ code: 'INVALID_INPUT', data: { reason: 'truncated' } });
    const bigMeta = tarOf([{ path: 'PaxHeader', type: 'x', body: 'x'.repeat(1024 * 1024 + 1) }]);
    expect(await refusal(service.hf.bundles.captureTar(once(bigMeta)))).toMatchObject({
      code: 'LIMIT_EXCEEDED',
      data: { reason: 'too-large' },
    });
  });

  it('every byte read counts against maxInflatedBytes, padding and metadata included (library limits)', async () => {
    const limits = { maxEntries: 10, maxBytes: 1024 * 1024, maxPathBytes: 100, maxInflatedBytes: 64 * 1024 };
    // Files far below maxBytes, but ten pax headers of 8 KiB each in front of them.
    const padded = tarOf([
      ...Array.from({ length: 10 }, () => ({ path: 'PaxHeader', type: 'x' as const, body: 'y'.repeat(8 * 1024) })),
      { path: 'a', body: 'small' },
    ]);
    expect(await refusal(service.hf.bundles.captureTar(once(padded), { limits }))).toMatchObject({
      code: 'LIMIT_EXCEEDED',
      data: { reason: 'inflated-limit' },
    });
    expect(await refusal(service.hf.bundles.captureTar(once(zlib.gzipSync(padded)), { limits }))).toMatchObject({
      code: 'LIMIT_EXCEEDED',
      data: { reason: 'inflated-limit' },
    });
  });

  it('an aborted signal stops a library capture with its reason: nothing more is read, whatever the source has ready', async () => {
    const controller = new AbortController();
    const reason = new Error('caller went away');
    // A gzip stream of one 64 MiB file, every chunk ready at once: an abort is the only thing that can stop the reading.
    const block = Buffer.alloc(1024 * 1024, 'z');
    const members = [zlib.gzipSync(tarHeaderOfSize('big', 64 * block.length)), ...Array.from({ length: 64 }, () => zlib.gzipSync(block))];
    let pulled = 0;
    const source = (async function* () {
      for (const member of members) {
        pulled += 1;
        if (pulled === 8) controller.abort(reason);
        yield member;
      }
    })();
    await expect(service.hf.bundles.captureTar(source, { signal: controller.signal })).rejects.toBe(reason);
    expect(pulled).toBeLessThanOrEqual(9);
    // A source that never delivers more: the abort is not stuck behind it.
    const stuck = new AbortController();
    const waiting = service.hf.bundles.captureTar(
      (async function* () {
        yield zlib.gzipSync(tarHeaderOfSize('big', 1024));
        await new Promise(() => undefined);
      })(),
      { signal: stuck.signal },
    );
    setTimeout(() => stuck.abort(reason), 50);
    await expect(waiting).rejects.toBe(reason);
  });
});

/** The header block of a regular file `name` declaring `size` bytes (its body is sent separately). */
function tarHeaderOfSize(name: string, size: number): Buffer {
  return header({ path: name }, size);
}
