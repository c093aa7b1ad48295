/**
 * Binds a fetch-style app (a Hono app) to a Node HTTP server and shuts it down cleanly:
 * in-flight requests finish, idle keep-alive connections are closed at once, and a grace
 * deadline bounds how long a slow client can hold shutdown up.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { type HttpBindings, serve } from '@hono/node-server';
import { describeError, HoldfastError, InputError } from '../errors.js';

/** Something that answers requests; `env` carries Node's request/response for Hono's `c.env`. */
export interface FetchApp {
  fetch: (request: Request, env: HttpBindings) => Response | Promise<Response>;
}

/** Where to listen. */
export interface ListenOptions {
  /** Interface address, e.g. `127.0.0.1`, `::1`, `0.0.0.0`. */
  readonly host: string;
  /** TCP port; 0 picks a free one (read it back from the result). */
  readonly port: number;
  /** How long `close()` lets in-flight requests run before cutting connections; default 10 s. */
  readonly closeGraceMs?: number;
}

/** A listening server. */
export interface RunningServer {
  /** Base URL, e.g. `http://127.0.0.1:43125` (IPv6 hosts are bracketed). */
  readonly url: string;
  /** The bound port, also when 0 was requested. */
  readonly port: number;
  /** Stops accepting connections and resolves once the server has closed; idempotent. */
  close(): Promise<void>;
}

/** Default of {@link ListenOptions.closeGraceMs}. */
export const CLOSE_GRACE_MS = 10_000;

/** Starts listening; rejects with `INVALID_INPUT` if the address cannot be bound (e.g. `EADDRINUSE`). */
export async function listen(app: FetchApp, options: ListenOptions): Promise<RunningServer> {
  const server = await new Promise<Server>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      const data = { host: options.host, port: options.port, errno: error.code ?? null };
      const message = `cannot listen on ${options.host}:${options.port}: ${describeError(error)}; pick a free port or host`;
      reject(new InputError('INVALID_INPUT', message, { cause: error, data }));
    };
    // Without overrides @hono/node-server builds a plain `node:http` server.
    const fetch = (request: Request, env: unknown) => app.fetch(request, env as HttpBindings);
    const created = serve({ fetch, hostname: options.host, port: options.port }, () => {
      created.off('error', onError);
      resolve(created as Server);
    });
    created.once('error', onError);
  });
  let closing: Promise<void> | undefined;
  const address = server.address();
  if (address === null || typeof address === 'string') {
    server.close();
    throw new HoldfastError('INTERNAL', `HTTP server bound to a non-TCP address ${String(address)}`);
  }
  // A response still running at close() keeps its keep-alive socket open afterwards; close
  // such sockets as soon as they go idle instead of waiting for the client to drop them.
  server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    response.once('close', () => {
      if (closing !== undefined) setImmediate(() => server.closeIdleConnections());
    });
  });
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const graceMs = options.closeGraceMs ?? CLOSE_GRACE_MS;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () => {
      closing ??= closeServer(server, graceMs);
      return closing;
    },
  };
}

function closeServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
    // A pending deadline must not keep the process alive once everything else is done.
    deadline.unref();
    server.close((error) => {
      clearTimeout(deadline);
      if (error === undefined) resolve();
      else reject(error);
    });
    // `close()` waits for every socket; idle keep-alive ones would otherwise hold it open.
    server.closeIdleConnections();
  });
}
