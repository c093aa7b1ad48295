import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/backends.js';
import { openTestService, type TestService } from './support/service.js';

/** A page that runs script if a browser renders it from the API's origin. */
const EVIL_HTML = '<!doctype html><html><body><script>fetch("/v1/runs",{method:"POST"})</script></body></html>\n';

describe('checkpoint file downloads are attachments a browser never runs', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await openTestService(BACKENDS[0] as (typeof BACKENDS)[number], { scopePrefix: 'checkpoint-download' });
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
  });

  it('a checkpointed evil.html with a script is served as an attachment, never sniffed, in a CSP sandbox', async () => {
    const deployment = await svc.api('POST', '/v1/deployments', { ...svc.deploymentBase });
    expect(deployment.status).toBe(201);
    const run = (await svc.api('POST', '/v1/runs', { deploymentId: deployment.body.id })).body;
    const write = await svc.api('POST', `/v1/runs/${run.id}/turns`, {
      argv: ['sh', '-c', `mkdir -p site && cat > evil.html && cp evil.html 'site/evil page".html'`],
      stdin: EVIL_HTML,
    });
    expect(write.status, JSON.stringify(write.body)).toBe(200);
    expect(write.body.exit.code).toBe(0);
    const checkpointId = write.body.checkpoint.id as string;
    for (const [path, fallback] of [
      ['evil.html', 'evil.html'],
      ['site/evil page".html', 'evil_page_.html'],
    ] as const) {
      const file = await svc.app.request(`/v1/checkpoints/${checkpointId}/file?path=${encodeURIComponent(path)}`, {
        headers: { authorization: `Bearer ${svc.token}` },
      });
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toBe('application/octet-stream');
      expect(file.headers.get('x-content-type-options')).toBe('nosniff');
      expect(file.headers.get('content-security-policy')).toBe("sandbox; default-src 'none'");
      expect(file.headers.get('cache-control')).toBe('private, no-store');
      expect(file.headers.get('accept-ranges')).toBe('none');
      const disposition = file.headers.get('content-disposition') ?? '';
      expect(disposition.startsWith(`attachment; filename="${fallback}"; filename*=UTF-8''`)).toBe(true);
      const bytes = Buffer.from(await file.arrayBuffer());
      expect(file.headers.get('content-length')).toBe(String(bytes.length));
      expect(bytes.toString('utf8')).toBe(EVIL_HTML);
      // HEAD and a Range request get the same headers, and the range is not honoured (the whole file).
      for (const init of [{ method: 'HEAD' }, { headers: { range: 'bytes=0-9' } }]) {
        const other = await svc.app.request(`/v1/checkpoints/${checkpointId}/file?path=${encodeURIComponent(path)}`, {
          ...init,
          headers: { authorization: `Bearer ${svc.token}`, ...(init.headers ?? {}) },
        });
        expect(other.status).toBe(200);
        for (const header of [
          'content-type',
          'x-content-type-options',
          'content-security-policy',
          'cache-control',
          'content-disposition',
        ]) {
          expect(other.headers.get(header), header).toBe(file.headers.get(header));
        }
        const body = Buffer.from(await other.arrayBuffer());
        expect(body.toString('utf8')).toBe(init.method === 'HEAD' ? '' : EVIL_HTML);
      }
    }
  }, 120_000);
});
