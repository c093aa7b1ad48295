import http from 'node:http';
import type { Duplex } from 'node:stream';
import { type HoldfastError, InputError, NotFoundError, StoreError } from '../../../errors.js';

/** The Engine API version every request names; dockerd 20.10 and later serve it. */
export const DOCKER_API_VERSION = 'v1.41';
/** The socket used when `DOCKER_HOST` is unset. */
export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';
/** Most bytes of one JSON answer read into memory (a container list of thousands stays far below). */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** Idle keep-alive connections kept to the daemon; they do not hold the process open. */
const MAX_IDLE_SOCKETS = 8;

/** One answer of the Engine API: the status and the parsed JSON body (`undefined` when empty). */
export interface EngineAnswer {
  readonly status: number;
  readonly body: unknown;
}

/**
 * The socket path from `DOCKER_HOST` (`unix:///path`), else {@link DEFAULT_DOCKER_SOCKET}.
 * Other schemes (tcp, ssh) are refused with `STORE_UNAVAILABLE`: Holdfast speaks only to a
 * local daemon, whose socket's permissions are the access control.
 */
export function dockerSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  const host = env.DOCKER_HOST;
  if (host === undefined || host === '') return DEFAULT_DOCKER_SOCKET;
  if (host.startsWith('unix://') && host.length > 'unix://'.length) return host.slice('unix://'.length);
  throw new StoreError(`[docker] DOCKER_HOST=${host} is not supported: use unix:///path/to/docker.sock`, {
    data: { provider: 'docker' },
  });
}

/**
 * A minimal client of the Docker Engine API over its unix socket (`node:http`, no SDK): JSON
 * requests, and the hijacked connections `exec` streams through. Connection failures become
 * `STORE_UNAVAILABLE` with a hint; HTTP statuses are returned for the caller to map.
 */
export class EngineClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxFreeSockets: MAX_IDLE_SOCKETS });

  constructor(readonly socketPath: string) {}

  /** Sends one request with an optional JSON body; resolves with the status and parsed JSON. */
  request(method: string, apiPath: string, body?: unknown): Promise<EngineAnswer> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: this.socketPath,
          agent: this.agent,
          method,
          path: `/${DOCKER_API_VERSION}${apiPath}`,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': payload.length },
        },
        (res) => {
          const parts: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_RESPONSE_BYTES) {
              res.destroy(new InputError('LIMIT_EXCEEDED', `[docker] answer to ${method} ${apiPath} exceeds ${MAX_RESPONSE_BYTES} bytes`));
            } else parts.push(chunk);
          });
          res.once('error', reject);
          res.once('end', () => {
            const text = Buffer.concat(parts).toString('utf8');
            let parsed: unknown;
            try {
              parsed = text === '' ? undefined : JSON.parse(text);
            } catch {
              parsed = { message: text };
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      req.once('error', (error) => reject(this.unreachable(error)));
      req.end(payload);
    });
  }

  /**
   * Starts an exec over a hijacked connection (`Upgrade: tcp`): resolves with the raw duplex
   * socket carrying stdin one way and the multiplexed stdout/stderr frames the other, plus any
   * bytes that arrived with the upgrade answer. A non-101 answer rejects with its message.
   */
  hijack(apiPath: string, body: unknown): Promise<{ socket: Duplex; head: Buffer }> {
    const payload = Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request({
        socketPath: this.socketPath,
        agent: false,
        method: 'POST',
        path: `/${DOCKER_API_VERSION}${apiPath}`,
        headers: { 'content-type': 'application/json', 'content-length': payload.length, connection: 'Upgrade', upgrade: 'tcp' },
      });
      req.once('upgrade', (_res, socket, head) => resolve({ socket, head }));
      req.once('response', (res) => {
        const parts: Buffer[] = [];
        res.on('data', (chunk: Buffer) => parts.length < 64 && parts.push(chunk));
        res.once('end', () =>
          reject(engineError(res.statusCode ?? 0, `POST ${apiPath}`, { message: Buffer.concat(parts).toString('utf8') })),
        );
      });
      req.once('error', (error) => reject(this.unreachable(error)));
      req.end(payload);
    });
  }

  /** Closes idle keep-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  private unreachable(error: Error): Error {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'EACCES' || code === 'EPERM' || code === 'ECONNRESET') {
      return new StoreError(
        `[docker] cannot reach the Docker daemon at ${this.socketPath} (${code}): start dockerd, give this user access to the socket (group docker), or set DOCKER_HOST=unix:///path/to/docker.sock`,
        { data: { provider: 'docker', socket: this.socketPath, errno: code }, cause: error },
      );
    }
    return error;
  }
}

/** The daemon's message of an error answer. */
export function engineMessage(body: unknown): string {
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message.trim() : JSON.stringify(body);
}

/**
 * An error for an unexpected answer: 400 is the caller's `INVALID_INPUT`, 404 `NOT_FOUND`,
 * anything else (409, 5xx) `STORE_UNAVAILABLE`, all with the daemon's own message.
 */
export function engineError(status: number, what: string, body: unknown): HoldfastError {
  const message = `[docker] ${what} answered ${status}: ${engineMessage(body)}`;
  const data = { provider: 'docker', status };
  if (status === 400) return new InputError('INVALID_INPUT', message, { data });
  if (status === 404) return new NotFoundError(message, { data });
  return new StoreError(message, { data });
}
