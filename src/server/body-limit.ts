import type { MiddlewareHandler } from 'hono';
import { InputError } from '../errors.js';
import type { AppEnv } from './app-env.js';

/** Largest request body a route accepts unless it declares its own limit (`RouteDef.maxBodyBytes`). */
export const MAX_REQUEST_BODY_BYTES = 1024 * 1024;

/**
 * Bounds the request body while it streams, for every reader after it (JSON parsing, the
 * idempotency hash, uploads): a `Content-Length` above `maxBytes` is refused before anything is
 * read; a body without one (chunked) is counted as it arrives and reading it fails as soon as
 * it passes `maxBytes`, so at most `maxBytes` plus one chunk is ever held, and nothing is
 * buffered here. Either way the answer is 413 `LIMIT_EXCEEDED` with `Connection: close`, so the
 * server stops receiving the rest instead of draining it.
 */
export function bodyLimit(maxBytes: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const source = c.req.raw.body;
    if (source === null) return next();
    const declared = c.req.header('content-length');
    if (declared !== undefined && Number(declared) > maxBytes) {
      c.header('connection', 'close');
      throw tooLarge(maxBytes, Number(declared));
    }
    let exceeded = false;
    const reader = source.getReader();
    let received = 0;
    const bounded = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        received += value.byteLength;
        if (received > maxBytes) {
          exceeded = true;
          await reader.cancel().catch(() => undefined);
          controller.error(tooLarge(maxBytes));
          return;
        }
        controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    c.req.raw = new Request(c.req.raw, { body: bounded, duplex: 'half' } as RequestInit);
    await next();
    if (exceeded) c.res.headers.set('connection', 'close');
  };
}

function tooLarge(maxBytes: number, declaredBytes?: number): InputError {
  return new InputError('LIMIT_EXCEEDED', `request bodies are limited to ${maxBytes} bytes here: send less`, {
    data: { maxBytes, ...(declaredBytes === undefined ? {} : { declaredBytes }) },
  });
}
