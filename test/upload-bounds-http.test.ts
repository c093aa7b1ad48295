import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleBytesInflated } from '../src/deployments/bundle-inflate.js';
import { BUNDLE_WORKSPACE } from '../src/index.js';
import { listen, type RunningServer } from '../src/server/http-server.js';
import { BACKENDS, type BackendCase } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

const MiB = 1024 * 1024;
/** What the attack that got through appended after the end-of-archive, inside the gzip stream. */
const TRAILING_ATTACK_BYTES = 32 * MiB;
/**
 * How long the refusal of that attack may take. The code before this bound took about 100 s of
 * CPU for it (quadratic buffering after the end-of-archive); a bounded reader answers in well
 * under a second, so this is generous on a loaded machine without being a timing race.
 */
const ANSWER_WITHIN_MS = 10_000;
/** Longest a /healthz probe may wait while an upload is being read (the old reader blocked for minutes). */
const HEALTHZ_WITHIN_MS = 3_000;

/** A ustar header for a regular file `name` of `size` bytes (type `0`). */
function fileHeader(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  const octal = (n: number, length: number) => `${n.toString(8).padStart(length - 1, '0')}\0`;
  h.write(name, 0, 100);
  h.write(octal(0o644, 8), 100);
  h.write(octal(0, 8), 108);
  h.write(octal(0, 8), 116);
  h.write(octal(size, 12), 124);
  h.write(octal(946684800, 12), 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\u000000', 257);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return h;
}

/** A one-file tar: header, body padded to a block, the two zero blocks of the end-of-archive. */
function oneFileTar(name: string, body: Buffer): Buffer {
  return Buffer.concat([fileHeader(name, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512), Buffer.alloc(1024)]);
}

/**
 * A gzip stream (concatenated members, as `gzip` writes for appended input) of a tar holding
 * one file of `blocks` copies of `block`, cheap to build however large it inflates.
 */
function repeatedFileGzip(block: Buffer, blocks: number): Buffer {
  const size = block.length * blocks;
  const body = zlib.gzipSync(block, { level: 9 });
  return Buffer.concat([
    zlib.gzipSync(fileHeader('big.bin', size)),
    ...Array.from({ length: blocks }, () => body),
    zlib.gzipSync(Buffer.alloc(1024)),
  ]);
}

interface Answer {
  readonly status: number | undefined;
  readonly body: { error?: { code: string; data: Record<string, unknown> }; rootTree?: string };
  readonly ms: number;
}

/** POSTs `body` to /v1/bundles over a real socket in 64 KiB writes; resolves with the answer. */
function upload(server: RunningServer, token: string, body: Buffer): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const request = http.request(new URL('/v1/bundles', server.url), {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-tar', 'content-length': String(body.length) },
    });
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (c: Buffer) => chunks.push(c));
      response.on('end', () =>
        resolve({ status: response.statusCode, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), ms: Date.now() - started }),
      );
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** Time /healthz takes to answer. */
async function healthzMs(server: RunningServer): Promise<number> {
  const started = Date.now();
  const response = await fetch(`${server.url}/healthz`);
  expect(response.status).toBe(200);
  await response.arrayBuffer();
  return Date.now() - started;
}

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return check();
}

describe('bundle uploads are bounded by what they cost to read (real socket)', () => {
  let svc: TestService;
  let server: RunningServer;
  let tmp: string;
  const savedTmpdir = process.env.TMPDIR;
  /** Staging directories of bundle uploads (the service's temp dir is this file's own). */
  const bundleLog = async () => svc.hf.snapshots.log(BUNDLE_WORKSPACE).catch(() => []);
  const stagingDirs = () => fs.readdirSync(tmp).filter((n) => n.startsWith('holdfast-bundle-'));

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-upload-bounds-'));
    process.env.TMPDIR = tmp;
    svc = await openTestService(BACKENDS[0] as BackendCase);
    server = await listen(svc.app, { host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await server?.close();
    await svc?.close();
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('32 MiB of data after the end-of-archive, inside the gzip stream, is refused quickly as trailing data; zero padding is not', async () => {
    const tar = oneFileTar('agent.sh', Buffer.from('#!/bin/sh\necho hi\n'));
    const attack = zlib.gzipSync(Buffer.concat([tar, Buffer.alloc(TRAILING_ATTACK_BYTES, 'A')]), { level: 9 });
    expect(attack.length).toBeLessThan(100 * 1024);
    const before = await bundleLog();
    const cpu = process.cpuUsage();
    const inflatedBefore = bundleBytesInflated();
    const probe = new Promise<void>((r) => setTimeout(r, 20)).then(() => healthzMs(server));
    const answer = await upload(server, svc.token, attack);
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    const probeMs = await probe;
    // One assertion, so that a failure shows every part of it (the old reader: ~50-100 s, healthz blocked throughout, a 201).
    expect({
      status: answer.status,
      code: answer.body.error?.code,
      data: answer.body.error?.data,
      answeredInTime: answer.ms < ANSWER_WITHIN_MS,
      cpuInBounds: cpuMs < ANSWER_WITHIN_MS,
      healthzInTime: probeMs < HEALTHZ_WITHIN_MS,
    }).toEqual({
      status: 400,
      code: 'INVALID_INPUT',
      data: { reason: 'trailing-data', offset: tar.length },
      answeredInTime: true,
      cpuInBounds: true,
      healthzInTime: true,
    });
    // Read up to the first byte after the end-of-archive, not the 32 MiB behind it.
    expect(bundleBytesInflated() - inflatedBefore).toBeLessThan(2 * MiB);
    expect(await bundleLog()).toHaveLength(before.length);

    // What tar writers pad an archive with (GNU tar: a 10 KiB record) is still an archive.
    const padded = await upload(server, svc.token, zlib.gzipSync(Buffer.concat([tar, Buffer.alloc(10240 - tar.length)])));
    expect(padded.status).toBe(201);
    // Zero padding, but more than a record ever needs: trailing data too.
    const overPadded = await upload(server, svc.token, zlib.gzipSync(Buffer.concat([tar, Buffer.alloc(2 * MiB)])));
    expect(overPadded.body.error).toMatchObject({ code: 'INVALID_INPUT', data: { reason: 'trailing-data' } });
  }, 60_000);

  it('a gzip bomb (a 400 MiB file of zeros in under 1 MiB) is LIMIT_EXCEEDED after reading a bounded amount', async () => {
    const bomb = repeatedFileGzip(Buffer.alloc(MiB), 400);
    expect(bomb.length).toBeLessThan(MiB);
    const inflatedBefore = bundleBytesInflated();
    const answer = await upload(server, svc.token, bomb);
    expect(answer.status).toBe(413);
    expect(answer.body.error).toMatchObject({ code: 'LIMIT_EXCEEDED', data: { reason: 'inflate-ratio' } });
    // At most 100 x what was sent plus 16 MiB, and one chunk: far below the 400 MiB it would expand to.
    const inflated = bundleBytesInflated() - inflatedBefore;
    expect(inflated).toBeLessThan(100 * bomb.length + 17 * MiB);
    expect(stagingDirs()).toEqual([]);
  }, 60_000);

  it('a client that goes away mid-upload stops the work: the staging directory is removed and nothing more is inflated', async () => {
    // 512 MiB once inflated, about 40 times smaller sent: under every bound, expensive to read.
    const pattern = randomBytes(16 * 1024);
    const body = repeatedFileGzip(Buffer.concat(Array.from({ length: 64 }, () => pattern)), 500);
    const inflatedBefore = bundleBytesInflated();
    const request = http.request(new URL('/v1/bundles', server.url), {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/x-tar', 'content-length': String(body.length) },
    });
    request.on('error', () => undefined);
    request.write(body);
    // The server is at work: the file being extracted in its staging directory has passed 16 MiB.
    const extracted = () =>
      stagingDirs().reduce((most, dir) => {
        const file = path.join(tmp, dir, 'bundle', 'big.bin');
        return Math.max(most, fs.existsSync(file) ? fs.statSync(file).size : 0);
      }, 0);
    expect(await until(() => extracted() > 16 * MiB, 30_000)).toBe(true);
    request.destroy();
    expect(await until(() => stagingDirs().length === 0, 5_000)).toBe(true);
    const stopped = bundleBytesInflated();
    await new Promise((r) => setTimeout(r, 500));
    expect(bundleBytesInflated()).toBe(stopped);
    expect(stopped - inflatedBefore).toBeLessThan(500 * MiB);
    expect(await healthzMs(server)).toBeLessThan(HEALTHZ_WITHIN_MS);
  }, 60_000);

  it('/healthz answers promptly all through a large upload', async () => {
    const pattern = randomBytes(16 * 1024);
    const body = repeatedFileGzip(Buffer.concat(Array.from({ length: 64 }, () => pattern)), 64);
    const answer = upload(server, svc.token, body);
    let done = false;
    void answer.finally(() => {
      done = true;
    });
    const probes: number[] = [];
    while (!done) {
      probes.push(await healthzMs(server));
      await new Promise((r) => setTimeout(r, 50));
    }
    const result = await answer;
    expect({ status: result.status, error: result.body.error }).toEqual({ status: 201, error: undefined });
    expect(probes.length).toBeGreaterThan(0);
    expect(Math.max(...probes)).toBeLessThan(HEALTHZ_WITHIN_MS);
  }, 120_000);
});
