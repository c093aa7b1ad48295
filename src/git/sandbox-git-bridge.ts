import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { Transform, type TransformCallback, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tls from 'node:tls';
import type { GitConfig } from '../config.js';
import { KeyedMutex } from '../core/keyed-mutex.js';
import { type ErrorCode, errorToJson, HoldfastError, InputError, isHoldfastError, NotFoundError, StoreError } from '../errors.js';
import { checkReposAllowed, DEFAULT_GIT_PORTS, type RepoBinding, repoAddress } from '../model/repo-bindings.js';
import { basicAuthorization, credentialFor } from './git-environment.js';
import { pinnedAddress } from './host-address.js';
import { CLONE_TIMEOUT_MS } from './host-clone.js';

/** Tries of a GET (ref advertisement) that fails before any byte reached the sandbox; a POST is tried once. */
const GET_TRIES = 3;
/** The pause before a GET is tried again. */
const GET_RETRY_DELAY_MS = 500;
/** A remote that sends or takes no byte for this long is given up. */
const REMOTE_IDLE_TIMEOUT_MS = 60_000;
/** How long a request waits for the one before it on the same binding. */
const BINDING_QUEUE_WAIT_MS = CLONE_TIMEOUT_MS;
/** The git services, and the content type of each one's POST body. */
const SERVICES = {
  'git-upload-pack': 'application/x-git-upload-pack-request',
  'git-receive-pack': 'application/x-git-receive-pack-request',
} as const;
type Service = keyof typeof SERVICES;
/** Response headers passed back to the sandbox; every other (cookies, auth challenges, locations) is dropped. */
const RESPONSE_HEADERS = ['content-type', 'content-encoding', 'cache-control', 'expires', 'pragma'] as const;
/** The status a refusal answers the sandbox with; an auth failure is 403, so git there never asks for a credential. */
const ERROR_STATUS: Partial<Record<ErrorCode, number>> = {
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  INVALID_INPUT: 400,
  LIMIT_EXCEEDED: 413,
  FORBIDDEN: 403,
  UNAUTHORIZED: 403,
  STALE_LEASE: 403,
  CONFLICT: 403,
  REPOSITORY_UNSUPPORTED: 501,
  TIMEOUT: 504,
  STORE_UNAVAILABLE: 502,
};

/** The run a relay belongs to, as the bridge checks every request against it. */
export interface BridgeRun {
  readonly runId: string;
  readonly tenantName: string;
  /** The lease epoch of the session that started the relay. */
  readonly epoch: number;
  readonly bindings: readonly RepoBinding[];
}

/** One bridged request as the run's events record it (no header, URL query or byte of content). */
export interface BridgeRecord {
  readonly binding: string | null;
  readonly service: Service | null;
  readonly method: string;
  readonly status: number;
  readonly requestBytes: number;
  readonly responseBytes: number;
  readonly code?: ErrorCode;
  readonly attempts: number;
}

/** What the bridge needs from the host. */
export interface SandboxGitBridgeDeps {
  readonly git: GitConfig;
  /** Rejects (`STALE_LEASE`, `CONFLICT` reason `ended`) unless the run is live and the epoch still holds its lease. */
  readonly checkRun: (run: BridgeRun) => Promise<void>;
  /** Called once per request, after its answer. */
  readonly record: (run: BridgeRun, record: BridgeRecord, durationMs: number) => void;
  /** Deadline of one request, remote answer included (default the host clone's). */
  readonly requestTimeoutMs?: number;
}

/** What one request moved, and how its body ended when it failed. */
interface Counts {
  requestBytes: number;
  responseBytes: number;
  attempts: number;
  bodyError?: ErrorCode;
}

interface Parsed {
  readonly binding: RepoBinding;
  readonly service: Service;
  /** `info/refs?service=…` or the service's name. */
  readonly suffix: string;
  readonly method: 'GET' | 'POST';
}

/**
 * git from the sandbox, judged and done by the host (docs/repositories.md, "git from the
 * sandbox"). Each request the relay carries is refused unless it is one of git's smart-HTTP
 * calls (`GET /<binding>/info/refs?service=git-upload-pack|git-receive-pack`, `POST
 * /<binding>/git-upload-pack|git-receive-pack`, nothing else, in origin form) on a binding of
 * the relay's run, while that run is live under the same lease epoch; then the host makes the
 * call itself to the binding's URL, with the operator's allowlist checked again, the host's
 * resolved address pinned, no redirect followed, the operator's credential for that host and
 * tenant added here (never sent to the sandbox: the answer's headers are an allowlist, and an
 * auth challenge becomes 403 so git in the sandbox never asks for one), bounded in time and in
 * bytes each way (`git.maxPackBytes`), one request at a time per binding, a GET tried again a
 * bounded number of times before any byte was answered, a POST never (no repository operation
 * is replayed). Only http(s) bindings are reachable; ssh and git ones are
 * `REPOSITORY_UNSUPPORTED`. Refusals answer `text/plain` with the code in `X-Holdfast-Error`
 * and the body (git shows it).
 */
export class SandboxGitBridge {
  private readonly queue = new KeyedMutex();
  private readonly ca: readonly string[] | undefined;

  constructor(private readonly deps: SandboxGitBridgeDeps) {
    this.ca = deps.git.caFile === undefined ? undefined : [...tls.rootCertificates, fs.readFileSync(deps.git.caFile, 'utf8')];
  }

  /** The HTTP handler of one run's relay. */
  handlerFor(run: BridgeRun): (req: http.IncomingMessage, res: http.ServerResponse) => void {
    return (req, res) => void this.handle(run, req, res);
  }

  private async handle(run: BridgeRun, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const started = performance.now();
    const counts: Counts = { requestBytes: 0, responseBytes: 0, attempts: 0 };
    let parsed: Parsed | undefined;
    let code: ErrorCode | undefined;
    try {
      parsed = parseRequest(req.method ?? '', req.url ?? '', run.bindings);
      await this.deps.checkRun(run);
      const unlock = await this.queue.acquire(`${run.runId}\0${parsed.binding.name}`, BINDING_QUEUE_WAIT_MS);
      try {
        await this.deps.checkRun(run);
        await this.forward(run, parsed, req, res, counts);
      } finally {
        unlock();
      }
    } catch (error) {
      code = isHoldfastError(error) ? error.code : 'INTERNAL';
      refuse(res, code, isHoldfastError(error) ? error.message : 'the git bridge failed');
    } finally {
      if (!req.complete) req.resume();
      this.deps.record(
        run,
        {
          binding: parsed?.binding.name ?? null,
          service: parsed?.service ?? null,
          method: (req.method ?? '').slice(0, 16),
          status: res.statusCode,
          requestBytes: counts.requestBytes,
          responseBytes: counts.responseBytes,
          attempts: counts.attempts,
          // A body cut after the remote answered (over the cap, the sandbox went away) is still the request's outcome.
          ...(code === undefined ? (counts.bodyError === undefined ? {} : { code: counts.bodyError }) : { code }),
        },
        performance.now() - started,
      );
    }
  }

  private async forward(
    run: BridgeRun,
    parsed: Parsed,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    counts: Counts,
  ): Promise<void> {
    const { git } = this.deps;
    const { binding } = parsed;
    const address = repoAddress(binding.url);
    if (address.protocol !== 'https' && address.protocol !== 'http') {
      throw new HoldfastError(
        'REPOSITORY_UNSUPPORTED',
        `binding ${binding.name} is an ${address.protocol} repository: only https (and http, where the operator allows it) bindings can be reached from the sandbox`,
        { data: { repo: binding.name, reason: 'bridge-protocol', protocol: address.protocol } },
      );
    }
    checkReposAllowed([binding], git);
    const declared = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
    if (declared !== undefined && !(declared <= git.maxPackBytes)) throw tooLarge('request', git.maxPackBytes);
    const ip = await pinnedAddress(address.host, git.allowPrivateAddresses);
    const url = new URL(binding.url);
    const base = url.pathname.replace(/\/+$/, '');
    const port = address.port ?? DEFAULT_GIT_PORTS[address.protocol];
    const headers = forwardedHeaders(req, parsed, address.host, address.port);
    // As for host clones: the operator's credential for this host and tenant, over https only.
    const authorization = basicAuthorization(credentialFor(git.credentials, address.host, run.tenantName), address.protocol);
    if (authorization !== undefined) headers.authorization = authorization;
    const deadline = AbortSignal.timeout(this.deps.requestTimeoutMs ?? CLONE_TIMEOUT_MS);
    const options: https.RequestOptions = {
      protocol: `${address.protocol}:`,
      host: ip,
      port,
      path: `${base}/${parsed.suffix}`,
      method: parsed.method,
      headers,
      signal: deadline,
      agent: false,
      ...(address.protocol === 'https' && !/^[0-9.]+$|:/.test(address.host) ? { servername: address.host } : {}),
      ...(this.ca === undefined ? {} : { ca: [...this.ca] }),
    };
    const tries = parsed.method === 'GET' ? GET_TRIES : 1;
    let upstream: http.IncomingMessage | undefined;
    for (let attempt = 1; upstream === undefined; attempt += 1) {
      counts.attempts = attempt;
      try {
        upstream = await this.send(options, parsed.method === 'POST' ? req : undefined, git.maxPackBytes, counts);
        if (parsed.method === 'GET' && upstream.statusCode !== undefined && upstream.statusCode >= 502 && attempt < tries) {
          upstream.resume();
          upstream = undefined;
        }
      } catch (error) {
        if (parsed.method === 'POST' || attempt >= tries || deadline.aborted || isHoldfastError(error))
          throw remoteError(error, binding, deadline);
      }
      if (upstream === undefined) await new Promise((resolve) => setTimeout(resolve, GET_RETRY_DELAY_MS));
    }
    await this.answer(upstream, res, binding, git.maxPackBytes, counts, deadline);
  }

  /** One call to the remote: resolves with its answer's head; a POST streams `body` (counted, capped). */
  private send(
    options: https.RequestOptions,
    body: http.IncomingMessage | undefined,
    maxBytes: number,
    counts: Counts,
  ): Promise<http.IncomingMessage> {
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const call = (options.protocol === 'https:' ? https : http).request(options, resolve);
      call.setTimeout(REMOTE_IDLE_TIMEOUT_MS, () => call.destroy(new HoldfastError('TIMEOUT', 'the remote stopped answering')));
      call.on('error', reject);
      if (body === undefined) {
        call.end();
        return;
      }
      const counter = new ByteCap(maxBytes, 'request', (n) => {
        counts.requestBytes += n;
      });
      // Piped, not in the pipeline: a failed call must not destroy the sandbox's request, whose connection carries the refusal.
      body.pipe(counter);
      pipeline(counter, call).catch((error: unknown) => {
        body.unpipe(counter);
        counts.bodyError = isHoldfastError(error) ? error.code : 'CANCELLED';
        call.destroy();
        reject(error);
      });
    });
  }

  /** Passes the remote's answer on: its status (redirects and auth challenges refused), allowed headers, bytes capped. */
  private async answer(
    upstream: http.IncomingMessage,
    res: http.ServerResponse,
    binding: RepoBinding,
    maxBytes: number,
    counts: { responseBytes: number },
    deadline: AbortSignal,
  ): Promise<void> {
    const status = upstream.statusCode ?? 502;
    if (status >= 300 && status < 400) {
      upstream.resume();
      throw new HoldfastError('FORBIDDEN', `the remote of ${binding.name} answered a redirect (${status}); the bridge follows none`, {
        data: { repo: binding.name, reason: 'redirect', status },
      });
    }
    if (status === 401 || status === 407) {
      upstream.resume();
      throw new HoldfastError(
        'UNAUTHORIZED',
        `the remote of ${binding.name} refused the operator's credentials (${status}); the operator's HOLDFAST_GIT_CREDENTIALS_FILE decides them, not the sandbox`,
        { data: { repo: binding.name, status } },
      );
    }
    res.statusCode = status;
    for (const name of RESPONSE_HEADERS) {
      const value = upstream.headers[name];
      if (typeof value === 'string' && /^[\x20-\x7e]*$/.test(value)) res.setHeader(name, value);
    }
    const counter = new ByteCap(maxBytes, 'response', (n) => {
      counts.responseBytes += n;
    });
    try {
      await pipeline(upstream, counter, into(res), { signal: deadline });
    } catch (error) {
      // Thrown on: the refusal answers it while no byte was sent (a remote that answered its
      // head and then stalled), else the sandbox sees a cut connection; the event says why.
      upstream.destroy();
      throw remoteError(error, binding, deadline);
    }
  }
}

/**
 * The request as the bridge accepts it, or `NOT_FOUND` (no such binding, any other path or an
 * absolute URL), `METHOD_NOT_ALLOWED`, `INVALID_INPUT` (a POST body of the wrong type).
 */
function parseRequest(method: string, target: string, bindings: readonly RepoBinding[]): Parsed {
  const m =
    /^\/([A-Za-z0-9][A-Za-z0-9._-]*)\/(info\/refs\?service=(git-upload-pack|git-receive-pack)|(git-upload-pack|git-receive-pack))$/.exec(
      target,
    );
  const binding = m === null ? undefined : bindings.find((b) => b.name === m[1]);
  if (m === null || binding === undefined) {
    throw new NotFoundError('not a git smart-HTTP call on a repository binding of this run', {
      data: { reason: m === null ? 'path' : 'binding' },
    });
  }
  const service = (m[3] ?? m[4]) as Service;
  const wanted = m[3] !== undefined ? 'GET' : 'POST';
  if (method !== wanted)
    throw new HoldfastError('METHOD_NOT_ALLOWED', `${m[2]} takes ${wanted}`, { data: { method: method.slice(0, 16) } });
  return { binding, service, suffix: m[2] as string, method: wanted };
}

/** The request headers the remote gets: git's own, checked, and the remote's `Host`; nothing else of the sandbox's. */
function forwardedHeaders(req: http.IncomingMessage, parsed: Parsed, host: string, port: number | undefined): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {
    host: `${host.includes(':') ? `[${host}]` : host}${port === undefined ? '' : `:${port}`}`,
    'user-agent': 'git/holdfast-bridge',
    accept: '*/*',
  };
  const protocol = req.headers['git-protocol'];
  if (typeof protocol === 'string' && /^[A-Za-z0-9=:.,_-]{1,256}$/.test(protocol)) out['git-protocol'] = protocol;
  if (parsed.method === 'POST') {
    if (req.headers['content-type'] !== SERVICES[parsed.service]) {
      throw new InputError('INVALID_INPUT', `a ${parsed.service} call carries ${SERVICES[parsed.service]}`, {
        data: { reason: 'content-type' },
      });
    }
    out['content-type'] = SERVICES[parsed.service];
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && encoding !== 'gzip') {
      throw new InputError('INVALID_INPUT', 'a git request body is plain or gzip', { data: { reason: 'content-encoding' } });
    }
    if (encoding === 'gzip') out['content-encoding'] = 'gzip';
    out.accept = `application/x-${parsed.service}-result`;
  }
  return out;
}

/**
 * Writes into the sandbox's response without handing it to the pipeline, which destroys its
 * streams on failure: the response must live on to carry the refusal while nothing was sent.
 */
function into(res: http.ServerResponse): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (res.destroyed) {
        done(new HoldfastError('CANCELLED', 'the sandbox closed its request'));
        return;
      }
      if (res.write(chunk)) done();
      else {
        const settle = (): void => {
          res.off('drain', settle);
          res.off('close', settle);
          done(res.destroyed ? new HoldfastError('CANCELLED', 'the sandbox closed its request') : null);
        };
        res.on('drain', settle);
        res.on('close', settle);
      }
    },
    final(done) {
      res.end(() => done());
    },
  });
}

/** Counts the bytes passing and fails with `LIMIT_EXCEEDED` past `max`. */
class ByteCap extends Transform {
  private seen = 0;

  constructor(
    private readonly max: number,
    private readonly what: 'request' | 'response',
    private readonly onBytes: (n: number) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    this.onBytes(chunk.length);
    if (this.seen > this.max) done(tooLarge(this.what, this.max));
    else done(null, chunk);
  }
}

function tooLarge(what: 'request' | 'response', max: number): HoldfastError {
  return new InputError('LIMIT_EXCEEDED', `the ${what} is over the operator's ${max}-byte cap (HOLDFAST_GIT_MAX_PACK_BYTES)`, {
    data: { limit: max, what },
  });
}

function remoteError(error: unknown, binding: RepoBinding, deadline: AbortSignal): HoldfastError {
  if (isHoldfastError(error)) return error;
  if (deadline.aborted)
    return new HoldfastError('TIMEOUT', `the remote of ${binding.name} did not answer in time`, { data: { repo: binding.name } });
  return new StoreError(`the remote of ${binding.name} could not be reached`, {
    data: { repo: binding.name, error: errorToJson(error).code ?? null },
  });
}

/** Answers a refusal, unless the answer already started (then the connection is cut). */
function refuse(res: http.ServerResponse, code: ErrorCode, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `holdfast git bridge: ${code}: ${message}\n`;
  res.writeHead(ERROR_STATUS[code] ?? 500, {
    'content-type': 'text/plain; charset=utf-8',
    'x-holdfast-error': code,
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}
