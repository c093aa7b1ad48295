import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { isHoldfastError } from '../errors.js';
import { listen } from './http-server.js';

function tinyApp(): Hono {
  const app = new Hono();
  app.get('/hello', (c) => c.json({ hello: 'world' }));
  app.get('/slow', async (c) => {
    await new Promise((resolve) => setTimeout(resolve, 200));
    return c.text('done');
  });
  return app;
}

describe('listen', () => {
  it('listens on an ephemeral port, serves requests and closes', async () => {
    const server = await listen(tinyApp(), { host: '127.0.0.1', port: 0 });
    expect(server.port).toBeGreaterThan(0);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    // fetch keeps the connection alive: close() must not wait for it to time out.
    const res = await fetch(`${server.url}/hello`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ hello: 'world' });
    const started = performance.now();
    await server.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await server.close();
    await expect(fetch(`${server.url}/hello`)).rejects.toThrow();
  });

  it('lets an in-flight request finish before closing', async () => {
    const server = await listen(tinyApp(), { host: '127.0.0.1', port: 0 });
    const pending = fetch(`${server.url}/slow`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = performance.now();
    const closed = server.close();
    const res = await pending;
    expect(await res.text()).toBe('done');
    await closed;
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('cuts connections still busy after the grace period', async () => {
    const app = new Hono();
    app.get('/stuck', () => new Promise<Response>(() => {}));
    const server = await listen(app, { host: '127.0.0.1', port: 0, closeGraceMs: 100 });
    const pending = fetch(`${server.url}/stuck`).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await server.close();
    expect(await pending).toBeInstanceOf(Error);
  });

  it('rejects with INVALID_INPUT when the port is taken', async () => {
    const first = await listen(tinyApp(), { host: '127.0.0.1', port: 0 });
    try {
      await listen(tinyApp(), { host: '127.0.0.1', port: first.port });
      expect.unreachable();
    } catch (error) {
      expect(isHoldfastError(error, 'INVALID_INPUT')).toBe(true);
    } finally {
      await first.close();
    }
  });
});
