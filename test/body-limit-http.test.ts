import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_REQUEST_BODY_BYTES } from '../src/server/body-limit.js';
import { listen, type RunningServer } from '../src/server/http-server.js';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** What an attacker sends: 50 MB, in 64 KiB chunks. */
const ATTACK_BYTES = 50 * 1024 * 1024;
const CHUNK_BYTES = 64 * 1024;
/**
 * What the client may have handed to its socket beyond the limit before the refusal reached it:
 * loopback socket buffers on both sides. Far below the 50 MB sent by a server that reads it all.
 */
const SLACK_BYTES = 8 * 1024 * 1024;

interface Outcome {
  readonly status: number | undefined;
  readonly body: string;
  /** Bytes the client managed to write before it saw the answer or the connection close. */
  readonly written: number;
}

/**
 * Streams `total` bytes of JSON-looking garbage to `path` as fast as the socket takes them, and
 * stops at the first answer or connection error. `declare` sends a Content-Length instead of
 * chunked encoding; `extra` adds headers.
 */
function flood(
  server: RunningServer,
  path: string,
  token: string,
  total: number,
  declare: boolean,
  extra: Record<string, string> = {},
): Promise<Outcome> {
  return new Promise((resolve) => {
    const url = new URL(path, server.url);
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...extra };
    if (declare) headers['content-length'] = String(total);
    const request = http.request(url, { method: 'POST', headers, agent: false });
    let written = 0;
    let stopped = false;
    let status: number | undefined;
    const chunks: Buffer[] = [];
    const finish = () => {
      if (stopped) return;
      stopped = true;
      resolve({ status, body: Buffer.concat(chunks).toString('utf8'), written });
    };
    request.on('response', (response) => {
      status = response.statusCode;
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        finish();
        request.destroy();
      });
      response.on('error', finish);
    });
    request.on('error', () => {
      // Reset by the server while we were still writing: the answer may already be in.
      setTimeout(finish, 50);
    });
    const chunk = Buffer.alloc(CHUNK_BYTES, 0x20);
    const pump = () => {
      while (!stopped && status === undefined && written < total) {
        written += chunk.length;
        if (!request.write(chunk)) {
          request.once('drain', pump);
          return;
        }
      }
      if (written >= total && !stopped) request.end();
    };
    pump();
  });
}

describe('request bodies are bounded while they stream (real socket)', () => {
  let svc: TestService;
  let server: RunningServer;
  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number]);
    server = await listen(svc.app, { host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await server?.close();
    await svc?.close();
  });

  const expectHealthy = async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const ok = await fetch(`${server.url}/v1/deployments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'bwrap', image: 'after-the-flood' }),
    });
    expect(ok.status).toBeLessThan(300); // 201 the first time, 200 after: deployments are content-addressed
  };

  it('a 50 MB chunked JSON body is refused with 413 LIMIT_EXCEEDED after about the limit; the server stays healthy', async () => {
    const outcome = await flood(server, '/v1/deployments', svc.token, ATTACK_BYTES, false);
    expect(outcome.status).toBe(413);
    expect(JSON.parse(outcome.body).error.code).toBe('LIMIT_EXCEEDED');
    expect(outcome.written).toBeLessThan(MAX_REQUEST_BODY_BYTES + SLACK_BYTES);
    await expectHealthy();
  });

  it('a chunked body through the idempotency hash is refused the same way, and claims no key', async () => {
    // The receipt middleware reads the body to hash it: that read is bounded too.
    const outcome = await flood(server, '/v1/tokens', svc.adminToken, ATTACK_BYTES, false, { 'idempotency-key': 'flood' });
    expect(outcome.status).toBe(413);
    expect(JSON.parse(outcome.body).error.code).toBe('LIMIT_EXCEEDED');
    expect(outcome.written).toBeLessThan(MAX_REQUEST_BODY_BYTES + SLACK_BYTES);
    expect(await svc.hf.meta.db.selectFrom('idempotency_receipts').selectAll().where('key', '=', 'flood').execute()).toEqual([]);
    await expectHealthy();
  });

  it('a declared Content-Length over the limit is refused before the body is read', async () => {
    const outcome = await flood(server, '/v1/deployments', svc.token, ATTACK_BYTES, true);
    expect(outcome.status).toBe(413);
    expect(JSON.parse(outcome.body).error.code).toBe('LIMIT_EXCEEDED');
    expect(outcome.written).toBeLessThan(SLACK_BYTES);
    await expectHealthy();
  });

  it('a body of exactly the limit is read (and rejected only as JSON), one byte more is 413', async () => {
    const send = (bytes: number) =>
      fetch(`${server.url}/v1/deployments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${svc.token}`, 'content-type': 'application/json' },
        body: new ReadableStream({
          start(controller) {
            controller.enqueue(new Uint8Array(bytes).fill(0x20));
            controller.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
    const atLimit = await send(MAX_REQUEST_BODY_BYTES);
    expect(atLimit.status).toBe(400);
    expect(((await atLimit.json()) as { error: { code: string } }).error.code).toBe('INVALID_INPUT');
    const over = await send(MAX_REQUEST_BODY_BYTES + 1);
    expect(over.status).toBe(413);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe('LIMIT_EXCEEDED');
  });
});
