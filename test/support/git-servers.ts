import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import path from 'node:path';

/**
 * Real git servers on loopback for tests of host clones: `git daemon --export-all` (the
 * `git://` protocol) and `git http-backend` behind a small HTTP server (smart HTTP), each
 * serving the bare repositories under one directory.
 */

/** A running server: the URL of a repository under its root, and how to stop it. */
export interface GitServer {
  readonly port: number;
  url(repo: string): string;
  close(): Promise<void>;
}

/** One request the HTTP server saw. */
export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly host: string | undefined;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitForPort(port: number, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    if (child.exitCode !== null) throw new Error(`git daemon exited ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`git daemon did not listen on ${port}`);
}

/** `git daemon` serving every repository under `root` on 127.0.0.1. */
export async function startGitDaemon(root: string): Promise<GitServer> {
  const port = await freePort();
  const child = spawn(
    'git',
    ['daemon', '--export-all', '--reuseaddr', '--informative-errors', `--base-path=${root}`, '--listen=127.0.0.1', `--port=${port}`, root],
    { stdio: 'ignore', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } },
  );
  await waitForPort(port, child);
  return {
    port,
    url: (repo) => `git://127.0.0.1:${port}/${repo}`,
    close: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Options of {@link startGitHttp}. */
export interface GitHttpOptions {
  /** Answer 401 (asking for basic auth) unless the request carries exactly this `Authorization`. */
  readonly requireAuthorization?: string;
  /** Answer every request with a redirect to this URL instead. */
  readonly redirectTo?: string;
  /** Serve https with this key and certificate (PEM) instead of http. */
  readonly tls?: { readonly key: string; readonly cert: string };
  /** Headers added to every answer (a remote trying to smuggle cookies or credentials back). */
  readonly extraHeaders?: Readonly<Record<string, string>>;
}

/** Smart HTTP (`git http-backend`) for every repository under `root` on 127.0.0.1; `seen` records each request. */
export async function startGitHttp(root: string, options: GitHttpOptions = {}): Promise<GitServer & { seen: SeenRequest[] }> {
  const seen: SeenRequest[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    for (const [k, v] of Object.entries(options.extraHeaders ?? {})) res.setHeader(k, v);
    seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, host: req.headers.host });
    if (options.redirectTo !== undefined) {
      res.writeHead(302, { Location: `${options.redirectTo}${req.url ?? ''}` }).end();
      return;
    }
    if (options.requireAuthorization !== undefined && req.headers.authorization !== options.requireAuthorization) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_ADDR: '127.0.0.1',
        // http-backend takes pushes from an authenticated user only.
        ...(options.requireAuthorization === undefined ? {} : { REMOTE_USER: 'tester' }),
        ...(req.headers['content-encoding'] === undefined ? {} : { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] }),
        ...(req.headers['git-protocol'] === undefined ? {} : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else res.setHeader(name, value);
      }
      res.statusCode = status;
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  };
  const server = options.tls === undefined ? http.createServer(handler) : https.createServer(options.tls, handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    seen,
    url: (repo) => `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}/${repo}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A throwaway self-signed certificate for 127.0.0.1 (openssl), written under `dir`; `certFile` is what a client trusts. */
export function selfSignedCertificate(dir: string): { key: string; cert: string; certFile: string } {
  const keyFile = path.join(dir, 'tls-key.pem');
  const certFile = path.join(dir, 'tls-cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
  return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8'), certFile };
}
